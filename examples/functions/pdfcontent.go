package functions

import (
	"bytes"
	"strconv"
	"unicode/utf16"
)

// tokKind classifies content-stream tokens; only the kinds that text
// operators take are told apart.
type tokKind int

const (
	tokOther tokKind = iota // names, dictionaries and anything else
	tokString
	tokNumber
	tokArray
	tokOp
)

type token struct {
	kind  tokKind
	str   []byte  // tokString: the decoded bytes; tokOp: the operator
	num   float64 // tokNumber
	items []token // tokArray: strings and numbers, nested arrays flattened
}

// maxOperands bounds the operand stack: text operators take at most three,
// and garbage between operators must not grow memory.
const maxOperands = 8

// tjWordGap is the TJ displacement, in thousandths of an em, past which a
// gap reads as a word break; producers kern letters with smaller ones.
const tjWordGap = -200

// readContent interprets one content stream's text operators into out.
func readContent(data []byte, out *textSink) {
	lx := contentLexer{b: data}
	var operands []token
	inText := false
	for {
		t, ok := lx.next()
		if !ok {
			return
		}
		if t.kind != tokOp {
			if len(operands) == maxOperands {
				operands = operands[1:]
			}
			operands = append(operands, t)
			continue
		}
		inText = applyOperator(string(t.str), operands, inText, out, &lx)
		operands = operands[:0]
	}
}

// applyOperator runs one operator and returns whether a text object is open.
func applyOperator(op string, operands []token, inText bool, out *textSink, lx *contentLexer) bool {
	switch op {
	case "BT":
		return true
	case "ET":
		out.newline()
		return false
	case "BI":
		lx.skipInlineImage()
		return inText
	}
	if !inText {
		return false
	}
	switch op {
	case "Tj":
		showString(lastOf(operands, tokString), out)
	case "'", "\"":
		out.newline()
		showString(lastOf(operands, tokString), out)
	case "TJ":
		showArray(lastOf(operands, tokArray), out)
	case "T*", "Tm":
		out.newline()
	case "Td", "TD":
		moveText(operands, out)
	}
	return true
}

// moveText starts a new line when the move is vertical and a new word when
// it is only horizontal.
func moveText(operands []token, out *textSink) {
	ty := lastOf(operands, tokNumber)
	if ty != nil && ty.num != 0 {
		out.newline()
		return
	}
	out.space()
}

// lastOf returns the last operand, if it has the kind.
func lastOf(operands []token, kind tokKind) *token {
	if len(operands) == 0 || operands[len(operands)-1].kind != kind {
		return nil
	}
	return &operands[len(operands)-1]
}

func showString(t *token, out *textSink) {
	if t != nil {
		writePDFText(t.str, out)
	}
}

func showArray(t *token, out *textSink) {
	if t == nil {
		return
	}
	for _, it := range t.items {
		switch {
		case it.kind == tokString:
			writePDFText(it.str, out)
		case it.kind == tokNumber && it.num < tjWordGap:
			out.space()
		}
	}
}

// writePDFText decodes a text string: UTF-16BE after a byte-order mark,
// otherwise one byte per character, read as Latin-1 (PDFDocEncoding agrees
// with it on the printable range). Control characters are dropped.
func writePDFText(s []byte, out *textSink) {
	if len(s) >= 2 && s[0] == 0xFE && s[1] == 0xFF {
		units := make([]uint16, 0, len(s)/2)
		for i := 2; i+1 < len(s); i += 2 {
			units = append(units, uint16(s[i])<<8|uint16(s[i+1]))
		}
		for _, r := range utf16.Decode(units) {
			writeTextRune(r, out)
		}
		return
	}
	for _, c := range s {
		writeTextRune(rune(c), out)
	}
}

func writeTextRune(r rune, out *textSink) {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		out.space()
	case r >= 0x20 && r != 0x7F:
		out.b.WriteRune(r)
	}
}

// contentLexer splits a content stream into tokens.
type contentLexer struct {
	b []byte
	i int
}

// next returns the next token, or false at the end of the stream.
func (lx *contentLexer) next() (token, bool) {
	lx.skipSpaceAndComments()
	if lx.i >= len(lx.b) {
		return token{}, false
	}
	switch c := lx.b[lx.i]; {
	case c == '(':
		lx.i++
		return token{kind: tokString, str: lx.literalString()}, true
	case c == '<' && lx.peek(1) == '<', c == '>' && lx.peek(1) == '>':
		lx.i += 2
		return token{kind: tokOther}, true
	case c == '<':
		lx.i++
		return token{kind: tokString, str: lx.hexString()}, true
	case c == '[':
		lx.i++
		return lx.array(), true
	case isPDFDelimiter(c):
		lx.i++ // a stray ']', '>', '{', '}' or ')': ignore it
		if c == '/' {
			lx.regular() // a name
		}
		return token{kind: tokOther}, true
	}
	return lx.word(), true
}

func (lx *contentLexer) peek(ahead int) byte {
	if lx.i+ahead < len(lx.b) {
		return lx.b[lx.i+ahead]
	}
	return 0
}

func (lx *contentLexer) skipSpaceAndComments() {
	for lx.i < len(lx.b) {
		switch c := lx.b[lx.i]; {
		case isPDFSpace(c):
			lx.i++
		case c == '%':
			for lx.i < len(lx.b) && lx.b[lx.i] != '\n' && lx.b[lx.i] != '\r' {
				lx.i++
			}
		default:
			return
		}
	}
}

// regular consumes a run of regular characters.
func (lx *contentLexer) regular() []byte {
	start := lx.i
	for lx.i < len(lx.b) && isPDFRegular(lx.b[lx.i]) {
		lx.i++
	}
	return lx.b[start:lx.i]
}

// word reads a number or an operator.
func (lx *contentLexer) word() token {
	w := lx.regular()
	if c := w[0]; c == '+' || c == '-' || c == '.' || (c >= '0' && c <= '9') {
		if v, err := strconv.ParseFloat(string(w), 64); err == nil {
			return token{kind: tokNumber, num: v}
		}
	}
	return token{kind: tokOp, str: w}
}

// array reads up to the matching ']' (or the end), keeping strings and
// numbers for TJ. Nested arrays are flattened by counting brackets rather
// than by recursion, so deep nesting cannot exhaust the stack.
func (lx *contentLexer) array() token {
	arr := token{kind: tokArray}
	for depth := 1; ; {
		lx.skipSpaceAndComments()
		if lx.i >= len(lx.b) {
			return arr
		}
		switch lx.b[lx.i] {
		case '[':
			lx.i++
			depth++
			continue
		case ']':
			lx.i++
			if depth--; depth == 0 {
				return arr
			}
			continue
		}
		if t, _ := lx.next(); t.kind == tokString || t.kind == tokNumber {
			arr.items = append(arr.items, t)
		}
	}
}

// literalString reads a (string) after its '(' with escapes and balanced
// parentheses; an unterminated string runs to the end of the stream.
func (lx *contentLexer) literalString() []byte {
	var s []byte
	for depth := 1; lx.i < len(lx.b); {
		c := lx.b[lx.i]
		lx.i++
		switch c {
		case '\\':
			s = lx.escape(s)
			continue
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return s
			}
		}
		s = append(s, c)
	}
	return s
}

// escape appends the character a backslash escape stands for.
func (lx *contentLexer) escape(s []byte) []byte {
	if lx.i >= len(lx.b) {
		return s
	}
	c := lx.b[lx.i]
	lx.i++
	switch c {
	case 'n':
		return append(s, '\n')
	case 'r':
		return append(s, '\r')
	case 't':
		return append(s, '\t')
	case 'b':
		return append(s, '\b')
	case 'f':
		return append(s, '\f')
	case '\r':
		if lx.peek(0) == '\n' {
			lx.i++
		}
		return s // a line continuation
	case '\n':
		return s
	}
	if c >= '0' && c <= '7' {
		return append(s, lx.octal(c))
	}
	return append(s, c) // \( \) \\ and unknown escapes stand for themselves
}

// octal reads up to three octal digits, the first already consumed.
func (lx *contentLexer) octal(first byte) byte {
	v := int(first - '0')
	for n := 1; n < 3 && lx.i < len(lx.b) && lx.b[lx.i] >= '0' && lx.b[lx.i] <= '7'; n++ {
		v = v*8 + int(lx.b[lx.i]-'0')
		lx.i++
	}
	return byte(v) // high-order overflow is ignored, as the spec says
}

// hexString reads a <hex string> after its '<'; spaces are ignored, other
// stray characters skipped, and an odd final digit is padded with 0.
func (lx *contentLexer) hexString() []byte {
	var s []byte
	half, odd := byte(0), false
	for lx.i < len(lx.b) {
		c := lx.b[lx.i]
		lx.i++
		if c == '>' {
			break
		}
		v, ok := hexValue(c)
		if !ok {
			continue
		}
		if odd {
			s = append(s, half<<4|v)
		} else {
			half = v
		}
		odd = !odd
	}
	if odd {
		s = append(s, half<<4)
	}
	return s
}

func hexValue(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// skipInlineImage skips an inline image's parameters and binary data up to
// its EI, which must stand alone between whitespace, so that image bytes are
// never read as operators.
func (lx *contentLexer) skipInlineImage() {
	id := bytes.Index(lx.b[lx.i:], []byte("ID"))
	if id < 0 {
		lx.i = len(lx.b)
		return
	}
	for pos := lx.i + id + 2; ; {
		ei := bytes.Index(lx.b[pos:], []byte("EI"))
		if ei < 0 {
			lx.i = len(lx.b)
			return
		}
		ei += pos
		endOK := ei+2 == len(lx.b) || isPDFSpace(lx.b[ei+2])
		if ei > 0 && isPDFSpace(lx.b[ei-1]) && endOK {
			lx.i = ei + 2
			return
		}
		pos = ei + 2
	}
}
