package functions

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func deflate(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pdfWithStreams writes a minimal PDF around stream objects given as
// dictionary and data; readers that scan streams need no xref.
func pdfWithStreams(streams ...[2][]byte) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n")
	for i, s := range streams {
		fmt.Fprintf(&b, "%d 0 obj\n<< %s /Length %d >>\nstream\r\n%s\r\nendstream\nendobj\n", i+1, s[0], len(s[1]), s[1])
	}
	b.WriteString("trailer\n<< /Root 1 0 R >>\n%%EOF\n")
	return b.Bytes()
}

// The text operators, string escapes, hex and UTF-16 strings, kerning and
// word gaps in TJ, and an inline image whose bytes look like operators.
const contentStream = `BT /F1 12 Tf 72 700 Td
[(Hel) -20 (lo) -300 (world)] TJ
0 -14 Td
(Esc\(aped\) \\ back\101slash) Tj % a comment (not text) Tj
(next line) '
<48656C6C6F> Tj
T*
<FEFF00E9 0074 00E9> Tj
ET
BI /W 4 /H 4 /BPC 8 /CS /G ID ` + "\x00(fake) Tj\x01" + ` EI
BT (after image) Tj ET`

func TestPDFExtractReadsTextOperators(t *testing.T) {
	pdf := pdfWithStreams(
		[2][]byte{[]byte("/Type /XObject /Subtype /Image /Width 2 /Height 1"), []byte("BT (image bytes) Tj ET")},
		[2][]byte{[]byte("/Filter /FlateDecode"), deflate(t, []byte(contentStream))},
		[2][]byte{[]byte("/Filter [/ASCII85Decode /FlateDecode]"), []byte("BT (unreadable) Tj ET")},
		[2][]byte{[]byte("/Filter /FlateDecode"), []byte("not zlib at all")},
	)
	rec, out := postOK(t, mustHandler(t, "pdf-extract"), pdf, nil)
	want := "Hello world\nEsc(aped) \\ backAslash\nnext lineHello\nété\nafter image"
	if got := rec.Body.String(); got != want {
		t.Errorf("pdf-extract =\n%q\nwant\n%q", got, want)
	}
	if out != float64(len(want))/1024 {
		t.Errorf("X-Output-Size %v", out)
	}
}

// Generated documents extract to exactly the lines they were drawn with.
func TestPDFExtractReadsGeneratedDocuments(t *testing.T) {
	for _, n := range []int{100, 50 << 10, 300 << 10} {
		pdf, lines := synthPDF(n, testRand())
		text, work, err := extractPDF(pdf)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Join(lines, "\n"); text != want {
			t.Errorf("%d bytes: extracted %d bytes of text, want %d", n, len(text), len(want))
		}
		if work < int64(len(pdf)) {
			t.Errorf("work %d < file size %d", work, len(pdf))
		}
	}
}

// The generated file is a real PDF: every xref entry points at its object
// and startxref at the table, so viewers open it.
func TestGeneratedPDFHasAValidXref(t *testing.T) {
	pdf, _ := synthPDF(20<<10, testRand())
	m := regexp.MustCompile(`startxref\n(\d+)\n%%EOF\n$`).FindSubmatch(pdf)
	if m == nil {
		t.Fatal("no startxref at the end")
	}
	start, _ := strconv.Atoi(string(m[1]))
	if !bytes.HasPrefix(pdf[start:], []byte("xref\n0 ")) {
		t.Fatalf("startxref %d does not point at the xref table", start)
	}
	entries := regexp.MustCompile(`(\d{10}) 00000 n\r\n`).FindAllSubmatch(pdf[start:], -1)
	if len(entries) < 4 {
		t.Fatalf("%d xref entries", len(entries))
	}
	for i, e := range entries {
		off, _ := strconv.Atoi(string(e[1]))
		if want := fmt.Sprintf("%d 0 obj\n", i+1); !bytes.HasPrefix(pdf[off:], []byte(want)) {
			t.Errorf("xref entry %d points at %q", i+1, pdf[off:off+10])
		}
	}
}

func TestPDFExtractRejectsNonPDF(t *testing.T) {
	h := mustHandler(t, "pdf-extract")
	for name, body := range map[string][]byte{
		"not a PDF":    []byte("BT (text) Tj ET"),
		"no endstream": []byte("%PDF-1.4\n1 0 obj << >>\nstream\nBT (x) Tj ET\n"),
	} {
		rec := post(h, body, nil)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, rec.Code)
		}
		assertOneLine(t, rec)
	}
}

// Streams that together inflate past the budget are refused, the way a
// deflate bomb past maxInflated is; the test trips a small budget.
func TestPDFExtractRefusesStreamsPastTheInflationBudget(t *testing.T) {
	const budget = 64 << 10
	half := pdfWithStreams(
		[2][]byte{[]byte("/Filter /FlateDecode"), deflate(t, make([]byte, budget/2))},
		[2][]byte{[]byte("/Filter /FlateDecode"), deflate(t, make([]byte, budget/2))},
	)
	if _, _, err := extractPDFWithin(half, budget); err != nil {
		t.Errorf("streams at the budget: %v", err)
	}
	over := pdfWithStreams(
		[2][]byte{[]byte("/Filter /FlateDecode"), deflate(t, make([]byte, budget/2))},
		[2][]byte{[]byte("/Filter /FlateDecode"), deflate(t, make([]byte, budget/2+1))},
	)
	if _, _, err := extractPDFWithin(over, budget); !errors.As(err, new(inputError)) {
		t.Errorf("streams past the budget: %v, want an input error", err)
	}
}

// Deeply nested arrays are flattened without recursion.
func TestPDFContentSurvivesDeepNesting(t *testing.T) {
	var out textSink
	readContent([]byte("BT "+strings.Repeat("[", 1<<20)+"(deep)"+strings.Repeat("]", 1<<20)+" TJ ET"), &out)
	if got := strings.TrimSpace(out.b.String()); got != "deep" {
		t.Errorf("got %q, want deep", got)
	}
}
