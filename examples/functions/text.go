package functions

import (
	"iter"
	"strings"
	"unicode"
	"unicode/utf8"
)

// textInput checks that a body is UTF-8 text; every text function rejects
// binary input instead of scoring garbage.
func textInput(body []byte) (string, error) {
	if !utf8.Valid(body) {
		return "", badInput("input is not UTF-8 text")
	}
	return string(body), nil
}

// isWordRune says which runes make up a word: letters, digits and the
// apostrophe, so that "don't" stays one word for negation.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\''
}

// span is one word's byte range in a text.
type span struct{ start, end int }

// wordSpans yields the byte range of every word in text, in order.
func wordSpans(text string) iter.Seq[span] {
	return func(yield func(span) bool) {
		start := -1
		for i, r := range text {
			switch {
			case isWordRune(r) && start < 0:
				start = i
			case !isWordRune(r) && start >= 0:
				if !yield(span{start, i}) {
					return
				}
				start = -1
			}
		}
		if start >= 0 {
			yield(span{start, len(text)})
		}
	}
}

// words yields every word of text in lower case, with apostrophes at its
// edges trimmed (quotes are not part of a word).
func words(text string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for s := range wordSpans(text) {
			w := strings.Trim(text[s.start:s.end], "'")
			if w == "" {
				continue
			}
			if !yield(strings.ToLower(w)) {
				return
			}
		}
	}
}
