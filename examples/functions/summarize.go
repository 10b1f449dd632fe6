package functions

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

var summarizeSpec = spec{
	name: "summarize",
	summary: "extractive summary: score sentences by the frequency of their content words, " +
		"keep the best ones in document order, up to about 1 KB",
	serves: []string{"document-summary/summarize"},
	inUnit: kb, outUnit: kb,
	build: stateless(runSummarize),
}

// A summary keeps at most summaryMaxSentences sentences and stops adding
// them past summaryBudget bytes: about a paragraph, like the model's 1 KB.
const (
	summaryMaxSentences = 5
	summaryBudget       = 1 << 10
)

// stopwords carry no topic, so they do not count towards a sentence's score.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but if then than so of in on at to for from by with
		about as into over under is are was were be been being it its this that these those there here
		i you he she we they me him her us them my your his our their not no do does did have has had
		will would can could should may might must also very just more most some any all each which who what`) {
		m[w] = true
	}
	return m
}()

func runSummarize(_ context.Context, req request) (result, error) {
	text, err := textInput(req.body)
	if err != nil {
		return result{}, err
	}
	summary, n := summarize(text)
	return result{body: []byte(summary), contentType: "text/plain; charset=utf-8", work: int64(n)}, nil
}

// sentence is one sentence with its score and position.
type sentence struct {
	text  string
	index int
	score float64
}

// summarize returns the summary and the number of words read. Two passes
// over the words count and score; sorting the sentences adds n log n.
func summarize(text string) (string, int) {
	sents := splitSentences(text)
	freq, n := wordFrequencies(sents)
	for i := range sents {
		sents[i].score = sentenceScore(sents[i].text, freq)
	}
	return strings.Join(pickSentences(sents), " "), n
}

// splitSentences splits at '.', '!' or '?' followed by white space, and
// joins lines: extracted PDF text breaks lines inside sentences.
func splitSentences(text string) []sentence {
	var sents []sentence
	start := 0
	add := func(end int) {
		if s := strings.Join(strings.Fields(text[start:end]), " "); s != "" {
			sents = append(sents, sentence{text: s, index: len(sents)})
		}
		start = end
	}
	prevEnd := false
	for i, r := range text {
		if prevEnd && unicode.IsSpace(r) {
			add(i)
		}
		prevEnd = r == '.' || r == '!' || r == '?'
	}
	add(len(text))
	return sents
}

// wordFrequencies counts content words, normalised so the most frequent
// scores 1, and returns the number of words read.
func wordFrequencies(sents []sentence) (map[string]float64, int) {
	freq := map[string]float64{}
	n, top := 0, 0.0
	for _, s := range sents {
		for w := range words(s.text) {
			n++
			if stopwords[w] {
				continue
			}
			freq[w]++
			top = max(top, freq[w])
		}
	}
	for w := range freq {
		freq[w] /= top
	}
	return freq, n
}

// sentenceScore is the mean frequency of the sentence's words, so long
// sentences do not win for their length alone.
func sentenceScore(s string, freq map[string]float64) float64 {
	sum, n := 0.0, 0
	for w := range words(s) {
		sum += freq[w]
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// pickSentences takes the best sentences within the budget, in document
// order; ties go to the earlier sentence.
func pickSentences(sents []sentence) []string {
	ranked := slices.Clone(sents)
	slices.SortStableFunc(ranked, func(a, b sentence) int { return cmp.Compare(b.score, a.score) })
	var picked []sentence
	size := 0
	for _, s := range ranked {
		if len(picked) == summaryMaxSentences || (len(picked) > 0 && size+len(s.text) > summaryBudget) {
			break
		}
		s.text = clip(s.text, summaryBudget)
		picked = append(picked, s)
		size += len(s.text) + 1
	}
	slices.SortFunc(picked, func(a, b sentence) int { return cmp.Compare(a.index, b.index) })
	out := make([]string, len(picked))
	for i, s := range picked {
		out[i] = s.text
	}
	return out
}

// clip shortens a sentence past limit bytes at a word boundary, so a text
// without sentence breaks still gets a summary of about the budget.
func clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := strings.LastIndexByte(s[:limit], ' ')
	if cut <= 0 {
		cut = limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
	}
	return s[:cut] + "…"
}
