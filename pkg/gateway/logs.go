package gateway

// GET /system/logs as OpenFaaS's API has it: the lines of a function's
// instances, exited ones included, as newline-delimited JSON, and with
// follow=true the lines to come until the client goes or the gateway stops.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"gantry.dev/gantry/pkg/funclogs"
	"gantry.dev/gantry/pkg/stack"
)

// logMessage is OpenFaaS's logs.Message.
type logMessage struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	Instance  string    `json:"instance"`
	Timestamp time.Time `json:"timestamp"`
	Text      string    `json:"text"`
}

// toMessage names the function as OpenFaaS does: its name, and its
// namespace beside it (the ring is keyed by the registry's Ref).
func toMessage(l funclogs.Line) logMessage {
	name, ns := stack.SplitRef(l.Function)
	return logMessage{Name: name, Namespace: ns, Instance: l.Instance, Timestamp: l.Time, Text: l.Text}
}

// parseLogQuery reads faas-cli's query: name, namespace, instance, tail,
// follow, since (RFC 3339).
// logParams are the query parameters of OpenFaaS's logs request
// (faas-provider's logs.Request), what faas-cli logs sends.
var logParams = []string{"name", "namespace", "instance", "tail", "since", "follow"}

func parseLogQuery(r *http.Request) (q funclogs.Query, follow bool, err error) {
	v := r.URL.Query()
	for k := range v {
		if !slices.Contains(logParams, k) {
			// A misspelt ?folow=true would otherwise answer as if absent.
			return q, false, fmt.Errorf("unknown parameter %q: the logs take %s", k, strings.Join(logParams, ", "))
		}
	}
	q.Instance = v.Get("instance")
	if v.Get("name") == "" {
		return q, false, errors.New("name is required: the function whose logs to read")
	}
	if q.Function, err = refOf(v.Get("name"), v.Get("namespace")); err != nil {
		return q, false, err
	}
	if s := v.Get("tail"); s != "" {
		// faas-cli sends -1 for "all".
		if q.Tail, err = strconv.Atoi(s); err != nil {
			return q, false, fmt.Errorf("tail %q is not an integer", s)
		}
		q.Tail = max(q.Tail, 0)
	}
	if s := v.Get("follow"); s != "" {
		if follow, err = strconv.ParseBool(s); err != nil {
			return q, false, fmt.Errorf("follow %q is not true or false", s)
		}
	}
	if s := v.Get("since"); s != "" {
		if q.Since, err = time.Parse(time.RFC3339, s); err != nil {
			return q, false, fmt.Errorf("since %q is not an RFC 3339 time: %v", s, err)
		}
	}
	return q, follow, nil
}

func (g *Gateway) functionLogs(w http.ResponseWriter, r *http.Request) {
	if !g.local && g.podLogs == nil {
		http.Error(w, "this backend keeps no logs of its instances", http.StatusNotImplemented)
		return
	}
	q, follow, err := parseLogQuery(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if g.podLogs != nil {
		g.backendLogs(w, r, q, follow)
		return
	}
	if _, ok := g.d.Function(q.Function); !ok && !g.logs.Known(q.Function) {
		http.Error(w, fmt.Sprintf("function %q not found", stack.QualifiedRef(q.Function)), http.StatusNotFound)
		return
	}
	// An empty 200 would read as "it printed nothing"; a misspelt
	// instance is a 404 with the reason, as an unknown function is.
	if q.Instance != "" && !g.logs.KnownInstance(q.Function, q.Instance) {
		http.Error(w, fmt.Sprintf("function %q has no instance %q (started since the gateway began, or with lines kept)",
			stack.QualifiedRef(q.Function), q.Instance), http.StatusNotFound)
		return
	}
	var lines []funclogs.Line
	var f *funclogs.Follower
	if follow {
		if lines, f, err = g.logs.Follow(q); err != nil {
			w.Header().Set("Retry-After", "5")
			http.Error(w, fmt.Sprintf("%v: at most %d at once", err, funclogs.MaxFollowers), http.StatusTooManyRequests)
			return
		}
		defer g.logs.Stop(f)
	} else {
		lines = g.logs.Lines(q)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	for _, l := range lines {
		if enc.Encode(toMessage(l)) != nil {
			return
		}
	}
	if flusher != nil {
		flusher.Flush()
	}
	if f == nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case l, ok := <-f.C():
			if !ok {
				if why := f.Reason(); why != "" {
					m := toMessage(funclogs.Line{Function: q.Function, Time: time.Now(), Text: why})
					_ = enc.Encode(m)
				}
				return
			}
			if enc.Encode(toMessage(l)) != nil {
				return
			}
			// Send what is buffered now, in one flush, rather than one
			// write a line.
			for drained := false; !drained; {
				select {
				case l, ok := <-f.C():
					if !ok {
						drained = true
						break
					}
					if enc.Encode(toMessage(l)) != nil {
						return
					}
				default:
					drained = true
				}
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

// backendLogs serves the lines the backend reads (pod logs on Kubernetes):
// the same format and query; following ends when the client goes or the
// gateway drains.
func (g *Gateway) backendLogs(w http.ResponseWriter, r *http.Request, q funclogs.Query, follow bool) {
	if _, ok := g.d.Function(q.Function); !ok {
		http.Error(w, fmt.Sprintf("function %q not found", stack.QualifiedRef(q.Function)), http.StatusNotFound)
		return
	}
	if follow {
		if g.podFollowers.Add(1) > funclogs.MaxFollowers {
			g.podFollowers.Add(-1)
			w.Header().Set("Retry-After", "5")
			http.Error(w, fmt.Sprintf("%v: at most %d at once", funclogs.ErrTooManyFollowers, funclogs.MaxFollowers), http.StatusTooManyRequests)
			return
		}
		defer g.podFollowers.Add(-1)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(g.streams, cancel)
	defer stop()
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	started := false
	begin := func() {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
		}
	}
	if follow {
		// A follower gets its answer's head at once, as with local
		// instances; an error past it is its last line.
		begin()
		if flusher != nil {
			flusher.Flush()
		}
	}
	err := g.podLogs.Logs(ctx, q.Function, q, follow, func(l funclogs.Line) error {
		begin()
		if err := enc.Encode(toMessage(l)); err != nil {
			return err
		}
		if follow && flusher != nil {
			flusher.Flush()
		}
		return nil
	})
	switch {
	case ctx.Err() != nil:
	case started && err != nil:
		_ = enc.Encode(toMessage(funclogs.Line{Function: q.Function, Time: time.Now(), Text: "reading the logs ended: " + err.Error()}))
	case started:
	case err == nil:
		begin()
	case errors.Is(err, stack.ErrInvalid):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		http.Error(w, fmt.Sprintf("reading the logs of %q: %v", stack.QualifiedRef(q.Function), err), http.StatusBadGateway)
	}
}
