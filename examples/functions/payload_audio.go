package functions

import (
	"math"
	"math/rand/v2"
)

// Generated speech: 8 kHz mono (telephone quality, 16 KB a second, so the
// app's 32-1024 KB is 2-64 s), each word a 200 ms tone at its vocabulary
// pitch after a 100 ms pause. Words and pauses are whole 20 ms frames so
// that the recogniser's frames line up with them.
const (
	speechRate       = 8000
	speechAmplitude  = 8000 // about -12 dBFS, well above voicedRMS
	speechDither     = 16   // background noise, well below voicedRMS
	speechWordFrames = 10
	speechGapFrames  = 5
)

func genSpeech(n int, rng *rand.Rand) ([]byte, string, error) {
	body, _ := synthSpeech(n, rng)
	return body, "audio/wav", nil
}

// synthSpeech returns a WAV of n bytes (44 at least: the header) and the
// words it speaks.
func synthSpeech(n int, rng *rand.Rand) ([]byte, []string) {
	total := max(n-wavHeaderSize, 0) / 2
	frame := speechRate * frameMillis / 1000
	word, gap := speechWordFrames*frame, speechGapFrames*frame
	samples := make([]int16, total)
	var spoken []string
	for pos := gap; pos+word <= total; pos += word + gap {
		i := rng.IntN(len(speechVocabulary))
		tone(samples[pos:pos+word], vocabularyHz(i))
		spoken = append(spoken, speechVocabulary[i])
	}
	for i := range samples {
		samples[i] += int16(rng.IntN(2*speechDither+1) - speechDither)
	}
	body := encodeWAV(samples, speechRate)
	if n > len(body) && n%2 == 1 {
		body = append(body, 0) // a pad byte after the data keeps the size exact
	}
	return body, spoken
}

// tone writes a sine at hz into s.
func tone(s []int16, hz float64) {
	step := 2 * math.Pi * hz / speechRate
	for i := range s {
		s[i] = int16(speechAmplitude * math.Sin(step*float64(i)))
	}
}
