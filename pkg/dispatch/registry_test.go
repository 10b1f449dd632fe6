package dispatch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/stack"
)

// undeployCounter is a fake backend that counts what it undeploys.
type undeployCounter struct {
	*fakeBackend
	mu         sync.Mutex
	undeployed []string
}

func (b *undeployCounter) Undeploy(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.undeployed = append(b.undeployed, name)
	return nil
}

// A deploy whose policy cannot be built leaves nothing behind: no
// function, nothing deployed at the backend, and the same answer to a
// second try rather than "already exists".
func TestDeployWhosePolicyFailsLeavesNothing(t *testing.T) {
	refuse := errors.New("policy refuses the spec")
	be := &undeployCounter{fakeBackend: newFake(false)}
	d, err := New(Config{NewPolicy: func(string, policy.Spec) (policy.Policy, error) { return nil, refuse }}, be)
	if err != nil {
		t.Fatal(err)
	}
	first := d.Deploy(context.Background(), decl("f", 0))
	if !errors.Is(first, refuse) {
		t.Fatalf("deploy = %v, want the policy's error", first)
	}
	if fns := d.Functions(); len(fns) != 0 {
		t.Fatalf("functions after a failed deploy: %+v", fns)
	}
	if _, ok := d.Lookup("f"); ok {
		t.Fatal("a failed deploy is still looked up")
	}
	second := d.Deploy(context.Background(), decl("f", 0))
	if errors.Is(second, ErrExists) || second == nil || second.Error() != first.Error() {
		t.Fatalf("second deploy = %v, want %v", second, first)
	}
	be.mu.Lock()
	undeployed := len(be.undeployed)
	be.mu.Unlock()
	if undeployed != 2 {
		t.Fatalf("the backend undeployed %d times, want once per failed deploy", undeployed)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Close fails what is queued; a function that never got a queue has
// nothing to fail and must not stop it.
func TestCloseWithAFunctionWithoutAQueue(t *testing.T) {
	d := newTestDispatcher(t, Config{}, newFake(false))
	d.mu.Lock()
	d.fns["bare"] = &function{decl: decl("bare", 0)}
	d.mu.Unlock()
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// An app whose policy cannot be built leaves its functions as they were:
// each still planned by a policy of its own.
func TestDeployAppWhosePolicyFailsKeepsTheFunctions(t *testing.T) {
	refuse := errors.New("no apps")
	cfg := Config{NewPolicy: func(name string, spec policy.Spec) (policy.Policy, error) {
		if len(spec.Functions) > 1 {
			return nil, refuse
		}
		return policy.New(name, spec)
	}}
	d := newTestDispatcher(t, cfg, newFake(false), decl("a", 0), decl("b", 0))
	if err := d.DeployApp(stack.App{Name: "ab", Functions: []string{"a", "b"}}); !errors.Is(err, refuse) {
		t.Fatalf("deploy app = %v", err)
	}
	d.mu.Lock()
	groups := len(d.groups)
	d.mu.Unlock()
	if groups != 2 || len(d.Apps()) != 0 {
		t.Fatalf("%d groups and apps %v after a failed app, want 2 and none", groups, d.Apps())
	}
}

// Two functions of one name in two namespaces are two functions: each is
// started, served, crashes and is removed under its own key (stack.Ref),
// and the backend is told which.
func TestSameNameInTwoNamespacesAreTwoFunctions(t *testing.T) {
	be := newFake(false)
	staging := decl("f", 0)
	staging.Namespace = "staging"
	d := newTestDispatcher(t, Config{}, be, decl("f", 0), staging)
	if _, ok := d.Lookup("f.staging"); !ok {
		t.Fatal("f.staging not registered")
	}
	if err := d.Deploy(context.Background(), staging); !errors.Is(err, ErrExists) {
		t.Fatalf("second deploy of f.staging: %v", err)
	}
	got := make(chan *Lease, 1)
	go func() {
		l, err := d.Acquire(context.Background(), req("f.staging"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, func() bool { return be.Started("f.staging") == 1 })
	if be.Started("f") != 0 {
		t.Fatal("a request for f.staging started an instance of f")
	}
	inst := be.MakeReady("f.staging")
	l := <-got
	if l.Instance.ID != inst.ID || l.Instance.Function != "f.staging" {
		t.Fatalf("leased %+v", l.Instance)
	}
	l.Release(time.Millisecond, 1)
	if st, _ := d.Function("f"); st.Stats.Accepted != 0 || st.Available != 0 {
		t.Fatalf("f counted f.staging's request: %+v", st)
	}
	be.Crash(0)
	waitFor(t, func() bool { st, _ := d.Function("f.staging"); return st.Stats.Crashes == 1 && st.Available == 0 })
	if st, _ := d.Function("f.staging"); st.Restarts != 1 {
		t.Fatalf("the crash of f.staging's instance counts %d restarts, want 1", st.Restarts)
	}
	if err := d.Remove(context.Background(), "f.staging"); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Lookup("f"); !ok {
		t.Fatal("removing f.staging removed f")
	}
	if _, ok := d.Lookup("f.staging"); ok {
		t.Fatal("f.staging still registered")
	}
}
