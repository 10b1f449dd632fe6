package processnode

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAddrPoolIsBoundedAndReusesTheOldestFreedFirst(t *testing.T) {
	p, err := newAddrPool(netip.MustParsePrefix("127.0.0.0/29"), 100)
	if err != nil {
		t.Fatal(err)
	}
	// .1 is 127.0.0.1 and .0/.7 are the prefix's ends: .2 to .6 remain.
	var got []netip.Addr
	for range 5 {
		a, err := p.get()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	if got[0] != netip.MustParseAddr("127.0.0.2") || got[4] != netip.MustParseAddr("127.0.0.6") {
		t.Errorf("addresses %v, want 127.0.0.2 to 127.0.0.6", got)
	}
	if _, err := p.get(); err == nil {
		t.Fatal("a sixth address from a pool of five")
	}
	if err := p.put(got[3]); err != nil {
		t.Fatal(err)
	}
	if err := p.put(got[3]); err == nil {
		t.Error("a double free was accepted")
	}
	if err := p.put(got[1]); err != nil {
		t.Fatal(err)
	}
	if a, _ := p.get(); a != got[3] {
		t.Errorf("reused %s first, want the oldest freed %s", a, got[3])
	}
	small, _ := newAddrPool(netip.MustParsePrefix("127.9.0.0/16"), 3)
	if n := len(small.free); n != 3 {
		t.Errorf("pool of size 3 offers %d", n)
	}
	for _, bad := range []string{"0.0.0.0/0", "127.0.0.0/31", "::1/128"} {
		if _, err := newAddrPool(netip.MustParsePrefix(bad), 10); err == nil {
			t.Errorf("newAddrPool(%s) accepted", bad)
		}
	}
}

// Many goroutines taking and returning addresses never share one.
func TestAddrPoolUnderContention(t *testing.T) {
	p, err := newAddrPool(netip.MustParsePrefix("127.10.0.0/24"), 16)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	held := map[netip.Addr]bool{}
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 200 {
				a, err := p.get()
				if err != nil {
					continue // all taken right now
				}
				mu.Lock()
				if held[a] {
					t.Errorf("%s handed out twice", a)
				}
				held[a] = true
				mu.Unlock()
				mu.Lock()
				delete(held, a)
				mu.Unlock()
				if err := p.put(a); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if p.used() != 0 || len(p.free) != 16 {
		t.Errorf("after the storm: %d used, %d free", p.used(), len(p.free))
	}
}

func TestClaimPrefixGivesEachNodeItsOwn(t *testing.T) {
	dir := t.TempDir()
	a, fa, err := claimPrefix(dir, loopbackSpace)
	if err != nil {
		t.Fatal(err)
	}
	b, fb, err := claimPrefix(dir, loopbackSpace)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || !loopbackSpace.Contains(a.Addr()) || !loopbackSpace.Contains(b.Addr()) || a.Bits() != 24 {
		t.Fatalf("claims %s and %s", a, b)
	}
	fa.Close()
	c, fc, err := claimPrefix(dir, loopbackSpace)
	if err != nil {
		t.Fatal(err)
	}
	if c != a {
		t.Errorf("after the first node released %s, the next claim got %s", a, c)
	}
	fb.Close()
	fc.Close()
}

// The claims' folder is every user's: a node leaves it and its lock files
// open to all, as a folder made under the umask (0755, files 0644) made
// every other user's node fail on the lock with "permission denied".
func TestClaimFolderIsOpenToEveryUser(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "claims")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	first := prefixAt(loopbackSpace, 0)
	if err := os.WriteFile(filepath.Join(dir, first.Addr().String()+".lock"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	p, f, err := claimPrefix(dir, loopbackSpace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p != first {
		t.Errorf("claimed %s, want the free %s whose lock file another node left read-only", p, first)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("claims folder mode %v (%v), want drwxrwxrwt", fi.Mode(), err)
	}
	if fi, err = f.Stat(); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("lock file mode %v (%v), want -rw-rw-rw-", fi.Mode(), err)
	}
}

func TestExpandVars(t *testing.T) {
	vals := map[string]string{"A": "1", "B": "two"}
	for in, want := range map[string]string{
		"$(A)-$(B)": "1-two", "$$(A)": "$(A)", "$(C)": "$(C)", "cost $5": "cost $5",
		"$(A": "$(A", "x$": "x$", "": "",
	} {
		if got := expandVars(in, vals); got != want {
			t.Errorf("expandVars(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFieldValue(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", UID: "u",
		Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a/b": "c"}},
		Spec: corev1.PodSpec{NodeName: "node", ServiceAccountName: "sa"}}
	for path, want := range map[string]string{
		"metadata.name": "p", "metadata.namespace": "n", "metadata.uid": "u",
		"metadata.labels['app']": "x", "metadata.annotations['a/b']": "c",
		"spec.nodeName": "node", "spec.serviceAccountName": "sa",
		"status.podIP": "127.64.0.9", "status.hostIP": HostIP,
	} {
		if got, err := fieldValue(pod, path, "127.64.0.9", HostIP); err != nil || got != want {
			t.Errorf("fieldValue(%s) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := fieldValue(pod, "spec.nonsense", "", ""); err == nil {
		t.Error("an unknown field path resolved")
	}
}

func TestRunLogCapsAndFilters(t *testing.T) {
	l, err := newRunLog(filepath.Join(t.TempDir(), "x.log"), 200)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		l.record(t0.Add(time.Duration(i)*time.Second), []byte(strings.Repeat("x", 10)+"\n"))
	}
	l.close()
	size, closed, _ := l.state()
	data, err := l.readRange(0, size)
	if err != nil || !closed {
		t.Fatal(err, closed)
	}
	if int64(len(data)) > 200+120 {
		t.Errorf("log of %d bytes, cap 200 plus the closing note", len(data))
	}
	if !strings.Contains(string(data), "44 bytes of output dropped past the 200-byte log limit") {
		t.Errorf("no note of the dropped output:\n%s", data)
	}
	lines := filterLines(data, LogOptions{Since: t0.Add(3 * time.Second)})
	// Records are 32 bytes, so seconds 0 to 5 fit under the cap; 3 to 5
	// are at or after the fourth second.
	if got := strings.Count(string(lines), "xxxxxxxxxx\n"); got != 3 {
		t.Errorf("%d lines since the fourth second, want 3:\n%s", got, lines)
	}
}
