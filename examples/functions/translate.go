package functions

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"
)

var translateSpec = spec{
	name:    "translate",
	summary: "word-by-word English to Spanish dictionary translation; keeps case, punctuation and unknown words",
	serves:  []string{"audio-translation/text-translate"},
	inUnit:  kb, outUnit: kb,
	build: stateless(runTranslate),
}

// englishSpanish covers the speech vocabulary, so a generated transcript
// translates fully, plus common words; anything else passes through.
var englishSpanish = map[string]string{
	"hello": "hola", "world": "mundo", "good": "bueno", "morning": "mañana", "thank": "gracias",
	"you": "tú", "please": "por favor", "help": "ayuda", "the": "el", "meeting": "reunión",
	"is": "es", "today": "hoy", "tomorrow": "mañana", "we": "nosotros", "need": "necesitamos",
	"more": "más", "time": "tiempo", "call": "llamar", "me": "me", "later": "luego",
	"yes": "sí", "no": "no", "water": "agua", "food": "comida", "friend": "amigo",
	"house": "casa", "city": "ciudad", "train": "tren", "late": "tarde", "early": "temprano",
	"home": "hogar", "work": "trabajo", "and": "y", "a": "un", "i": "yo", "to": "a",
	"of": "de", "in": "en", "for": "para", "with": "con", "my": "mi", "your": "tu",
	"this": "este", "that": "ese", "day": "día", "night": "noche", "love": "amor",
	"happy": "feliz", "sad": "triste", "big": "grande", "small": "pequeño", "book": "libro",
	"car": "coche", "dog": "perro", "cat": "gato", "school": "escuela", "are": "son",
	"have": "tener", "go": "ir", "see": "ver", "message": "mensaje", "send": "enviar",
}

func runTranslate(_ context.Context, req request) (result, error) {
	text, err := textInput(req.body)
	if err != nil {
		return result{}, err
	}
	out, n := translate(text)
	return result{body: []byte(out), contentType: "text/plain; charset=utf-8", work: int64(n)}, nil
}

// translate replaces each known word and copies everything between words,
// in one pass; it returns the text and the number of words looked up.
func translate(text string) (string, int) {
	var b strings.Builder
	b.Grow(len(text) + len(text)/4) // Spanish runs a little longer
	last, n := 0, 0
	for s := range wordSpans(text) {
		b.WriteString(text[last:s.start])
		b.WriteString(translateWord(text[s.start:s.end]))
		last = s.end
		n++
	}
	b.WriteString(text[last:])
	return b.String(), n
}

// translateWord looks a word up in lower case and carries its case over:
// "Hello" gives "Hola", "HELLO" gives "HOLA".
func translateWord(w string) string {
	t, ok := englishSpanish[strings.ToLower(w)]
	if !ok {
		return w
	}
	first, size := utf8.DecodeRuneInString(w)
	switch {
	case size < len(w) && strings.ToUpper(w) == w && strings.ToLower(w) != w:
		return strings.ToUpper(t)
	case unicode.IsUpper(first):
		r, n := utf8.DecodeRuneInString(t)
		return string(unicode.ToUpper(r)) + t[n:]
	}
	return t
}
