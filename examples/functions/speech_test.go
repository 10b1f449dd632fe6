package functions

import (
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
)

// Generated speech transcribes back to the words it was made from.
func TestSpeechToTextHearsGeneratedWords(t *testing.T) {
	body, spoken := synthSpeech(64<<10, testRand())
	if len(spoken) < 10 {
		t.Fatalf("only %d words in 64 KB of speech", len(spoken))
	}
	rec, out := postOK(t, mustHandler(t, "speech-to-text"), body, nil)
	if got, want := rec.Body.String(), strings.Join(spoken, " "); got != want {
		t.Errorf("transcript\n%q\nwant\n%q", got, want)
	}
	if out != float64(rec.Body.Len())/1024 {
		t.Errorf("X-Output-Size %v for %d bytes", out, rec.Body.Len())
	}
}

// Every vocabulary pitch is recognised as its own word, including at a
// higher sample rate and in stereo.
func TestSpeechToTextEveryWordAtOtherRatesAndChannels(t *testing.T) {
	for _, rate := range []int{8000, 44100} {
		for _, channels := range []int{1, 2} {
			var want []string
			var pcm []int16
			frame := rate * frameMillis / 1000
			for i, w := range speechVocabulary {
				pcm = append(pcm, make([]int16, 5*frame)...)
				pcm = append(pcm, toneAt(vocabularyHz(i), rate, 10*frame)...)
				want = append(want, w)
			}
			audio := wavAudio{channels: channels, sampleRate: rate, data: interleave(pcm, channels)}
			got, work := transcribe(audio)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%d Hz x%d: heard %q, want %q", rate, channels, got, want)
			}
			if work != int64(len(pcm)*channels) {
				t.Errorf("%d Hz x%d: work %d, want %d samples", rate, channels, work, len(pcm)*channels)
			}
		}
	}
}

// Clicks shorter than a word and loud noise (too many zero crossings) are
// not speech.
func TestSpeechToTextIgnoresClicksAndNoise(t *testing.T) {
	rate := 8000
	frame := rate * frameMillis / 1000
	pcm := make([]int16, 10*frame)
	pcm = append(pcm, toneAt(300, rate, 2*frame)...) // 40 ms: a click
	pcm = append(pcm, make([]int16, 10*frame)...)
	noise := make([]int16, 20*frame)
	rng := testRand()
	for i := range noise {
		noise[i] = int16(rng.IntN(16000) - 8000)
	}
	pcm = append(pcm, noise...)
	if got, _ := transcribe(wavAudio{channels: 1, sampleRate: rate, data: interleave(pcm, 1)}); len(got) != 0 {
		t.Errorf("heard %q in a click and noise", got)
	}
}

func toneAt(hz float64, rate, n int) []int16 {
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(speechAmplitude * math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
	}
	return s
}

// interleave writes mono samples as little-endian PCM with the sample
// repeated on every channel.
func interleave(mono []int16, channels int) []byte {
	b := make([]byte, 0, 2*len(mono)*channels)
	for _, s := range mono {
		for range channels {
			b = binary.LittleEndian.AppendUint16(b, uint16(s))
		}
	}
	return b
}

// wavFile builds a WAV from chunks, each an id and a body; odd bodies are
// padded as RIFF requires.
func wavFile(chunks ...wavChunk) []byte {
	b := []byte("RIFF\x00\x00\x00\x00WAVE")
	for _, c := range chunks {
		b = append(b, c.id...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(c.body)))
		b = append(b, c.body...)
		if len(c.body)%2 == 1 {
			b = append(b, 0)
		}
	}
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-8))
	return b
}

type wavChunk struct {
	id   string
	body []byte
}

// fmtChunk builds a fmt chunk; extensible adds the 24-byte extension whose
// sub-format GUID starts with the PCM code.
func fmtChunk(format uint16, channels, rate, bits int, extensible bool) wavChunk {
	b := binary.LittleEndian.AppendUint16(nil, format)
	b = binary.LittleEndian.AppendUint16(b, uint16(channels))
	b = binary.LittleEndian.AppendUint32(b, uint32(rate))
	b = binary.LittleEndian.AppendUint32(b, uint32(rate*channels*bits/8))
	b = binary.LittleEndian.AppendUint16(b, uint16(channels*bits/8))
	b = binary.LittleEndian.AppendUint16(b, uint16(bits))
	if extensible {
		b = binary.LittleEndian.AppendUint16(b, 22)
		b = append(b, make([]byte, 6)...) // valid bits, channel mask
		b = binary.LittleEndian.AppendUint16(b, wavFormatPCM)
		b = append(b, make([]byte, 14)...) // the rest of the GUID
	}
	return wavChunk{"fmt ", b}
}

func TestParseWAVWalksChunks(t *testing.T) {
	pcm := interleave([]int16{1, -2, 3}, 2)
	a, err := parseWAV(wavFile(
		wavChunk{"LIST", []byte("odd")}, // odd size: padded
		fmtChunk(wavFormatExtensible, 2, 16000, 16, true),
		wavChunk{"fact", []byte{1, 2, 3, 4}},
		wavChunk{"data", append(pcm, 9)}, // a trailing partial frame is dropped
	))
	if err != nil {
		t.Fatal(err)
	}
	if a.channels != 2 || a.sampleRate != 16000 || string(a.data) != string(pcm) || a.frames() != 3 {
		t.Errorf("parsed %v with %d data bytes, want 16000 Hz, 2 channels, 3 frames", a, len(a.data))
	}
}

func TestParseWAVRejectsWhatItCannotRead(t *testing.T) {
	pcmFmt := fmtChunk(wavFormatPCM, 1, 8000, 16, false)
	data := wavChunk{"data", []byte{1, 0}}
	truncated := wavFile(pcmFmt, data)
	binary.LittleEndian.PutUint32(truncated[len(truncated)-6:], 1000) // data size past the end
	cases := map[string][]byte{
		"empty":           nil,
		"not RIFF":        []byte("RIFX\x04\x00\x00\x00WAVE"),
		"not WAVE":        []byte("RIFF\x04\x00\x00\x00AVI "),
		"no fmt":          wavFile(data),
		"no data":         wavFile(pcmFmt),
		"data before fmt": wavFile(data, pcmFmt),
		"8-bit":           wavFile(fmtChunk(wavFormatPCM, 1, 8000, 8, false), data),
		"float":           wavFile(fmtChunk(3, 1, 8000, 16, false), data),
		"no channels":     wavFile(fmtChunk(wavFormatPCM, 0, 8000, 16, false), data),
		"rate too low":    wavFile(fmtChunk(wavFormatPCM, 1, 999, 16, false), data),
		"short fmt":       wavFile(wavChunk{"fmt ", []byte{1, 0, 1, 0}}, data),
		"chunk past end":  truncated,
	}
	for name, b := range cases {
		_, err := parseWAV(b)
		if !errors.As(err, new(inputError)) {
			t.Errorf("%s: got %v, want an input error", name, err)
		}
	}
	rec := post(mustHandler(t, "speech-to-text"), cases["8-bit"], nil)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("8-bit WAV: status %d, want 400", rec.Code)
	}
	assertOneLine(t, rec)
}

// The writer and the parser agree on the canonical layout.
func TestEncodeWAVRoundTrips(t *testing.T) {
	samples := []int16{0, 1, -1, math.MaxInt16, math.MinInt16}
	a, err := parseWAV(encodeWAV(samples, 8000))
	if err != nil {
		t.Fatal(err)
	}
	if a.channels != 1 || a.sampleRate != 8000 || a.frames() != len(samples) {
		t.Fatalf("parsed %v", a)
	}
	for i, want := range samples {
		if got := monoSample(a, i); got != want {
			t.Errorf("sample %d = %d, want %d", i, got, want)
		}
	}
}
