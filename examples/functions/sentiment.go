package functions

import (
	"context"
	"encoding/json"
)

var sentimentSpec = spec{
	name:    "sentiment",
	summary: "lexicon sentiment score of UTF-8 text with negation; JSON label and score",
	serves:  []string{"sentiment-analysis/sentiment"},
	inUnit:  kb, outUnit: kb,
	build: stateless(runSentiment),
}

// sentimentLexicon scores words from -3 (very negative) to +3, in the manner
// of AFINN; the words are our own picks.
var sentimentLexicon = map[string]int{
	"amazing": 3, "awesome": 3, "excellent": 3, "fantastic": 3, "love": 3, "wonderful": 3, "perfect": 3,
	"great": 2, "happy": 2, "enjoy": 2, "pleased": 2, "delighted": 2, "beautiful": 2, "recommend": 2, "best": 2,
	"good": 1, "nice": 1, "like": 1, "fine": 1, "helpful": 1, "easy": 1, "fast": 1, "fresh": 1, "clean": 1, "friendly": 1,
	"slow": -1, "problem": -1, "late": -1, "boring": -1, "difficult": -1, "noisy": -1, "expensive": -1, "dirty": -1,
	"bad": -2, "poor": -2, "sad": -2, "angry": -2, "broken": -2, "rude": -2, "disappointed": -2, "annoying": -2, "worse": -2,
	"awful": -3, "terrible": -3, "horrible": -3, "hate": -3, "worst": -3, "disgusting": -3, "useless": -3,
}

// negators flip the sign of the next few words ("not good" is negative).
var negators = map[string]bool{
	"not": true, "no": true, "never": true, "don't": true, "doesn't": true, "didn't": true,
	"isn't": true, "wasn't": true, "aren't": true, "can't": true, "won't": true, "nothing": true,
}

// negationReach is how many words after a negator it still applies to, so
// "not very good" is negated but a later clause is not.
const negationReach = 3

type sentimentResult struct {
	Label       string  `json:"label"`
	Score       int     `json:"score"`
	Comparative float64 `json:"comparative"`
	Words       int     `json:"words"`
	Positive    int     `json:"positive"`
	Negative    int     `json:"negative"`
}

func runSentiment(_ context.Context, req request) (result, error) {
	text, err := textInput(req.body)
	if err != nil {
		return result{}, err
	}
	s := scoreSentiment(text)
	body, err := json.Marshal(s)
	if err != nil {
		return result{}, err
	}
	return result{body: body, contentType: "application/json", work: int64(s.Words)}, nil
}

// scoreSentiment sums the lexicon scores over every word, one pass, so its
// cost is linear in the text.
func scoreSentiment(text string) sentimentResult {
	var s sentimentResult
	negated := 0 // words left under the last negator
	for w := range words(text) {
		s.Words++
		if negators[w] {
			negated = negationReach
			continue
		}
		v := sentimentLexicon[w]
		if negated > 0 {
			v, negated = -v, negated-1
		}
		s.Score += v
		switch {
		case v > 0:
			s.Positive++
		case v < 0:
			s.Negative++
		}
	}
	s.Label = sentimentLabel(s.Score)
	if s.Words > 0 {
		s.Comparative = float64(s.Score) / float64(s.Words)
	}
	return s
}

func sentimentLabel(score int) string {
	switch {
	case score > 0:
		return "positive"
	case score < 0:
		return "negative"
	}
	return "neutral"
}
