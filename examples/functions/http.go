package functions

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// Header names of the instance contract.
const (
	HeaderInputSize  = "X-Input-Size"
	HeaderOutputSize = "X-Output-Size"
)

// HealthPath answers 200 once the instance is ready (of-watchdog's path).
const HealthPath = "/_/health"

// inputError marks bad input, which is the caller's fault: 400, not 500.
type inputError struct{ error }

func (e inputError) Unwrap() error { return e.error }

// badInput returns an inputError with a formatted reason.
func badInput(format string, args ...any) error {
	return inputError{fmt.Errorf(format, args...)}
}

func newMux(s spec, run runFunc, maxBody int64) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	// "/{$}" matches only "/", and the method in the pattern makes the mux
	// answer other methods with 405 and an Allow header by itself.
	mux.Handle("POST /{$}", &invoker{spec: s, run: run, maxBody: maxBody})
	return mux
}

// invoker turns one HTTP request into one function call.
type invoker struct {
	spec    spec
	run     runFunc
	maxBody int64
}

func (h *invoker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	size, given, err := inputSize(r.Header)
	if err != nil {
		replyError(w, http.StatusBadRequest, err)
		return
	}
	body, status, err := h.readBody(w, r)
	if err != nil {
		replyError(w, status, err)
		return
	}
	if !given {
		size = float64(len(body)) / h.spec.inUnit.bytes
	}
	req := request{body: body, size: size, sizeGiven: given, query: r.URL.Query()}
	res, err := h.call(r, req)
	if err != nil {
		replyError(w, statusOf(err), err)
		return
	}
	h.reply(w, res)
}

// readBody reads the whole body within the bound; a body past it is 413.
func (h *invoker) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	if r.ContentLength > h.maxBody {
		return nil, http.StatusRequestEntityTooLarge, tooLarge(h.maxBody)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, http.StatusRequestEntityTooLarge, tooLarge(h.maxBody)
	case err != nil:
		return nil, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	return body, 0, nil
}

func tooLarge(limit int64) error {
	return fmt.Errorf("request body is larger than %d bytes", limit)
}

// call runs the function and turns a panic into a 500, so that one bad
// input cannot take down the connection without a reason.
func (h *invoker) call(r *http.Request, req request) (res result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s panicked: %v", h.spec.name, p)
		}
	}()
	return h.run(r.Context(), req)
}

func (h *invoker) reply(w http.ResponseWriter, res result) {
	out := res.outSize
	if !res.hasOutSize {
		out = float64(len(res.body)) / h.spec.outUnit.bytes
	}
	w.Header().Set("Content-Type", res.contentType)
	w.Header().Set(HeaderOutputSize, strconv.FormatFloat(out, 'g', -1, 64))
	_, _ = w.Write(res.body)
}

// inputSize parses X-Input-Size. A size of zero is allowed because an empty
// text is a valid input; replay checks for a positive size itself.
func inputSize(h http.Header) (size float64, given bool, err error) {
	v := h.Get(HeaderInputSize)
	if v == "" {
		return 0, false, nil
	}
	size, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(size) || math.IsInf(size, 0) || size < 0 {
		return 0, false, fmt.Errorf("%s must be a non-negative finite number, got %q", HeaderInputSize, v)
	}
	return size, true, nil
}

func statusOf(err error) int {
	var ie inputError
	if errors.As(err, &ie) {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// replyError writes the reason on one line, as the contract promises, even
// when a wrapped parser error spans several.
func replyError(w http.ResponseWriter, status int, err error) {
	http.Error(w, oneLine(err.Error()), status)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
