package async

import (
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"gantry.dev/gantry/pkg/callid"
)

func TestBandsFollowCriticality(t *testing.T) {
	for crit, want := range map[int]int{0: 0, 24: 0, 25: 1, 50: 2, 74: 2, 75: 3, 99: 3, 150: 3, -1: 0} {
		if got := Band(crit); got != want {
			t.Errorf("Band(%d) = %d, want %d", crit, got, want)
		}
	}
}

// A job survives its message: every field, and the client's headers
// except the ones NATS or the job itself reserve.
func TestJobRoundTripsThroughItsMessage(t *testing.T) {
	j := &Job{CallID: "c-1", Function: "f", Namespace: "openfaas-fn", Criticality: 60, Method: http.MethodPost,
		Path: "/a/b", Query: "x=1", Body: []byte("body"), CallbackURL: "http://127.0.0.1:9/cb",
		Accepted: time.Unix(0, 1234567890123),
		Header:   http.Header{"Content-Type": {"text/plain"}, "Nats-Msg-Id": {"forged"}, "Gantry-Async-Function": {"other"}}}
	m := j.message()
	if m.Subject != "gantry.async.b2.openfaas-fn.f" {
		t.Errorf("subject %q", m.Subject)
	}
	if m.Header.Get(nats.MsgIdHdr) != "c-1" {
		t.Errorf("Nats-Msg-Id %q: a client's header must not set it", m.Header.Get(nats.MsgIdHdr))
	}
	got, err := decode(m.Subject, m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got.CallID != j.CallID || got.Function != "f" || got.Namespace != j.Namespace || got.Criticality != 60 ||
		got.Method != j.Method || got.Path != j.Path || got.Query != j.Query || string(got.Body) != "body" ||
		got.CallbackURL != j.CallbackURL || !got.Accepted.Equal(j.Accepted) {
		t.Errorf("decoded %+v, want %+v", got, j)
	}
	if got.Header.Get("Content-Type") != "text/plain" || got.Header.Get(callid.Header) != "c-1" ||
		got.Header.Get("Nats-Msg-Id") != "" || got.Header.Get("Gantry-Async-Function") != "" {
		t.Errorf("headers %v", got.Header)
	}
	if _, err := decode("s", nats.Header{}, nil); err == nil {
		t.Error("a message without a job decoded")
	}
}

func TestConfigIsValidated(t *testing.T) {
	bad := []Config{{MaxJobs: -1}, {MaxJobs: MaxMaxJobs + 1}, {CallbackRetries: -1}, {Workers: -1},
		{AckWait: time.Millisecond}, {URL: "http://x"}, {URL: "nats://"}, {MaxBytes: 10}}
	for _, c := range bad {
		c.Defaults()
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	var ok Config
	ok.Defaults()
	if err := ok.Validate(); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
	for _, u := range []string{"http://127.0.0.1/cb", "https://example.com:8443/x"} {
		if err := CheckCallback(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"/relative", "ftp://x/y", "http://", ":bad"} {
		if err := CheckCallback(u); err == nil {
			t.Errorf("callback %q accepted", u)
		}
	}
}
