package functions

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// documentWords give generated documents a topic, so that the summary has
// frequent words to find.
var documentWords = strings.Fields(`serverless function container latency request scaling
	cluster workload batching profile input size deadline queue gateway replica policy`)

// Generated documents are US Letter pages of 10 pt Helvetica, 56 lines of at
// most 85 characters, drawn with uncompressed content streams so that the
// file size is known while writing.
const (
	pdfLinesPerPage = 56
	pdfLineWidth    = 85
	// pdfPageReserve over-estimates the bytes a page costs beyond its lines
	// (page object, stream wrapper, its Kids entry, two xref entries), and
	// pdfTrailerReserve those of the catalog, font, page tree and trailer,
	// so that the text stops before the target; padding makes up the rest.
	pdfPageReserve    = 320
	pdfTrailerReserve = 400
)

func genPDF(n int, rng *rand.Rand) ([]byte, string, error) {
	body, _ := synthPDF(n, rng)
	return body, "application/pdf", nil
}

// synthPDF returns a PDF of n bytes (or its minimum, one page, when n is
// smaller) and the lines of text it shows.
func synthPDF(n int, rng *rand.Rand) ([]byte, []string) {
	lines := pdfLines(n, rng)
	var pages [][]string
	for len(lines) > pdfLinesPerPage {
		pages = append(pages, lines[:pdfLinesPerPage])
		lines = lines[pdfLinesPerPage:]
	}
	pages = append(pages, lines)
	var all []string
	for _, p := range pages {
		all = append(all, p...)
	}
	return writePDF(pages, n), all
}

// pdfLines draws wrapped lines until the estimated file reaches n bytes.
func pdfLines(n int, rng *rand.Rand) []string {
	var lines []string
	size := pdfTrailerReserve + pdfPageReserve
	for {
		var s strings.Builder
		sentenceOf(&s, rng, documentWords, 0.35)
		for _, line := range wrapWords(s.String(), pdfLineWidth) {
			cost := len(line) + len("() Tj T*\n")
			if len(lines)%pdfLinesPerPage == 0 && len(lines) > 0 {
				cost += pdfPageReserve
			}
			if size+cost > n {
				return lines
			}
			size += cost
			lines = append(lines, line)
		}
	}
}

// wrapWords splits text into lines of at most width characters.
func wrapWords(text string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, w := range strings.Fields(text) {
		if cur.Len() > 0 && cur.Len()+1+len(w) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(w)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

// pdfWriter writes numbered objects and remembers their offsets for the
// cross-reference table.
type pdfWriter struct {
	buf     bytes.Buffer
	offsets map[int]int
}

func (w *pdfWriter) object(num int, body string) {
	w.offsets[num] = w.buf.Len()
	fmt.Fprintf(&w.buf, "%d 0 obj\n%s\nendobj\n", num, body)
}

// writePDF lays out: catalog (1), page tree (2, written last, once the Kids
// are known), font (3), then a page and its content stream per page. It pads
// with comment lines before the xref so the file is exactly n bytes.
func writePDF(pages [][]string, n int) []byte {
	w := &pdfWriter{offsets: map[int]int{}}
	w.buf.WriteString("%PDF-1.4\n%\xE2\xE3\xCF\xD3\n") // binary marker: tells tools the file is not text
	w.object(1, "<< /Type /Catalog /Pages 2 0 R >>")
	w.object(3, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	kids := make([]string, len(pages))
	for i, lines := range pages {
		page, content := 4+2*i, 5+2*i
		kids[i] = fmt.Sprintf("%d 0 R", page)
		w.object(page, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "+
			"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", content))
		stream := pageContent(lines)
		w.object(content, fmt.Sprintf("<< /Length %d >>\nstream\n%sendstream", len(stream), stream))
	}
	w.object(2, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	objects := 4 + 2*len(pages) // including object 0, the free list head
	padPDF(&w.buf, n, objects)
	w.writeXref(objects)
	return w.buf.Bytes()
}

// pageContent draws lines top-down with 12 pt leading.
func pageContent(lines []string) string {
	var b strings.Builder
	b.WriteString("BT\n/F1 10 Tf\n12 TL\n72 740 Td\n")
	for _, l := range lines {
		b.WriteString("(" + escapePDFString(l) + ") Tj T*\n")
	}
	b.WriteString("ET\n")
	return b.String()
}

// pdfEscaper escapes what would end or escape a (literal string).
var pdfEscaper = strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`)

func escapePDFString(s string) string { return pdfEscaper.Replace(s) }

// xrefSize is the byte length of the xref table and trailer when the table
// starts at offset start.
func xrefSize(objects, start int) int {
	head := len(fmt.Sprintf("xref\n0 %d\n", objects))
	tail := len(fmt.Sprintf("trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", objects, start))
	return head + 20*objects + tail
}

// padPDF appends comment lines so that the xref and trailer end exactly at
// n bytes, when the file is not already past n.
func padPDF(buf *bytes.Buffer, n, objects int) {
	pad := 0
	// The trailer's length depends on the digits of the xref offset, which
	// depends on the padding: try each digit count until one is consistent.
	for digits := 1; digits < 20; digits++ {
		start := n - xrefSize(objects, 0) - digits + 1
		if len(strconv.Itoa(start)) == digits {
			pad = start - buf.Len()
			break
		}
	}
	for pad > 0 {
		line := min(pad, 80)
		if line == 1 {
			buf.WriteByte('\n')
		} else {
			buf.WriteString("%" + strings.Repeat(" ", line-2) + "\n")
		}
		pad -= line
	}
}

// writeXref writes the cross-reference table (20-byte entries) and trailer.
func (w *pdfWriter) writeXref(objects int) {
	start := w.buf.Len()
	fmt.Fprintf(&w.buf, "xref\n0 %d\n0000000000 65535 f\r\n", objects)
	for num := 1; num < objects; num++ {
		fmt.Fprintf(&w.buf, "%010d 00000 n\r\n", w.offsets[num])
	}
	fmt.Fprintf(&w.buf, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", objects, start)
}
