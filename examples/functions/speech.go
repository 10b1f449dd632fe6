package functions

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
)

var speechToTextSpec = spec{
	name: "speech-to-text",
	summary: "stand-in recogniser over 16-bit PCM WAV: energy/zero-crossing segmentation, " +
		"one word per voiced segment, chosen by its pitch",
	serves: []string{"audio-translation/speech-to-text"},
	inUnit: kb, outUnit: kb,
	build: stateless(runSpeechToText),
}

// The recogniser's knobs. A 20 ms frame is the usual speech-analysis unit.
// A voiced frame is loud (RMS above about -36 dBFS) and tonal (its
// zero-crossing pitch is low; noise and fricatives cross far more often).
// A segment needs 60 ms of voice, and ends after 40 ms of silence, so a
// click is not a word and a short dip inside a word does not split it.
const (
	frameMillis     = 20
	voicedRMS       = 500.0
	maxVoicedHz     = 1200.0
	minVoicedFrames = 3
	hangoverFrames  = 2
)

// speechVocabulary holds the words the stand-in can "hear". Word i is
// recognised from a segment whose pitch is nearest vocabularyHz(i); the
// payload generator speaks word i as a tone at that pitch, so generated
// audio transcribes back to the words it was made from.
var speechVocabulary = []string{
	"hello", "world", "good", "morning", "thank", "you", "please", "help",
	"the", "meeting", "is", "today", "tomorrow", "we", "need", "more",
	"time", "call", "me", "later", "yes", "no", "water", "food",
	"friend", "house", "city", "train", "late", "early", "home", "work",
}

// Word pitches start at a low voice's 150 Hz, 25 Hz apart; the top word
// sits at 925 Hz, under maxVoicedHz.
const (
	vocabularyBaseHz = 150.0
	vocabularyStepHz = 25.0
)

func vocabularyHz(i int) float64 { return vocabularyBaseHz + vocabularyStepHz*float64(i) }

// wordAt maps a pitch to the nearest vocabulary word; out-of-range pitches
// clamp to the ends, so every voiced segment yields a word.
func wordAt(hz float64) string {
	i := int(math.Round((hz - vocabularyBaseHz) / vocabularyStepHz))
	return speechVocabulary[min(max(i, 0), len(speechVocabulary)-1)]
}

func runSpeechToText(_ context.Context, req request) (result, error) {
	audio, err := parseWAV(req.body)
	if err != nil {
		return result{}, err
	}
	tokens, samples := transcribe(audio)
	return result{
		body:        []byte(strings.Join(tokens, " ")),
		contentType: "text/plain; charset=utf-8",
		work:        samples,
	}, nil
}

// frameStats is what segmentation needs of one frame.
type frameStats struct {
	rms       float64
	crossings int
	samples   int
}

// hz is the frame's pitch estimated from its zero crossings: a tone at f Hz
// crosses zero 2f times a second.
func (f frameStats) hz(rate int) float64 {
	return float64(f.crossings) * float64(rate) / (2 * float64(f.samples))
}

// transcribe segments the audio and names each voiced segment. It reads
// every sample once, so its cost is linear in the duration; it returns the
// number of samples read as the work done.
func transcribe(a wavAudio) ([]string, int64) {
	var (
		tokens []string
		seg    segmenter
	)
	frameLen := max(a.sampleRate*frameMillis/1000, 1)
	prev := int16(0)
	for start := 0; start < a.frames(); start += frameLen {
		f, last := measureFrame(a, start, min(start+frameLen, a.frames()), prev)
		prev = last
		if tok, ok := seg.push(f, a.sampleRate); ok {
			tokens = append(tokens, tok)
		}
	}
	if tok, ok := seg.close(a.sampleRate); ok {
		tokens = append(tokens, tok)
	}
	return tokens, int64(a.frames() * a.channels)
}

// measureFrame computes RMS and zero crossings of frames [from, to), mixed
// down to mono. prev is the sample before the frame, so a crossing at a
// frame boundary is counted once.
func measureFrame(a wavAudio, from, to int, prev int16) (frameStats, int16) {
	var sumSq float64
	f := frameStats{samples: to - from}
	for i := from; i < to; i++ {
		s := monoSample(a, i)
		sumSq += float64(s) * float64(s)
		if (s >= 0) != (prev >= 0) {
			f.crossings++
		}
		prev = s
	}
	f.rms = math.Sqrt(sumSq / float64(f.samples))
	return f, prev
}

// monoSample averages the channels of sample frame i.
func monoSample(a wavAudio, i int) int16 {
	off := i * 2 * a.channels
	sum := 0
	for c := range a.channels {
		sum += int(int16(binary.LittleEndian.Uint16(a.data[off+2*c:])))
	}
	return int16(sum / a.channels)
}

// segmenter groups voiced frames into segments.
type segmenter struct {
	voiced    int // voiced frames in the open segment
	silent    int // unvoiced frames since its last voiced one
	crossings int
	samples   int
}

// push adds one frame and returns a word when it closes a segment.
func (s *segmenter) push(f frameStats, rate int) (string, bool) {
	if f.rms >= voicedRMS && f.hz(rate) <= maxVoicedHz {
		s.voiced++
		s.silent = 0
		s.crossings += f.crossings
		s.samples += f.samples
		return "", false
	}
	if s.voiced == 0 {
		return "", false
	}
	s.silent++
	if s.silent < hangoverFrames {
		return "", false
	}
	return s.close(rate)
}

// close ends the open segment; it yields a word if the segment was long
// enough to be speech. The pitch is taken over the whole segment, which is
// far more precise than any single frame's.
func (s *segmenter) close(rate int) (string, bool) {
	long := s.voiced >= minVoicedFrames
	seg := frameStats{crossings: s.crossings, samples: s.samples}
	*s = segmenter{}
	if !long {
		return "", false
	}
	return wordAt(seg.hz(rate)), true
}
