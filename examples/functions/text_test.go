package functions

import (
	"bytes"
	"math"
	"net/http"
	"strings"
	"testing"
)

func TestSentimentScoresKnownText(t *testing.T) {
	h := mustHandler(t, "sentiment")
	cases := []struct {
		text string
		want sentimentResult
	}{
		// friendly +1, clean +1, "not good" -1 (negated); 15 words.
		{"The staff were friendly and the room was clean, but the food was not good.",
			sentimentResult{Label: "positive", Score: 1, Comparative: 1.0 / 15, Words: 15, Positive: 2, Negative: 1}},
		{"I hate this. Terrible!",
			sentimentResult{Label: "negative", Score: -6, Comparative: -6.0 / 4, Words: 4, Negative: 2}},
		// The negation reaches three words, not the next clause.
		{"Never bad at all, and the view is great",
			sentimentResult{Label: "positive", Score: 4, Comparative: 4.0 / 9, Words: 9, Positive: 2}},
		{"", sentimentResult{Label: "neutral"}},
	}
	for _, c := range cases {
		rec, _ := postOK(t, h, []byte(c.text), nil)
		if got := decodeJSON[sentimentResult](t, rec.Body.Bytes()); got != c.want {
			t.Errorf("sentiment(%q) = %+v, want %+v", c.text, got, c.want)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
	}
}

// Every text function refuses bytes that are not UTF-8.
func TestTextFunctionsRejectBinary(t *testing.T) {
	for _, name := range []string{"sentiment", "email-categorize", "translate", "summarize"} {
		rec := post(mustHandler(t, name), []byte{'o', 'k', 0xff, 0xfe}, nil)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, rec.Code)
		}
		assertOneLine(t, rec)
	}
}

func TestEmailCategorizeWeighsKeywordsAndSubject(t *testing.T) {
	text := "Subject: Your flight itinerary\n\nThe hotel booking is confirmed. Payment received."
	rec, _ := postOK(t, mustHandler(t, "email-categorize"), []byte(text), nil)
	got := decodeJSON[categoryResult](t, rec.Body.Bytes())
	// travel: (flight 3 + itinerary 3) x 2 in the subject + hotel 3 + booking 2; finance: payment 3.
	if got.Category != "travel" || got.Scores["travel"] != 17 || got.Scores["finance"] != 3 ||
		math.Abs(got.Confidence-17.0/20) > 1e-12 || got.Words != 11 {
		t.Errorf("categorize = %+v, want travel 17 / finance 3, confidence 0.85, 11 words", got)
	}
	if len(got.Scores) != len(categoryKeywords) {
		t.Errorf("scores %v, want every category", got.Scores)
	}
	// The alias answers the same.
	rec2, _ := postOK(t, mustHandler(t, "email-classify"), []byte(text), nil)
	if !bytes.Equal(rec.Body.Bytes(), rec2.Body.Bytes()) {
		t.Errorf("email-classify %s differs from email-categorize %s", rec2.Body, rec.Body)
	}
}

func TestEmailCategorizeWithoutKeywordsIsOther(t *testing.T) {
	rec, _ := postOK(t, mustHandler(t, "email-categorize"), []byte("Just checking in."), nil)
	if got := decodeJSON[categoryResult](t, rec.Body.Bytes()); got.Category != otherCategory || got.Confidence != 0 {
		t.Errorf("categorize = %+v, want other", got)
	}
}

func TestTranslateKeepsCaseAndPunctuation(t *testing.T) {
	cases := map[string]string{
		"Hello World! Good morning, my FRIEND.": "Hola Mundo! Bueno mañana, mi AMIGO.",
		"we need water and food":                "nosotros necesitamos agua y comida",
		"Zebras stay; I go home.\n":             "Zebras stay; Yo ir hogar.\n",
		"":                                      "",
	}
	for in, want := range cases {
		for _, name := range []string{"translate", "text-translate"} {
			rec, _ := postOK(t, mustHandler(t, name), []byte(in), nil)
			if got := rec.Body.String(); got != want {
				t.Errorf("%s(%q) = %q, want %q", name, in, got, want)
			}
		}
	}
}

// The speech vocabulary translates fully, so the audio chain's middle step
// has real work on every generated transcript.
func TestTranslateCoversTheSpeechVocabulary(t *testing.T) {
	for _, w := range speechVocabulary {
		if _, ok := englishSpanish[w]; !ok {
			t.Errorf("%q is heard by speech-to-text but not in the dictionary", w)
		}
	}
}

func TestSendMessageAcks(t *testing.T) {
	h := mustHandler(t, "send-message")
	rec, out := postOK(t, h, []byte("Hola mundo"), nil)
	ack := decodeJSON[messageAck](t, rec.Body.Bytes())
	if ack.Status != "queued" || ack.Bytes != 10 || len(ack.ID) != 16 {
		t.Errorf("ack %+v, want queued, 10 bytes, a 16-digit id", ack)
	}
	if out != float64(rec.Body.Len())/1024 {
		t.Errorf("X-Output-Size %v for a %d-byte ack", out, rec.Body.Len())
	}
	again, _ := postOK(t, h, []byte("Hola mundo"), nil)
	longer, _ := postOK(t, h, []byte("Hola mundo\x00"), nil)
	if decodeJSON[messageAck](t, again.Body.Bytes()).ID != ack.ID {
		t.Error("the same message got another id")
	}
	if decodeJSON[messageAck](t, longer.Body.Bytes()).ID == ack.ID {
		t.Error("a longer message with the same visible text got the same id")
	}
}

func TestSummarizeKeepsTheTopicalSentencesInOrder(t *testing.T) {
	text := "Gantry scales serverless functions. Zebras graze quietly.\nServerless functions need scaling. " +
		"Gantry batches serverless requests. Quantum flux varies. Functions scale with gantry. " +
		"Serverless gantry functions scale."
	rec, _ := postOK(t, mustHandler(t, "summarize"), []byte(text), nil)
	want := "Gantry scales serverless functions. Serverless functions need scaling. " +
		"Gantry batches serverless requests. Functions scale with gantry. Serverless gantry functions scale."
	if got := rec.Body.String(); got != want {
		t.Errorf("summary\n%q\nwant\n%q", got, want)
	}
}

// A text without sentence breaks still gets a summary of about the budget.
func TestSummarizeClipsARunOnText(t *testing.T) {
	text := strings.Repeat("serverless latency ", 5000)
	rec, _ := postOK(t, mustHandler(t, "summarize"), []byte(text), nil)
	if n := rec.Body.Len(); n > summaryBudget+len("…") || n < summaryBudget/2 {
		t.Errorf("summary of a run-on text is %d bytes, want about %d", n, summaryBudget)
	}
}

func TestWordsSplitsOnPunctuationAndKeepsContractions(t *testing.T) {
	var got []string
	for w := range words("Don't STOP—it's 'quoted', x2!") {
		got = append(got, w)
	}
	if want := []string{"don't", "stop", "it's", "quoted", "x2"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("words = %q, want %q", got, want)
	}
}
