package async

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"gantry.dev/gantry/pkg/callid"
)

// Job is one accepted async invocation.
type Job struct {
	CallID string
	// Function is the function's name, Namespace its namespace.
	Function, Namespace string
	// Criticality picks the band the job is queued in.
	Criticality int
	// Method, Path and Query are what the function receives; Header the
	// client's headers.
	Method, Path, Query string
	Header              http.Header
	Body                []byte
	// CallbackURL receives the result (empty: none).
	CallbackURL string
	// Accepted is when the gateway accepted it: its async deadline runs
	// from then, across restarts.
	Accepted time.Time
}

// Headers of the message that carry a job's fields. The client's headers
// travel beside them, except those NATS reserves (Nats-*) and these.
const (
	hdrPrefix    = "Gantry-Async-"
	hdrFunction  = hdrPrefix + "Function"
	hdrNamespace = hdrPrefix + "Namespace"
	hdrMethod    = hdrPrefix + "Method"
	hdrPath      = hdrPrefix + "Path"
	hdrQuery     = hdrPrefix + "Query"
	hdrAccepted  = hdrPrefix + "Accepted"
	hdrCrit      = hdrPrefix + "Criticality"
	// CallbackHeader names the callback URL, as OpenFaaS does.
	CallbackHeader = "X-Callback-Url"
)

// subject is the job's subject: its band, namespace and name.
func (j *Job) subject() string {
	return fmt.Sprintf("%s.b%d.%s.%s", subjectPrefix, Band(j.Criticality), j.Namespace, j.Function)
}

// message encodes the job. Its Nats-Msg-Id is the call ID, so JetStream
// stores a job published twice with one ID (a client retrying after a
// lost 202) once.
func (j *Job) message() *nats.Msg {
	m := nats.NewMsg(j.subject())
	for k, vs := range j.Header {
		if reserved(k) {
			continue
		}
		m.Header[k] = vs
	}
	m.Header.Set(callid.Header, j.CallID)
	m.Header.Set(nats.MsgIdHdr, j.CallID)
	m.Header.Set(hdrFunction, j.Function)
	m.Header.Set(hdrNamespace, j.Namespace)
	m.Header.Set(hdrMethod, j.Method)
	m.Header.Set(hdrPath, j.Path)
	m.Header.Set(hdrQuery, j.Query)
	m.Header.Set(hdrCrit, strconv.Itoa(j.Criticality))
	m.Header.Set(hdrAccepted, strconv.FormatInt(j.Accepted.UnixNano(), 10))
	if j.CallbackURL != "" {
		m.Header.Set(CallbackHeader, j.CallbackURL)
	}
	m.Data = j.Body
	return m
}

// reserved reports a client header the message does not carry: NATS's
// own, the job's fields, and the per-connection ones.
func reserved(k string) bool {
	k = http.CanonicalHeaderKey(k)
	return strings.HasPrefix(k, "Nats-") || strings.HasPrefix(k, hdrPrefix) || k == CallbackHeader ||
		k == callid.Header || k == "Connection" || k == "Content-Length" || k == "Transfer-Encoding" ||
		k == "Keep-Alive" || k == "Te" || k == "Upgrade" || k == "Trailer"
}

// decode reads a job back from its message.
func decode(subject string, h nats.Header, data []byte) (*Job, error) {
	j := &Job{CallID: h.Get(callid.Header), Function: h.Get(hdrFunction), Namespace: h.Get(hdrNamespace),
		Method: h.Get(hdrMethod), Path: h.Get(hdrPath), Query: h.Get(hdrQuery),
		CallbackURL: h.Get(CallbackHeader), Body: data, Header: http.Header{}}
	if j.CallID == "" || j.Function == "" || j.Method == "" {
		return nil, fmt.Errorf("message on %s lacks its call ID, function or method", subject)
	}
	ns, err := strconv.ParseInt(h.Get(hdrAccepted), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("call %s: accepted time %q: %v", j.CallID, h.Get(hdrAccepted), err)
	}
	j.Accepted = time.Unix(0, ns)
	if j.Criticality, err = strconv.Atoi(h.Get(hdrCrit)); err != nil {
		return nil, fmt.Errorf("call %s: criticality %q: %v", j.CallID, h.Get(hdrCrit), err)
	}
	for k, vs := range h {
		if !reserved(k) {
			j.Header[http.CanonicalHeaderKey(k)] = vs
		}
	}
	j.Header.Set(callid.Header, j.CallID)
	return j, nil
}
