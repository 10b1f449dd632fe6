package loadgen

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"syscall"
)

// statusKinds holds "http_<code>" for every valid status, so that counting
// an error response does not format a string per request.
var statusKinds = func() map[int]string {
	m := make(map[int]string, 500)
	for code := 100; code < 600; code++ {
		m[code] = "http_" + strconv.Itoa(code)
	}
	return m
}()

// statusKind is the outcome kind of a complete HTTP response.
func statusKind(code int) string {
	if code >= 200 && code < 300 {
		return KindOK
	}
	if k, ok := statusKinds[code]; ok {
		return k
	}
	return "http_" + strconv.Itoa(code)
}

// errorKind names what went wrong with a request that got no complete
// response. aborted tells whether the run aborted its in-flight requests,
// which is the only way a request's context is cancelled rather than timed
// out.
func errorKind(err error, aborted bool) string {
	var nerr net.Error
	switch {
	case aborted && errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return KindTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindConnectionRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// A peer that closes the connection mid-exchange shows up as EOF;
		// to the caller it is the same failure as a reset.
		return KindConnectionReset
	}
	return KindOther
}
