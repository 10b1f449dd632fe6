package dispatch

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/policy/policytest"
	"gantry.dev/gantry/pkg/stack"
)

// The live dispatcher runs every conformance script of the driver contract
// (pkg/policy/policytest), the same scripts the simulator runs.
func TestConformance(t *testing.T) {
	policytest.RunScripts(t, "../policy/policytest/testdata", func(t *testing.T) policytest.Driver {
		return newScripted(t)
	})
}

// scripted is the dispatcher behind a scripted backend and clock. It plays
// the gateway's part too: it moves a request along the chain with the
// deadline the app's budgets give, and releases each lease when the
// script's execution time has passed. Timed actions run in time order,
// ties in the order they were scheduled, as the simulator's events do.
type scripted struct {
	t       *testing.T
	d       *Dispatcher
	setup   policytest.Setup
	budgets []time.Duration
	fnIdx   map[string]int

	mu  sync.Mutex // guards now: the dispatcher reads the clock
	now time.Duration

	due     actions
	seq     uint64
	waiting []*scriptReq // calls queued, not yet on an instance
	evs     []policytest.Event
	ord     map[string]int // an instance's ordinal among its function's
	count   []int
	// exited are the instances stopped, whose Exited the backend reports
	// once the dispatcher's call has returned, as a real backend does.
	exited []backend.Instance
}

// scriptReq is one script request at one function.
type scriptReq struct {
	r       policytest.Request
	fn      int
	arrival time.Duration
	c       *call
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newScripted(t *testing.T) *scripted {
	return &scripted{t: t, fnIdx: map[string]int{}, ord: map[string]int{}}
}

func (s *scripted) Name() string { return "live" }

func (s *scripted) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return epoch.Add(s.now)
}

func (s *scripted) Setup(st policytest.Setup) error {
	s.setup, s.count = st, make([]int, len(st.Functions))
	d, err := New(Config{Policy: st.Policy, Capacity: st.Capacity, Tick: st.Tick, Window: st.Window,
		IdleTimeout: st.IdleTimeout, Now: s.clock, Seed: st.Seed,
		Check: func(context.Context, backend.Instance) error { return nil }}, (*scriptBackend)(s))
	if err != nil {
		return err
	}
	s.d = d
	var st2 stack.Stack
	for i, f := range st.Functions {
		s.fnIdx[f.Name] = i
		decl := stack.Function{Name: f.Name, Command: "script", SLO: f.SLO, ColdStart: st.ColdStart,
			MinScale: f.MinScale, MaxScale: f.MaxScale, MaxQueue: st.MaxQueue, Criticality: f.Criticality, SizeSensitive: true}
		if decl.MaxScale == 0 {
			decl.MaxScale = stack.MaxInstances // the simulator's functions have no ceiling
		}
		decl.Defaults()
		st2.Functions = append(st2.Functions, decl)
	}
	app := stack.App{Name: "script", SLO: st.AppSLO}
	for _, f := range st.Functions {
		app.Functions = append(app.Functions, f.Name)
	}
	st2.Apps = append(st2.Apps, app)
	if err := d.Load(context.Background(), &st2); err != nil {
		return err
	}
	info, ok := d.App("script")
	if !ok {
		return errors.New("the app was not deployed")
	}
	s.budgets = info.Budget
	s.schedule(0, func() { s.tick() })
	return nil
}

// tick plans, as Run does at every tick, and schedules the exact expiry
// of a keep-alive that ends before the next tick, as Run wakes for it.
func (s *scripted) tick() {
	s.d.Plan()
	s.settle()
	next := s.now + s.d.Tick()
	s.schedule(next, func() { s.tick() })
	s.scheduleExpiry(next)
}

func (s *scripted) scheduleExpiry(before time.Duration) {
	at, ok := s.d.NextExpiry()
	if !ok || at.Sub(epoch) >= before {
		return
	}
	s.schedule(at.Sub(epoch), func() {
		s.d.Expire()
		s.settle()
		s.scheduleExpiry(before)
	})
}

func (s *scripted) Arrive(r policytest.Request) { s.enter(&scriptReq{r: r, arrival: s.now}) }

// enter queues a request at its function, as the gateway's Acquire does.
func (s *scripted) enter(q *scriptReq) {
	name := s.setup.Functions[q.fn].Name
	c, in, err := s.d.enqueue(s.request(q))
	switch {
	case errors.Is(err, ErrQueueFull):
		s.note(policytest.Event{Kind: policytest.Refuse, Fn: q.fn, Req: q.r.ID})
	case err != nil:
		s.t.Fatalf("r%d at %s: %v", q.r.ID, name, err)
	case in != nil:
		q.c = c
		s.run(q, in)
	default:
		q.c = c
		s.waiting = append(s.waiting, q)
	}
	s.settle()
}

// request is q at its function, with the deadline its class gives, as the
// gateway's sync and async routes ask.
func (s *scripted) request(q *scriptReq) Request {
	r := Request{Function: s.setup.Functions[q.fn].Name, Size: q.size(), Deadline: epoch.Add(q.arrival + s.budgets[q.fn])}
	if q.r.Class == policy.Async {
		async := s.setup.AsyncDeadline
		if async == 0 {
			async = policy.DefaultAsyncDeadline
		}
		budget := policy.AsyncBudget(s.budgets[q.fn], s.budgets[len(s.budgets)-1], async)
		r.Class, r.Slack, r.Deadline = policy.Async, budget-s.budgets[q.fn], epoch.Add(q.arrival+budget)
	}
	return r
}

func (q *scriptReq) size() float64 {
	if q.fn == 0 {
		return q.r.Size
	}
	return q.r.Output[q.fn-1]
}

// run notes a request started on an instance and schedules its end.
func (s *scripted) run(q *scriptReq, in *instance) {
	s.note(policytest.Event{Kind: policytest.Run, Fn: q.fn, Inst: s.ord[in.ID], Req: q.r.ID})
	s.schedule(s.now+q.r.Exec[q.fn], func() { s.done(q) })
}

func (s *scripted) done(q *scriptReq) {
	s.d.finish(q.c, q.r.Exec[q.fn], q.r.Output[q.fn], true)
	s.settle()
	if q.fn+1 < len(s.setup.Functions) {
		s.enter(&scriptReq{r: q.r, fn: q.fn + 1, arrival: q.arrival})
	}
}

// settle delivers the exits of stopped instances, then notes every
// waiting call that got an instance.
func (s *scripted) settle() {
	for len(s.exited) > 0 {
		inst := s.exited[0]
		s.exited = s.exited[1:]
		events{s.d}.Exited(inst, nil)
	}
	kept := s.waiting[:0]
	for _, q := range s.waiting {
		select {
		case in := <-q.c.got:
			if in == nil {
				s.t.Fatalf("r%d failed: %v", q.r.ID, q.c.err)
			}
			s.run(q, in)
		default:
			kept = append(kept, q)
		}
	}
	s.waiting = kept
}

func (s *scripted) note(e policytest.Event) {
	e.At = s.now
	s.evs = append(s.evs, e)
}

func (s *scripted) schedule(at time.Duration, f func()) {
	s.seq++
	heap.Push(&s.due, action{at: at, seq: s.seq, f: f})
}

func (s *scripted) Advance(t time.Duration) {
	for len(s.due) > 0 && s.due[0].at <= t {
		a := heap.Pop(&s.due).(action)
		s.mu.Lock()
		s.now = a.at
		s.mu.Unlock()
		a.f()
	}
	s.mu.Lock()
	s.now = t
	s.mu.Unlock()
}

func (s *scripted) Events() []policytest.Event {
	out := s.evs
	s.evs = nil
	return out
}

func (s *scripted) Budgets() []time.Duration { return s.budgets }

func (s *scripted) Close() {
	if s.d != nil {
		_ = s.d.Close(context.Background())
	}
}

// scriptBackend is the scripted world's backend: every start takes the
// script's cold start.
type scriptBackend scripted

func (b *scriptBackend) Attach(backend.Events)                        {}
func (b *scriptBackend) Deploy(context.Context, stack.Function) error { return nil }
func (b *scriptBackend) Undeploy(context.Context, string) error       { return nil }
func (b *scriptBackend) Close(context.Context) error                  { return nil }

func (b *scriptBackend) Start(function string, n int) {
	s := (*scripted)(b)
	fn := s.fnIdx[function]
	for range n {
		s.count[fn]++
		inst := backend.Instance{ID: fmt.Sprintf("%s#%d", function, s.count[fn]), Function: function,
			ColdStart: s.setup.ColdStart}
		s.ord[inst.ID] = s.count[fn]
		s.note(policytest.Event{Kind: policytest.Start, Fn: fn, Inst: s.count[fn]})
		s.schedule(s.now+s.setup.ColdStart, func() {
			s.note(policytest.Event{Kind: policytest.Ready, Fn: fn, Inst: s.ord[inst.ID]})
			events{s.d}.Ready(inst)
			s.settle()
		})
	}
}

func (b *scriptBackend) Stop(inst backend.Instance) {
	s := (*scripted)(b)
	s.note(policytest.Event{Kind: policytest.Stop, Fn: s.fnIdx[inst.Function], Inst: s.ord[inst.ID]})
	s.exited = append(s.exited, inst)
}

// actions is a min-heap of timed actions by (at, seq).
type action struct {
	at  time.Duration
	seq uint64
	f   func()
}

type actions []action

func (a actions) Len() int { return len(a) }
func (a actions) Less(i, j int) bool {
	return a[i].at < a[j].at || (a[i].at == a[j].at && a[i].seq < a[j].seq)
}
func (a actions) Swap(i, j int) { a[i], a[j] = a[j], a[i] }
func (a *actions) Push(x any)   { *a = append(*a, x.(action)) }
func (a *actions) Pop() any {
	old := *a
	x := old[len(old)-1]
	*a = old[:len(old)-1]
	return x
}
