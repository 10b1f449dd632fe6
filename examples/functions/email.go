package functions

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"html"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"unicode/utf8"
)

var emailParseSpec = spec{
	name:    "email-parse",
	summary: "parse an RFC 5322 email (MIME multipart, base64, quoted-printable, HTML) into its subject and body text",
	serves:  []string{"email-categorization/email-parse"},
	inUnit:  kb, outUnit: kb,
	build: stateless(runEmailParse),
}

// maxMIMEDepth bounds multipart nesting; real mail nests two or three
// levels, and a bound keeps a hostile message from recursing forever.
const maxMIMEDepth = 8

func runEmailParse(_ context.Context, req request) (result, error) {
	text, err := parseEmail(req.body)
	if err != nil {
		return result{}, err
	}
	return result{
		body: []byte(text), contentType: "text/plain; charset=utf-8",
		work: int64(len(req.body)),
	}, nil
}

// parseEmail returns "Subject: ...", a blank line, then the readable body:
// the text parts of the message, attachments left out.
func parseEmail(raw []byte) (string, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return "", badInput("not an email message: %v", err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		subject = msg.Header.Get("Subject") // keep the raw words rather than fail
	}
	var b strings.Builder
	b.WriteString("Subject: " + strings.ToValidUTF8(subject, "\uFFFD") + "\n\n")
	part := mimePart{header: textproto.MIMEHeader(msg.Header), body: msg.Body}
	if err := part.writeText(&b, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

// mimePart is one entity of a MIME tree: the message itself or a part.
type mimePart struct {
	header textproto.MIMEHeader
	body   io.Reader
}

// writeText appends the readable text of the part to b.
func (p mimePart) writeText(b *strings.Builder, depth int) error {
	if depth > maxMIMEDepth {
		return badInput("MIME parts nest deeper than %d", maxMIMEDepth)
	}
	mediaType, params := p.mediaType()
	switch {
	case strings.HasPrefix(mediaType, "multipart/"):
		return p.writeMultipart(b, mediaType, params, depth)
	case isAttachment(p.header):
		return nil
	case mediaType == "text/plain", mediaType == "text/html":
		return p.writeLeaf(b, mediaType, params["charset"])
	}
	return nil // images, calendars and other non-text parts carry no words
}

// mediaType defaults to text/plain as RFC 2045 says, also for a malformed
// Content-Type, which mail clients treat the same way.
func (p mimePart) mediaType() (string, map[string]string) {
	ct := p.header.Get("Content-Type")
	if ct == "" {
		return "text/plain", nil
	}
	mediaType, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return "text/plain", nil
	}
	return mediaType, params
}

func isAttachment(h textproto.MIMEHeader) bool {
	d, _, err := mime.ParseMediaType(h.Get("Content-Disposition"))
	return err == nil && d == "attachment"
}

// writeMultipart walks the parts; of a multipart/alternative it keeps only
// the first text/plain version (or the first version when none is plain),
// since the versions say the same thing.
func (p mimePart) writeMultipart(b *strings.Builder, mediaType string, params map[string]string, depth int) error {
	boundary := params["boundary"]
	if boundary == "" {
		return badInput("%s without a boundary", mediaType)
	}
	parts, err := readParts(p.body, boundary)
	if err != nil {
		return err
	}
	if mediaType == "multipart/alternative" {
		parts = preferPlain(parts)
	}
	for _, part := range parts {
		if err := part.writeText(b, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// readParts reads every part up front, because a multipart.Reader's parts
// are only valid until the next one is read.
func readParts(r io.Reader, boundary string) ([]mimePart, error) {
	mr := multipart.NewReader(r, boundary)
	var parts []mimePart
	for {
		// NextRawPart leaves Content-Transfer-Encoding to writeLeaf, which
		// handles it the same way for single-part messages.
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return parts, nil
		}
		if err != nil {
			return nil, badInput("multipart: %v", err)
		}
		body, err := io.ReadAll(part)
		if err != nil {
			return nil, badInput("multipart: %v", err)
		}
		parts = append(parts, mimePart{header: part.Header, body: bytes.NewReader(body)})
	}
}

func preferPlain(parts []mimePart) []mimePart {
	for _, p := range parts {
		if mt, _ := p.mediaType(); mt == "text/plain" {
			return []mimePart{p}
		}
	}
	if len(parts) > 0 {
		return parts[:1]
	}
	return nil
}

// writeLeaf decodes a text part's transfer encoding and charset and, for
// HTML, drops the markup.
func (p mimePart) writeLeaf(b *strings.Builder, mediaType, charset string) error {
	raw, err := io.ReadAll(decodeTransfer(p.header.Get("Content-Transfer-Encoding"), p.body))
	if err != nil {
		return badInput("decode %s part: %v", mediaType, err)
	}
	text := decodeCharset(raw, charset)
	if mediaType == "text/html" {
		text = stripHTML(text)
	}
	b.WriteString(strings.TrimSpace(text))
	b.WriteString("\n")
	return nil
}

func decodeTransfer(encoding string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "base64":
		// Mail wraps base64 at 76 columns; the decoder must skip the line breaks.
		return base64.NewDecoder(base64.StdEncoding, newlineDropper{r})
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	}
	return r // 7bit, 8bit, binary
}

// newlineDropper removes CR and LF so base64 wrapped over lines decodes.
type newlineDropper struct{ r io.Reader }

func (d newlineDropper) Read(p []byte) (int, error) {
	for {
		n, err := d.r.Read(p)
		kept := 0
		for _, c := range p[:n] {
			if c != '\r' && c != '\n' {
				p[kept] = c
				kept++
			}
		}
		if kept > 0 || err != nil {
			return kept, err
		}
	}
}

// decodeCharset turns Latin-1 into UTF-8 and replaces invalid bytes of any
// other charset, so the body handed on is always valid UTF-8.
func decodeCharset(raw []byte, charset string) string {
	switch strings.ToLower(charset) {
	case "iso-8859-1", "latin1", "windows-1252":
		runes := make([]rune, len(raw))
		for i, c := range raw {
			runes[i] = rune(c)
		}
		return string(runes)
	}
	if utf8.Valid(raw) {
		return string(raw)
	}
	return strings.ToValidUTF8(string(raw), "\uFFFD")
}

// stripHTML drops tags and the contents of script and style elements, and
// unescapes entities; enough to read the words of an HTML mail.
func stripHTML(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		lt := strings.IndexByte(s, '<')
		if lt < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:lt])
		s = skipTag(s[lt:])
		b.WriteByte(' ')
	}
	return html.UnescapeString(b.String())
}

// skipTag returns s after the tag at its start, and after the element's
// end tag when the element is a script or a style.
func skipTag(s string) string {
	gt := strings.IndexByte(s, '>')
	if gt < 0 {
		return ""
	}
	tag := strings.ToLower(s[:gt+1])
	s = s[gt+1:]
	for _, raw := range []string{"script", "style"} {
		if strings.HasPrefix(tag, "<"+raw) {
			end := indexFold(s, "</"+raw)
			if end < 0 {
				return ""
			}
			return skipTag(s[end:])
		}
	}
	return s
}

// indexFold is a case-insensitive strings.Index for a needle that starts with
// '<'; lowering the whole rest of a message per tag would be quadratic.
func indexFold(s, needle string) int {
	for i := 0; ; {
		j := strings.IndexByte(s[i:], needle[0])
		if j < 0 || i+j+len(needle) > len(s) {
			return -1
		}
		i += j
		if strings.EqualFold(s[i:i+len(needle)], needle) {
			return i
		}
		i++
	}
}
