package functions

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// Fuzz targets: go test -run XXX -fuzz FuzzParseWAV ./examples/functions,
// and one FuzzXxx per function for its input parsing through the handler.

func FuzzParseWAV(f *testing.F) {
	speech, _ := synthSpeech(2<<10, testRand())
	f.Add(speech)
	f.Add(wavFile(wavChunk{"LIST", []byte("odd")}, fmtChunk(wavFormatExtensible, 2, 16000, 16, true),
		wavChunk{"data", interleave([]int16{1, -2, 3}, 2)}))
	f.Add([]byte("RIFF\xff\xff\xff\xffWAVEfmt \x10\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseWAV(b)
		if err != nil {
			if !errors.As(err, new(inputError)) {
				t.Fatalf("error %v is not an input error", err)
			}
			return
		}
		if a.channels < 1 || a.channels > wavMaxChannels || a.sampleRate < wavMinRate ||
			len(a.data)%(2*a.channels) != 0 || len(a.data) > len(b) {
			t.Fatalf("parsed inconsistent audio %v from %d bytes", a, len(b))
		}
		tokens, work := transcribe(a)
		if work != int64(len(a.data)/2) || len(tokens) > a.frames() {
			t.Fatalf("transcribe: %d tokens, work %d for %v", len(tokens), work, a)
		}
	})
}

// fuzzHandler checks that a function answers any body and any X-Input-Size
// with 200 and a valid X-Output-Size, or 400 with a one-line reason; never
// a 500 or a panic.
func fuzzHandler(f *testing.F, name string, opts []Option, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s, "")
	}
	f.Add([]byte{}, "")
	f.Add([]byte("x"), "1.5")
	f.Add([]byte("x"), "-1")
	h := mustHandler(f, name, opts...)
	about, _ := Describe(name)
	f.Fuzz(func(t *testing.T, body []byte, size string) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(body))
		if size != "" {
			req.Header.Set(HeaderInputSize, size)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code == http.StatusOK:
			checkFuzzedOutput(t, name, about, rec)
		case rec.Code == http.StatusBadRequest:
			assertOneLine(t, rec)
		case rec.Code == http.StatusInternalServerError && name == replayName && ctx.Err() != nil:
			// replay slept past the test's deadline for a huge size: fine
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}

func checkFuzzedOutput(t *testing.T, name string, about About, rec *httptest.ResponseRecorder) {
	out, err := strconv.ParseFloat(rec.Header().Get(HeaderOutputSize), 64)
	if err != nil || math.IsNaN(out) || math.IsInf(out, 0) || out < 0 {
		t.Fatalf("X-Output-Size %q", rec.Header().Get(HeaderOutputSize))
	}
	if name == replayName {
		return
	}
	u, _ := unitNamed(about.OutUnit)
	if want := float64(rec.Body.Len()) / u.bytes; out != want {
		t.Fatalf("X-Output-Size %v for %d bytes, want %v", out, rec.Body.Len(), want)
	}
}

func FuzzImageCompress(f *testing.F) {
	photo, _, _ := genImage(4<<10, testRand())
	fuzzHandler(f, "image-compress", nil, photo, encodePNG(f, testImage(9, 7)), pngClaiming(f, 1<<15, 1<<15))
}

func FuzzSentiment(f *testing.F) {
	review, _, _ := genReview(512, testRand())
	fuzzHandler(f, "sentiment", nil, review, []byte("not bad, isn't it? \xff"))
}

func FuzzEmailParse(f *testing.F) {
	mail, _, _ := genEmail(1<<10, testRand())
	fuzzHandler(f, "email-parse", nil, mail, mimeMessage, nestedMultipart(3))
}

func FuzzEmailCategorize(f *testing.F) {
	fuzzHandler(f, "email-categorize", nil, []byte("Subject: flight\n\ninvoice payment"))
}

func FuzzSpeechToText(f *testing.F) {
	speech, _ := synthSpeech(4<<10, testRand())
	fuzzHandler(f, "speech-to-text", nil, speech)
}

func FuzzTranslate(f *testing.F) {
	fuzzHandler(f, "translate", nil, []byte("Hello WORLD, my friend's house."))
}

func FuzzSendMessage(f *testing.F) {
	fuzzHandler(f, "send-message", nil, []byte("Hola mundo"))
}

func FuzzPDFExtract(f *testing.F) {
	doc, _ := synthPDF(2<<10, testRand())
	fuzzHandler(f, "pdf-extract", nil, doc,
		pdfWithStreams([2][]byte{[]byte("/Filter /FlateDecode"), deflate(f, []byte(contentStream))}),
		pdfWithStreams([2][]byte{nil, []byte(contentStream)}))
}

func FuzzSummarize(f *testing.F) {
	fuzzHandler(f, "summarize", nil, []byte("One sentence. Another one! A third? And the last"))
}

func FuzzReplay(f *testing.F) {
	fuzzHandler(f, "replay", []Option{WithReplay("audio-translation", "speech-to-text", 1)}, []byte("{}"))
}
