package functions

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
)

// ErrUnknownFunction is returned for a name that is not in Names().
var ErrUnknownFunction = errors.New("unknown function")

// ErrBadOption is returned by Handler for options that the function cannot
// use, such as replay options given to a real function.
var ErrBadOption = errors.New("bad function option")

// MaxBody bounds a request body and a generated payload: 64 MiB holds the
// largest input of every app with room to spare, and a bound keeps one
// request from exhausting an instance's memory.
const MaxBody = 64 << 20

// unit is a size unit; the gateway and the simulator speak in KB or MB.
type unit struct {
	name  string
	bytes float64
}

var (
	kb      = unit{"KB", 1 << 10}
	mb      = unit{"MB", 1 << 20}
	appUnit = unit{"app's unit", 1}
)

func unitNamed(name string) (unit, error) {
	switch name {
	case kb.name:
		return kb, nil
	case mb.name:
		return mb, nil
	}
	return unit{}, fmt.Errorf("unknown size unit %q", name)
}

// request is what a function sees of an HTTP call.
type request struct {
	body []byte
	// size is the input size in the function's unit: X-Input-Size when
	// sizeGiven, otherwise the body length.
	size      float64
	sizeGiven bool
	query     url.Values
}

// result is a function's output. work counts the units of work done
// (pixels, samples, words, bytes) so that tests can check that the cost
// follows the input size without timing anything.
type result struct {
	body        []byte
	contentType string
	work        int64
	// outSize overrides the measured output size when hasOutSize; replay
	// reports the model's output instead of its own tiny body.
	outSize    float64
	hasOutSize bool
}

// runFunc executes one call. An inputError becomes 400, any other error 500.
type runFunc func(ctx context.Context, req request) (result, error)

// spec describes one servable function.
type spec struct {
	name    string
	summary string
	// serves lists the "app/function" chain positions this function plays.
	serves          []string
	inUnit, outUnit unit
	// build makes the run function for one handler; replay keeps state
	// (its random stream) per handler, the real functions keep none.
	build func(o options) (runFunc, error)
}

// stateless adapts a plain run function to spec.build.
func stateless(run runFunc) func(options) (runFunc, error) {
	return func(options) (runFunc, error) { return run, nil }
}

// aliases maps the paper's chain names onto the function that implements
// them, so that a stack file can name either.
var aliases = map[string]string{
	"text-translate": "translate",
	"email-classify": "email-categorize",
}

// registry holds every function by its own name.
var registry = func() map[string]spec {
	m := map[string]spec{}
	for _, s := range []spec{
		imageCompressSpec, sentimentSpec, emailParseSpec, emailCategorizeSpec,
		speechToTextSpec, translateSpec, sendMessageSpec, pdfExtractSpec,
		summarizeSpec, replaySpec,
	} {
		m[s.name] = s
	}
	return m
}()

// lookup resolves a name or alias.
func lookup(name string) (spec, bool) {
	if target, ok := aliases[name]; ok {
		name = target
	}
	s, ok := registry[name]
	return s, ok
}

// Names lists every servable function name, aliases included, sorted.
func Names() []string {
	names := make([]string, 0, len(registry)+len(aliases))
	for n := range registry {
		names = append(names, n)
	}
	for n := range aliases {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// About describes a function, for `gantry fn --list` and for docs.
type About struct {
	Name string
	// AliasOf names the function that serves Name, or is empty.
	AliasOf string
	// Serves lists the "app/function" chain positions in pkg/workload.
	Serves []string
	// InUnit and OutUnit are the units of X-Input-Size and X-Output-Size.
	InUnit, OutUnit string
	Summary         string
}

// Describe returns what Name does and which apps it serves.
func Describe(name string) (About, error) {
	s, ok := lookup(name)
	if !ok {
		return About{}, unknown(name)
	}
	a := About{
		Name: name, Serves: slices.Clone(s.serves),
		InUnit: s.inUnit.name, OutUnit: s.outUnit.name, Summary: s.summary,
	}
	if s.name != name {
		a.AliasOf = s.name
	}
	return a, nil
}

func unknown(name string) error {
	return fmt.Errorf("%w %q (known: %v)", ErrUnknownFunction, name, Names())
}

// Option configures a Handler.
type Option func(*options)

type options struct {
	maxBody int64
	replay  *replayConfig
}

type replayConfig struct {
	app, function string
	seed          uint64
}

// WithMaxBody sets the largest accepted request body in bytes (default MaxBody).
func WithMaxBody(n int64) Option { return func(o *options) { o.maxBody = n } }

// WithReplay configures the replay function: the pkg/workload app, the
// function in its chain by name or 0-based index, and the seed of its noise
// (0 picks a random seed). Only replay accepts it, and replay requires it.
func WithReplay(app, function string, seed uint64) Option {
	return func(o *options) { o.replay = &replayConfig{app: app, function: function, seed: seed} }
}

// Handler returns the HTTP handler that serves one function under the
// instance contract described in the package documentation.
func Handler(name string, opts ...Option) (http.Handler, error) {
	s, ok := lookup(name)
	if !ok {
		return nil, unknown(name)
	}
	o := options{maxBody: MaxBody}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkOptions(s, o); err != nil {
		return nil, err
	}
	run, err := s.build(o)
	if err != nil {
		return nil, err
	}
	return newMux(s, run, o.maxBody), nil
}

func checkOptions(s spec, o options) error {
	switch {
	case o.maxBody <= 0:
		return fmt.Errorf("%w: max body must be positive, got %d", ErrBadOption, o.maxBody)
	case s.name == replayName && o.replay == nil:
		return fmt.Errorf("%w: replay needs an app and a function", ErrBadOption)
	case s.name != replayName && o.replay != nil:
		return fmt.Errorf("%w: only replay takes an app and a function, not %s", ErrBadOption, s.name)
	}
	return nil
}
