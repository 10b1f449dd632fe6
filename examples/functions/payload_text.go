package functions

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// fillerWords make generated sentences read like prose between the words
// that the functions react to.
var fillerWords = strings.Fields(`the a our this that service product staff team order delivery
	price quality visit room experience people work day week time system report page
	was is were felt seemed looked and but with for after before during really quite`)

// sortedKeys lists a map's keys in order, so that a seeded generator draws
// the same words on every run (map order is random).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sentenceOf writes one sentence of 6 to 14 words; each word comes from
// topic with probability p, otherwise from the fillers.
func sentenceOf(b *strings.Builder, rng *rand.Rand, topic []string, p float64) {
	n := 6 + rng.IntN(9)
	for i := range n {
		pool := fillerWords
		if len(topic) > 0 && rng.Float64() < p {
			pool = topic
		}
		w := pool[rng.IntN(len(pool))]
		if i == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	b.WriteString(". ")
}

// fillTo writes sentences until b holds at least n bytes, then cuts it to
// exactly n; generated text is ASCII, so any cut is valid UTF-8.
func fillTo(b *strings.Builder, n int, rng *rand.Rand, topic []string, p float64) string {
	b.Grow(n + 128)
	for b.Len() < n {
		sentenceOf(b, rng, topic, p)
	}
	return b.String()[:n]
}

// positiveWords and negativeWords are the lexicon's words split by sign, in a fixed order.
var positiveWords, negativeWords = func() ([]string, []string) {
	var pos, neg []string
	for _, w := range sortedKeys(sentimentLexicon) {
		if sentimentLexicon[w] > 0 {
			pos = append(pos, w)
		} else {
			neg = append(neg, w)
		}
	}
	return pos, neg
}()

// genReview writes a product review of n bytes that leans positive or
// negative, so that sentiment has something to find.
func genReview(n int, rng *rand.Rand) ([]byte, string, error) {
	topic := positiveWords
	if rng.IntN(2) == 0 {
		topic = negativeWords
	}
	var b strings.Builder
	return []byte(fillTo(&b, n, rng, topic, 0.3)), "text/plain; charset=utf-8", nil
}

// emailTopics are each category's keywords, in a fixed order.
var emailTopics = func() map[string][]string {
	m := map[string][]string{}
	for cat, kw := range categoryKeywords {
		m[cat] = sortedKeys(kw)
	}
	return m
}()

// genEmail writes a plain-text email of n bytes about one category; mail
// lines end in CRLF and wrap before 78 columns, as RFC 5322 asks.
func genEmail(n int, rng *rand.Rand) ([]byte, string, error) {
	topic := emailTopics[categoryNames[rng.IntN(len(categoryNames))]]
	var subject strings.Builder
	sentenceOf(&subject, rng, topic, 0.6)
	var b strings.Builder
	fmt.Fprintf(&b, "From: Ada Sender <ada@example.com>\r\nTo: Bo Receiver <bo@example.org>\r\n"+
		"Subject: %s\r\nDate: Mon, 02 Mar 2026 09:30:00 +0000\r\nMessage-ID: <%016x@example.com>\r\n"+
		"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n"+
		"Content-Transfer-Encoding: 7bit\r\n\r\n",
		strings.TrimSpace(subject.String()), rng.Uint64())
	var body strings.Builder
	body.Grow(n)
	for b.Len()+body.Len() < n {
		var s strings.Builder
		sentenceOf(&s, rng, topic, 0.25)
		wrapLine(&body, s.String())
	}
	// Cut to n, but never into the headers: below the header size the
	// email is only its headers.
	head := b.Len()
	b.WriteString(body.String())
	return []byte(b.String()[:max(n, head)]), "message/rfc822", nil
}

// wrapLine writes words into CRLF lines of at most 76 characters.
func wrapLine(b *strings.Builder, text string) {
	col := 0
	for _, w := range strings.Fields(text) {
		if col > 0 && col+1+len(w) > 76 {
			b.WriteString("\r\n")
			col = 0
		}
		if col > 0 {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += len(w)
	}
	b.WriteString("\r\n")
}
