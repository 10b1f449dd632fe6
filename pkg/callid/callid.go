// Package callid gives every call its identity, X-Call-Id: one generator for
// synchronous and asynchronous calls (../shared/conventions.md), so a call can
// be followed through retries, queues and callbacks by one value.
package callid

import (
	"net/http"

	"github.com/google/uuid"
)

// Header is the header that carries a call's identity, as OpenFaaS names it.
const Header = "X-Call-Id"

// MaxLen bounds an identity a client sends; longer ones are replaced, so a
// client cannot make every log line and queue message carry a huge value.
const MaxLen = 128

// New returns a fresh identity (a random UUID, as OpenFaaS's gateway uses).
func New() string { return uuid.NewString() }

// Ensure returns the request's identity, setting a fresh one on h when the
// client sent none or one that is too long or not printable ASCII.
func Ensure(h http.Header) string {
	if id := h.Get(Header); valid(id) {
		return id
	}
	id := New()
	h.Set(Header, id)
	return id
}

// Valid reports an identity Ensure keeps: 1 to MaxLen printable ASCII
// characters without spaces.
func Valid(id string) bool { return valid(id) }

func valid(id string) bool {
	if id == "" || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}
