package functions

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
)

var emailCategorizeSpec = spec{
	name:    "email-categorize",
	summary: "keyword-weighted categories of an email's text (subject words count double); JSON category and scores",
	serves:  []string{"email-categorization/email-classify"},
	inUnit:  kb, outUnit: kb,
	build: stateless(runEmailCategorize),
}

// categoryKeywords weighs the words that point at each category; a word's
// weight is how strongly it does.
var categoryKeywords = map[string]map[string]float64{
	"work": {
		"meeting": 2, "project": 2, "deadline": 3, "report": 2, "agenda": 3,
		"schedule": 1, "team": 1, "review": 1, "client": 2, "quarterly": 2,
	},
	"finance": {
		"invoice": 3, "payment": 3, "bank": 2, "account": 1, "balance": 2,
		"transaction": 2, "tax": 2, "refund": 2, "budget": 2, "receipt": 2,
	},
	"promotions": {
		"sale": 3, "discount": 3, "offer": 2, "deal": 2, "coupon": 3,
		"free": 1, "shop": 2, "unsubscribe": 2, "limited": 1, "exclusive": 2,
	},
	"social": {
		"party": 2, "friend": 2, "birthday": 3, "dinner": 2, "weekend": 1,
		"photos": 2, "family": 2, "invite": 1, "congratulations": 2, "wedding": 3,
	},
	"travel": {
		"flight": 3, "hotel": 3, "booking": 2, "itinerary": 3, "airport": 3,
		"reservation": 2, "passport": 3, "trip": 2, "luggage": 2, "boarding": 3,
	},
	"spam": {
		"winner": 3, "lottery": 3, "prize": 3, "claim": 2, "urgent": 2,
		"verify": 2, "password": 2, "suspicious": 3, "click": 1, "inheritance": 3,
	},
}

// categoryNames is the tie-break order, fixed so equal scores always give
// the same answer.
var categoryNames = func() []string {
	names := make([]string, 0, len(categoryKeywords))
	for n := range categoryKeywords {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}()

// otherCategory is the answer when no keyword matched.
const otherCategory = "other"

// subjectWeight makes subject words count more: senders put the gist there.
const subjectWeight = 2

type categoryResult struct {
	Category   string             `json:"category"`
	Confidence float64            `json:"confidence"`
	Scores     map[string]float64 `json:"scores"`
	Words      int                `json:"words"`
}

func runEmailCategorize(_ context.Context, req request) (result, error) {
	text, err := textInput(req.body)
	if err != nil {
		return result{}, err
	}
	c := categorize(text)
	body, err := json.Marshal(c)
	if err != nil {
		return result{}, err
	}
	return result{body: body, contentType: "application/json", work: int64(c.Words)}, nil
}

// categorize scores each line's words against every category in one pass.
func categorize(text string) categoryResult {
	c := categoryResult{Scores: make(map[string]float64, len(categoryNames))}
	for _, cat := range categoryNames {
		c.Scores[cat] = 0 // every category appears in the output, matched or not
	}
	for line := range strings.Lines(text) {
		weight := 1.0
		if strings.HasPrefix(line, "Subject:") {
			weight = subjectWeight
		}
		for w := range words(line) {
			c.Words++
			for cat, kw := range categoryKeywords {
				c.Scores[cat] += weight * kw[w]
			}
		}
	}
	c.Category, c.Confidence = bestCategory(c.Scores)
	return c
}

// bestCategory returns the top category and its share of the total score.
func bestCategory(scores map[string]float64) (string, float64) {
	best, top, total := otherCategory, 0.0, 0.0
	for _, cat := range categoryNames {
		s := scores[cat]
		total += s
		if s > top {
			best, top = cat, s
		}
	}
	if total == 0 {
		return otherCategory, 0
	}
	return best, top / total
}
