package functions

import (
	"bytes"
	"compress/zlib"
	"context"
	"io"
	"strings"
)

var pdfExtractSpec = spec{
	name: "pdf-extract",
	summary: "extract the text of a PDF: walk its streams, inflate FlateDecode ones, " +
		"interpret the text operators (Tj, TJ, ', \") of the content streams",
	serves: []string{"document-summary/pdf-extract"},
	inUnit: kb, outUnit: kb,
	build: stateless(runPDFExtract),
}

// maxInflated bounds the bytes all streams of one PDF may inflate to, so a
// small deflate bomb cannot exhaust memory.
const maxInflated = MaxBody

// pdfHeaderWindow is how far into the file the %PDF- marker may sit; the
// spec lets readers accept junk before it and viewers look this far.
const pdfHeaderWindow = 1024

func runPDFExtract(_ context.Context, req request) (result, error) {
	text, work, err := extractPDF(req.body)
	if err != nil {
		return result{}, err
	}
	return result{body: []byte(text), contentType: "text/plain; charset=utf-8", work: work}, nil
}

// extractPDF returns the text of every content stream, and the bytes read
// and inflated as the work done; both passes are linear in the file.
//
// It scans for stream keywords instead of following the cross-reference
// table, so it also reads files whose xref is broken, as viewers do. Fonts
// with custom encodings come out as their raw codes: a stand-in, not a
// full PDF reader.
func extractPDF(b []byte) (string, int64, error) {
	return extractPDFWithin(b, maxInflated)
}

// extractPDFWithin is extractPDF with the inflation budget as a parameter,
// so tests can trip it without inflating 64 MiB.
func extractPDFWithin(b []byte, budget int64) (string, int64, error) {
	if !bytes.Contains(b[:min(len(b), pdfHeaderWindow)], []byte("%PDF-")) {
		return "", 0, badInput("not a PDF file: no %%PDF- header")
	}
	var out textSink
	work := int64(len(b))
	for pos := 0; ; {
		s, next, ok, err := nextStream(b, pos)
		if err != nil {
			return "", 0, err
		}
		if !ok {
			break
		}
		pos = next
		data, err := s.decode(&budget)
		if err != nil {
			return "", 0, err
		}
		work += int64(len(data))
		readContent(data, &out)
		out.newline()
	}
	return strings.TrimSpace(out.b.String()), work, nil
}

// pdfStream is one stream object: its dictionary and its raw data.
type pdfStream struct {
	dict, data []byte
}

// nextStream finds the first stream at or after from and returns it with
// the offset after its endstream. The dictionary is taken as the bytes since
// the last "obj" keyword, which never looks back past from, so the whole
// scan stays linear.
func nextStream(b []byte, from int) (pdfStream, int, bool, error) {
	for pos := from; ; {
		k := bytes.Index(b[pos:], []byte("stream"))
		if k < 0 {
			return pdfStream{}, 0, false, nil
		}
		k += pos
		after := k + len("stream")
		start, eol := skipEOL(b, after)
		// "endstream" and words that contain "stream" are not the keyword,
		// and the keyword must end its line.
		if (k > 0 && isPDFRegular(b[k-1])) || !eol {
			pos = after
			continue
		}
		end := bytes.Index(b[start:], []byte("endstream"))
		if end < 0 {
			return pdfStream{}, 0, false, badInput("PDF stream at byte %d has no endstream", k)
		}
		end += start
		dictFrom := pos
		if o := bytes.LastIndex(b[pos:k], []byte("obj")); o >= 0 {
			dictFrom = pos + o
		}
		s := pdfStream{dict: b[dictFrom:k], data: trimEOL(b[start:end])}
		return s, end + len("endstream"), true, nil
	}
}

// skipEOL skips the end of line that must follow "stream".
func skipEOL(b []byte, i int) (int, bool) {
	switch {
	case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
		return i + 2, true
	case i < len(b) && (b[i] == '\n' || b[i] == '\r'):
		return i + 1, true
	}
	return i, false
}

// trimEOL drops the end of line that writers put before "endstream".
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// decode returns the stream's bytes if it may hold text: unfiltered or
// FlateDecode alone. Images, font programs and other filters are skipped.
// A damaged deflate stream yields what inflated before the damage, as
// viewers do; only going past the budget is an error.
func (s pdfStream) decode(budget *int64) ([]byte, error) {
	if bytes.Contains(s.dict, []byte("/Image")) || bytes.Contains(s.dict, []byte("/Length1")) ||
		bytes.Contains(s.dict, []byte("/Length2")) || bytes.Contains(s.dict, []byte("/Length3")) {
		return nil, nil
	}
	if !bytes.Contains(s.dict, []byte("/Filter")) {
		return s.data, nil
	}
	filters := bytes.Count(s.dict, []byte("Decode")) - bytes.Count(s.dict, []byte("DecodeParms"))
	if filters != 1 || !bytes.Contains(s.dict, []byte("/FlateDecode")) ||
		bytes.Contains(s.dict, []byte("/Predictor")) {
		return nil, nil
	}
	return inflate(s.data, budget)
}

func inflate(data []byte, budget *int64) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, nil // not deflate data after all: nothing to read
	}
	out, _ := io.ReadAll(io.LimitReader(zr, *budget+1))
	if int64(len(out)) > *budget {
		return nil, badInput("PDF streams inflate past the %d-byte budget", maxInflated)
	}
	*budget -= int64(len(out))
	return out, nil
}

// isPDFRegular says whether c can be part of a PDF keyword or name.
func isPDFRegular(c byte) bool {
	return !isPDFSpace(c) && !isPDFDelimiter(c)
}

func isPDFSpace(c byte) bool {
	switch c {
	case 0, '\t', '\n', '\f', '\r', ' ':
		return true
	}
	return false
}

func isPDFDelimiter(c byte) bool {
	return strings.IndexByte("()<>[]{}/%", c) >= 0
}

// textSink collects extracted text without piling up blank lines.
type textSink struct{ b strings.Builder }

func (t *textSink) newline() {
	s := t.b.String()
	if len(s) > 0 && s[len(s)-1] != '\n' {
		t.b.WriteByte('\n')
	}
}

func (t *textSink) space() {
	s := t.b.String()
	if len(s) > 0 && s[len(s)-1] != ' ' && s[len(s)-1] != '\n' {
		t.b.WriteByte(' ')
	}
}
