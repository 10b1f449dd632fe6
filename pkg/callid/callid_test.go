package callid

import (
	"net/http"
	"strings"
	"testing"
)

func TestEnsureKeepsAClientsIdentityAndReplacesBadOnes(t *testing.T) {
	h := http.Header{}
	h.Set(Header, "abc-123")
	if got := Ensure(h); got != "abc-123" {
		t.Fatalf("kept identity: got %q", got)
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxLen+1), "has space", "tab\t"} {
		h := http.Header{}
		if bad != "" {
			h.Set(Header, bad)
		}
		got := Ensure(h)
		if got == bad || !valid(got) || h.Get(Header) != got {
			t.Fatalf("%q: got %q, header %q", bad, got, h.Get(Header))
		}
	}
	if New() == New() {
		t.Fatal("two identities are equal")
	}
}
