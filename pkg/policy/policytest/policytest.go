// Package policytest is the conformance suite of the driver contract
// (pkg/policy, contract.go and rules.go), in the style of etcd raft's
// rafttest and its datadriven interaction scripts. A script declares an
// app under a named policy, sends requests with scripted execution times,
// and moves a scripted clock; the driver under test reports what it did
// (instances started, ready and stopped, which request ran on which
// instance, which were refused), and the report must match the script's
// expected output to the character.
//
// Both drivers run every script: the simulator (pkg/sim) and the live
// dispatcher (pkg/dispatch), each behind a scripted backend and clock, so
// a rule that drifts in either driver fails a named script. A driver that
// cannot honour a policy must refuse it at setup, and a script says which
// drivers refuse.
//
// Commands (datadriven):
//
//	setup policy=NAME [slo=D] [async=D] [cold=D] [tick=D] [window=D] [idle=D] [queue=N] [capacity=N] [seed=N] [refused-by=DRIVER,...]
//	NAME slo=D [min=N] [max=N] [crit=N] [plan=AT:N,...]   one input line per function, in chain order
//	arrive [n=N] [every=D] [class=sync|async] size=S exec=D[,D...] [out=S[,S...]]
//	run to=D                                        advance the clock, print what happened
//	budgets                                         print each function's cumulative SLO budget
//
// Times are offsets from the start of the script. Instances are named
// FUNCTION#K, the K-th instance of the function asked for; requests rK in
// arrival order from r0.
package policytest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"gantry.dev/gantry/pkg/policy"
)

// Setup is the app and platform a script declares.
type Setup struct {
	Policy    string
	Functions []Function
	// AppSLO is the app's SLO; 0 means the sum of the functions'.
	AppSLO time.Duration
	// AsyncDeadline is the app's async deadline (policy.AsyncBudget); 0
	// means policy.DefaultAsyncDeadline.
	AsyncDeadline time.Duration
	// ColdStart is what every instance start takes.
	ColdStart time.Duration
	// Tick, Window and IdleTimeout are the driver's (the core's defaults
	// when a script leaves them out).
	Tick, Window, IdleTimeout time.Duration
	// MaxQueue is every function's queue bound.
	MaxQueue int
	// Capacity bounds the instances of all functions together (0: none).
	Capacity int
	Seed     uint64
}

// Function is one function of the chain.
type Function struct {
	Name               string
	SLO                time.Duration
	MinScale, MaxScale int
	Criticality        int
	// Plan is the clairvoyant plan an oracle follows.
	Plan []PlanStep
}

// PlanStep is one change of a function's planned instances.
type PlanStep struct {
	At   time.Duration
	Live int
}

// Request is one request into the chain's head.
type Request struct {
	ID   int
	Size float64
	// Class is its deadline class (policy.Enter).
	Class policy.Class
	// Exec and Output are, per function, its execution time and output
	// size (the next function's input size).
	Exec   []time.Duration
	Output []float64
}

// Kind is what a driver did.
type Kind uint8

const (
	Start  Kind = iota // an instance was asked for
	Ready              // an instance finished its cold start
	Run                // a request started on an instance
	Stop               // an instance was stopped
	Refuse             // a request was refused at a full queue
)

var kindNames = [...]string{"start", "ready", "run", "stop", "refuse"}

func (k Kind) String() string { return kindNames[k] }

// Event is one thing a driver did.
type Event struct {
	At   time.Duration
	Kind Kind
	Fn   int
	// Inst is the instance's ordinal among the function's (from 1); 0
	// for Refuse.
	Inst int
	// Req is the request, for Run and Refuse.
	Req int
}

// Driver is a driver under test, behind a scripted backend and clock.
type Driver interface {
	// Name says which driver it is (a script's refused-by names it).
	Name() string
	// Setup deploys the app; an error is a refusal.
	Setup(s Setup) error
	// Arrive sends a request into the chain's head now.
	Arrive(r Request)
	// Advance runs the driver up to and including instant t: every cold
	// start, execution, tick and wake due by then, in time order.
	Advance(t time.Duration)
	// Events returns what the driver did since the last call.
	Events() []Event
	// Budgets is each function's SLO budget, cumulative along the chain:
	// the deadline a request has there, from its arrival at the app.
	Budgets() []time.Duration
	// Close stops the driver.
	Close()
}

// RunScripts runs every script under dir against a fresh driver each.
func RunScripts(t *testing.T, dir string, newDriver func(t *testing.T) Driver) {
	datadriven.Walk(t, dir, func(t *testing.T, path string) {
		d := newDriver(t)
		defer d.Close()
		s := &script{d: d}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if s.refused {
				return td.Expected // the driver refused the setup: nothing else applies
			}
			s.t = t
			out, err := s.do(td)
			if err != nil {
				td.Fatalf(t, "%v", err)
			}
			return out
		})
	})
}

type script struct {
	t       *testing.T
	d       Driver
	setup   Setup
	now     time.Duration
	next    int
	refused bool
}

func (s *script) do(td *datadriven.TestData) (string, error) {
	switch td.Cmd {
	case "setup":
		return s.doSetup(td)
	case "arrive":
		return "", s.doArrive(td)
	case "budgets":
		var b strings.Builder
		for i, d := range s.d.Budgets() {
			fmt.Fprintf(&b, "%s %v\n", s.setup.Functions[i].Name, d)
		}
		return b.String(), nil
	case "run":
		to, err := durationArg(td, "to", 0)
		if err != nil {
			return "", err
		}
		if to < s.now {
			return "", fmt.Errorf("run to=%v is before now (%v)", to, s.now)
		}
		s.now = to
		s.d.Advance(to)
		return s.report(), nil
	}
	return "", fmt.Errorf("unknown command %q", td.Cmd)
}

func (s *script) doSetup(td *datadriven.TestData) (string, error) {
	var st Setup
	var err error
	td.ScanArgs(s.t, "policy", &st.Policy)
	durs := []struct {
		key string
		v   *time.Duration
	}{{"slo", &st.AppSLO}, {"async", &st.AsyncDeadline}, {"cold", &st.ColdStart}, {"tick", &st.Tick}, {"window", &st.Window}, {"idle", &st.IdleTimeout}}
	for _, a := range durs {
		if *a.v, err = durationArg(td, a.key, 0); err != nil {
			return "", err
		}
	}
	st.MaxQueue, st.Capacity = s.intArg(td, "queue", 0), s.intArg(td, "capacity", 0)
	st.Seed = uint64(s.intArg(td, "seed", 1))
	for line := range strings.Lines(td.Input) {
		f, err := parseFunction(strings.TrimSpace(line))
		if err != nil {
			return "", err
		}
		st.Functions = append(st.Functions, f)
	}
	var refusers []string
	if td.HasArg("refused-by") {
		td.ScanArgs(s.t, "refused-by", &refusers)
	}
	s.setup = st
	err = s.d.Setup(st)
	if slices.Contains(refusers, s.d.Name()) {
		if err == nil {
			return "", fmt.Errorf("%s accepted policy %s, which it must refuse", s.d.Name(), st.Policy)
		}
		s.refused = true
		return td.Expected, nil
	}
	if err != nil {
		return "", fmt.Errorf("setup: %w", err)
	}
	return "ok", nil
}

func parseFunction(line string) (Function, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return Function{}, fmt.Errorf("empty function line")
	}
	f := Function{Name: fields[0]}
	for _, kv := range fields[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return f, fmt.Errorf("function %s: %q is not key=value", f.Name, kv)
		}
		var err error
		switch k {
		case "slo":
			f.SLO, err = time.ParseDuration(v)
		case "min":
			f.MinScale, err = strconv.Atoi(v)
		case "max":
			f.MaxScale, err = strconv.Atoi(v)
		case "crit":
			f.Criticality, err = strconv.Atoi(v)
		case "plan":
			f.Plan, err = parsePlan(v)
		default:
			err = fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return f, fmt.Errorf("function %s: %s: %w", f.Name, k, err)
		}
	}
	return f, nil
}

func parsePlan(v string) ([]PlanStep, error) {
	var out []PlanStep
	for step := range strings.SplitSeq(v, ",") {
		at, n, ok := strings.Cut(step, ":")
		if !ok {
			return nil, fmt.Errorf("step %q is not AT:N", step)
		}
		d, err := time.ParseDuration(at)
		if err != nil {
			return nil, err
		}
		live, err := strconv.Atoi(n)
		if err != nil {
			return nil, err
		}
		out = append(out, PlanStep{At: d, Live: live})
	}
	return out, nil
}

func (s *script) doArrive(td *datadriven.TestData) error {
	n := s.intArg(td, "n", 1)
	every, err := durationArg(td, "every", 0)
	if err != nil {
		return err
	}
	var size float64
	var execs, outs []string
	td.ScanArgs(s.t, "size", &size)
	td.ScanArgs(s.t, "exec", &execs)
	if td.HasArg("out") {
		td.ScanArgs(s.t, "out", &outs)
	}
	fns := len(s.setup.Functions)
	r := Request{Size: size, Exec: make([]time.Duration, fns), Output: make([]float64, fns)}
	if class, ok := stringArg(td, "class"); ok {
		switch class {
		case "sync":
		case "async":
			r.Class = policy.Async
		default:
			return fmt.Errorf("class=%q: want sync or async", class)
		}
	}
	for f := range fns {
		e := execs[min(f, len(execs)-1)]
		if r.Exec[f], err = time.ParseDuration(e); err != nil {
			return fmt.Errorf("exec %q: %w", e, err)
		}
		r.Output[f] = size
		if len(outs) > 0 {
			if r.Output[f], err = strconv.ParseFloat(outs[min(f, len(outs)-1)], 64); err != nil {
				return fmt.Errorf("out: %w", err)
			}
		}
	}
	for i := range n {
		if i > 0 && every > 0 {
			s.now += every
			s.d.Advance(s.now)
		}
		r.ID = s.next
		s.next++
		s.d.Arrive(r)
	}
	return nil
}

// report prints the events since the last report, ordered within an
// instant by kind, function, instance and request, so that the order in
// which a driver happened to handle simultaneous events does not matter
// but every pairing of a request with an instance does.
func (s *script) report() string {
	evs := s.d.Events()
	slices.SortStableFunc(evs, func(a, b Event) int {
		for _, c := range [][2]int64{{int64(a.At), int64(b.At)}, {int64(a.Kind), int64(b.Kind)},
			{int64(a.Fn), int64(b.Fn)}, {int64(a.Inst), int64(b.Inst)}, {int64(a.Req), int64(b.Req)}} {
			if c[0] != c[1] {
				return map[bool]int{true: -1, false: 1}[c[0] < c[1]]
			}
		}
		return 0
	})
	var b strings.Builder
	for _, e := range evs {
		name := s.setup.Functions[e.Fn].Name
		fmt.Fprintf(&b, "%7.3fs %-6s", e.At.Seconds(), e.Kind)
		switch e.Kind {
		case Run:
			fmt.Fprintf(&b, " r%d on %s#%d\n", e.Req, name, e.Inst)
		case Refuse:
			fmt.Fprintf(&b, " r%d at %s\n", e.Req, name)
		default:
			fmt.Fprintf(&b, " %s#%d\n", name, e.Inst)
		}
	}
	if b.Len() == 0 {
		return "nothing\n"
	}
	return b.String()
}

func durationArg(td *datadriven.TestData, key string, def time.Duration) (time.Duration, error) {
	v, ok := stringArg(td, key)
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", key, v, err)
	}
	return d, nil
}

func (s *script) intArg(td *datadriven.TestData, key string, def int) int {
	v, ok := stringArg(td, key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		s.t.Fatalf("%s: %s=%q is not an integer", td.Pos, key, v)
	}
	return n
}

// stringArg is a key's single value.
func stringArg(td *datadriven.TestData, key string) (string, bool) {
	for _, a := range td.CmdArgs {
		if a.Key == key && len(a.Vals) > 0 {
			return a.Vals[0], true
		}
	}
	return "", false
}
