// Package gatewaybench measures the latency a gateway adds to a function
// call: Gantry's gateway beside the OpenFaaS gateway (Community Edition),
// under the same open-loop load, against the same in-process function
// instance, in one run.
//
// Four paths are loaded in turn, in short rounds whose order rotates, so
// that whatever else the machine is doing falls on all of them alike:
//
//	direct    load generator -> instance
//	gantry    load generator -> Gantry's gateway -> instance
//	provider  load generator -> minimal OpenFaaS provider -> instance
//	openfaas  load generator -> OpenFaaS gateway -> provider -> instance
//
// The OpenFaaS gateway never talks to a function itself: it forwards
// /function/NAME to its provider (faas-netes, faasd, ...), which forwards to
// the function. The provider here is a small httputil.ReverseProxy, and the
// provider path measures it alone, so the report can split the OpenFaaS
// path's added latency into the gateway's hop and the provider's hop rather
// than charge the provider's to the gateway.
package gatewaybench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Bounds on a run, so that a typo in a flag cannot run for hours or flood
// the machine.
const (
	MaxRate        = 20000
	MaxDuration    = 10 * time.Minute
	MaxWarmup      = time.Minute
	MaxBodyBytes   = 1 << 20
	MaxInFlight    = 100_000
	MaxGOMAXPROCS  = 1024
	MaxGOGC        = 10000
	MaxReadyWait   = 5 * time.Minute
	DefaultRate    = 1000
	DefaultSeconds = 10
)

// OpenFaaSVersion is the OpenFaaS gateway module version that
// hack/build-openfaas.sh builds; hack/openfaas/go.mod pins it and a test
// keeps the two in step.
const OpenFaaSVersion = "v0.0.0-20260702090804-8d803bf9e265"

// ErrBadOptions wraps every error of Options.Validate.
var ErrBadOptions = errors.New("bad gateway benchmark options")

// Options configures one comparison. DefaultOptions gives the defaults;
// Validate checks bounds without filling zero values, so an explicit zero
// from a flag is an error rather than a silent default.
type Options struct {
	// Rate is the mean request rate (Poisson arrivals) on each path.
	Rate float64
	// Duration is the measured load on each path: Duration/Round rounds.
	Duration time.Duration
	// Round is how long one path is loaded before the next takes over; a
	// whole number of seconds (the trace's resolution) dividing Duration.
	Round time.Duration
	// Warmup is unmeasured load on each path before the rounds, to fill
	// connection pools and let the gateways reach a steady state; whole
	// seconds, 0 for none.
	Warmup time.Duration
	// Seed fixes the arrivals: every path gets the same schedule in a
	// round.
	Seed uint64
	// BodyBytes is the request body's size; the instance echoes it back.
	BodyBytes int
	// MaxInFlight bounds the load generator's concurrent requests; an
	// arrival past it counts as an error (client_overload), never dropped.
	MaxInFlight int
	// GOMAXPROCS, when positive, is set for this process (the load
	// generator, the instance, Gantry's gateway and the provider) and for
	// the OpenFaaS gateway child; 0 leaves this process's and passes it on.
	GOMAXPROCS int
	// GOGC, when positive, is the GOGC both gateway children run with;
	// 0 leaves Go's default (100).
	GOGC int
	// Gantry is the command that runs Gantry's gateway in a process of its
	// own for the gantry path; the instance's address is appended, and the
	// command must call ServeGantry with it (`gantry bench gateway` passes
	// itself with a hidden flag). Empty skips that path; the in-process
	// gateway (path gantry-inproc) is measured either way.
	Gantry []string
	// OpenFaaS is the OpenFaaS gateway binary; empty skips its path. A
	// missing binary, busy ports or a failed start also skip it, with the
	// reason in Report.OpenFaaS.Note.
	OpenFaaS string
	// OpenFaaSLog receives the child's output (it logs every request, as
	// it does in production); empty means a temporary file, removed after.
	OpenFaaSLog string
	// ReadyWait bounds the wait for the OpenFaaS gateway to answer.
	ReadyWait time.Duration
	// Log, when set, receives one line per phase and round.
	Log io.Writer
}

// DefaultOptions are the targets' conditions: 1000 requests/s of
// 64-byte bodies for 10 s on each path, in 1 s rounds, after a 1 s warm-up.
func DefaultOptions() Options {
	return Options{
		Rate:        DefaultRate,
		Duration:    DefaultSeconds * time.Second,
		Round:       time.Second,
		Warmup:      time.Second,
		Seed:        1,
		BodyBytes:   64,
		MaxInFlight: 1000,
		OpenFaaS:    DefaultOpenFaaSPath(),
		ReadyWait:   15 * time.Second,
	}
}

// DefaultOpenFaaSPath is where hack/build-openfaas.sh puts the gateway:
// $GANTRY_CACHE/openfaas/<version>/gateway, the cache defaulting to
// ~/.cache/gantry as for the control plane.
func DefaultOpenFaaSPath() string {
	cache := os.Getenv("GANTRY_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(home, ".cache", "gantry")
	}
	return filepath.Join(cache, "openfaas", OpenFaaSVersion, "gateway")
}

// Validate reports whether Run would accept o; errors wrap ErrBadOptions.
func (o Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadOptions, fmt.Sprintf(format, args...))
	}
	if err := validateLoad(o.Rate, o.Warmup, o.BodyBytes, o.MaxInFlight, o.GOMAXPROCS, o.ReadyWait); err != nil {
		return err
	}
	switch {
	case o.Duration < time.Second || o.Duration > MaxDuration:
		return bad("duration must be in [1s, %v], got %v", MaxDuration, o.Duration)
	case o.Round < time.Second || o.Round > o.Duration || o.Round%time.Second != 0:
		return bad("round must be whole seconds in [1s, duration], got %v", o.Round)
	case o.Duration%o.Round != 0:
		return bad("duration %v must be a whole number of rounds of %v", o.Duration, o.Round)
	case o.GOGC < 0 || o.GOGC > MaxGOGC:
		return bad("GOGC must be in [0, %d], got %d", MaxGOGC, o.GOGC)
	}
	return nil
}

// validateLoad checks the bounds the comparison and the sustained run
// share: the load's rate, warm-up, body and in-flight cap, and the
// children's GOMAXPROCS and start wait.
func validateLoad(rate float64, warmup time.Duration, body, inFlight, gomaxprocs int, readyWait time.Duration) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case !(rate > 0 && rate <= MaxRate):
		return bad("rate must be in (0, %d] requests/s, got %v", MaxRate, rate)
	case warmup < 0 || warmup > MaxWarmup || warmup%time.Second != 0:
		return bad("warm-up must be whole seconds in [0, %v], got %v", MaxWarmup, warmup)
	case body < 1 || body > MaxBodyBytes:
		return bad("body must be in [1, %d] bytes, got %d", MaxBodyBytes, body)
	case inFlight < 1 || inFlight > MaxInFlight:
		return bad("max in-flight must be in [1, %d], got %d", MaxInFlight, inFlight)
	case gomaxprocs < 0 || gomaxprocs > MaxGOMAXPROCS:
		return bad("GOMAXPROCS must be in [0, %d], got %d", MaxGOMAXPROCS, gomaxprocs)
	case readyWait <= 0 || readyWait > MaxReadyWait:
		return bad("ready wait must be in (0, %v], got %v", MaxReadyWait, readyWait)
	}
	return nil
}

// runtimeEnv is the Go runtime's settings a gateway child gets, the same
// for both gateways.
func runtimeEnv(gomaxprocs, gogc int) []string {
	env := []string{"GOMAXPROCS=" + strconv.Itoa(gomaxprocs)}
	if gogc > 0 {
		env = append(env, "GOGC="+strconv.Itoa(gogc))
	}
	return env
}
