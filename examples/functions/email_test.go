package functions

import (
	"net/http"
	"strings"
	"testing"
)

// crlf turns a readable literal into a mail message with CRLF line ends.
func crlf(s string) []byte {
	return []byte(strings.ReplaceAll(strings.TrimPrefix(s, "\n"), "\n", "\r\n"))
}

// A message with the usual MIME layers: an encoded-word subject, a
// multipart/alternative whose plain part is quoted-printable, a base64
// Latin-1 part, and an attachment that must be left out.
var mimeMessage = crlf(`
From: a@example.com
To: b@example.com
Subject: =?UTF-8?Q?Caf=C3=A9_meeting?=
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

--outer
Content-Type: multipart/alternative; boundary="inner"

--inner
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

The agenda is r=C3=A9ady; see the deadl=
ine.
--inner
Content-Type: text/html

<p>The agenda is <b>ready</b></p>
--inner--
--outer
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: base64

Q2jp
--outer
Content-Type: text/plain
Content-Disposition: attachment; filename="notes.txt"

secret attachment text
--outer--
`)

func TestEmailParseWalksMIME(t *testing.T) {
	rec, out := postOK(t, mustHandler(t, "email-parse"), mimeMessage, nil)
	want := "Subject: Café meeting\n\nThe agenda is réady; see the deadline.\nChé\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("email-parse =\n%q\nwant\n%q", got, want)
	}
	if out != float64(len(want))/1024 {
		t.Errorf("X-Output-Size %v, want %v", out, float64(len(want))/1024)
	}
}

func TestEmailParseReadsHTMLWhenThereIsNoPlainText(t *testing.T) {
	msg := crlf(`
Subject: Sale
Content-Type: text/html; charset=utf-8

<html><head><style>p { color: red }</style><script>var x = "<b>";</script></head>
<body><p>50% off &amp; free shipping</p></body></html>
`)
	rec, _ := postOK(t, mustHandler(t, "email-parse"), msg, nil)
	body := strings.Join(strings.Fields(rec.Body.String()), " ")
	if want := "Subject: Sale 50% off & free shipping"; body != want {
		t.Errorf("email-parse = %q, want %q", body, want)
	}
}

func TestEmailParseRejectsBadMessages(t *testing.T) {
	cases := map[string][]byte{
		"no header":          []byte("just some text without a header\n"),
		"multipart, no end":  crlf("Subject: x\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nhi\n"),
		"multipart, no mark": crlf("Subject: x\nContent-Type: multipart/mixed\n\nhi\n"),
		"nesting bomb":       nestedMultipart(maxMIMEDepth + 2),
	}
	h := mustHandler(t, "email-parse")
	for name, msg := range cases {
		rec := post(h, msg, nil)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d (%s), want 400", name, rec.Code, rec.Body)
		}
		assertOneLine(t, rec)
	}
}

// nestedMultipart builds a message whose multiparts nest depth levels.
func nestedMultipart(depth int) []byte {
	var b strings.Builder
	b.WriteString("Subject: deep\n")
	for i := range depth {
		b.WriteString("Content-Type: multipart/mixed; boundary=b" + string(rune('a'+i)) + "\n\n")
		b.WriteString("--b" + string(rune('a'+i)) + "\n")
	}
	b.WriteString("Content-Type: text/plain\n\nbottom\n")
	for i := depth - 1; i >= 0; i-- {
		b.WriteString("--b" + string(rune('a'+i)) + "--\n")
	}
	return crlf(b.String())
}
