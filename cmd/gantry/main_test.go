package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gantry.dev/gantry/internal/cli"
	"gantry.dev/gantry/pkg/childproc"
)

// The test binary is gantry itself when GANTRY_TEST_MAIN is set, so tests
// can run `gantry serve` as a process of its own and kill it.
func TestMain(m *testing.M) {
	switch os.Getenv("GANTRY_TEST_INSTANCE") {
	case "slow":
		serveSlow()
		return
	case "chaos":
		serveChaos() // chaos_test.go
		return
	}
	if os.Getenv("GANTRY_TEST_MAIN") == "1" {
		os.Exit(cli.Execute())
	}
	os.Exit(m.Run())
}

// serveSlow is an instance whose every POST takes $GANTRY_TEST_SLEEP; on
// receiving one it creates a file in $GANTRY_TEST_RECEIPTS, so a test
// knows which requests an instance got.
func serveSlow() {
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
	if err != nil {
		os.Exit(1)
	}
	sleep, _ := time.ParseDuration(os.Getenv("GANTRY_TEST_SLEEP"))
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			return
		}
		_ = os.WriteFile(filepath.Join(os.Getenv("GANTRY_TEST_RECEIPTS"), r.Header.Get("X-Test-Id")), nil, 0o644)
		time.Sleep(sleep)
		_, _ = w.Write([]byte("done"))
	}))
}

// serveProc is a `gantry serve` this test started.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *bytes.Buffer
}

// startServe runs `gantry serve` with the stack on a free port, its
// environment marked with mark, and waits until it listens.
func startServe(t *testing.T, stack string, mark string, args ...string) *serveProc {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "stack.yml")
	if err := os.WriteFile(path, []byte(stack), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	all := append([]string{"serve", "--addr", "127.0.0.1:0", "--state-dir", filepath.Join(dir, "state"), "--stack", path}, args...)
	cmd := exec.Command(self, all...)
	cmd.Env = append(os.Environ(), "GANTRY_TEST_MAIN=1", "GANTRY_TEST_MARK="+mark)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &serveProc{cmd: cmd, stderr: &bytes.Buffer{}}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		pw.Close()
	})
	urls := make(chan string, 1)
	ended := make(chan struct{})
	var mu sync.Mutex
	go func() {
		defer close(ended)
		re := regexp.MustCompile(`url=(http://\S+)`)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.HasPrefix(sc.Text(), "gantry: ") {
				return // it failed: its last words are in stderr
			}
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case s.url = <-urls:
	case <-ended:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("gantry serve ended:\n%s", s.stderr)
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("gantry serve did not listen within 60s:\n%s", s.stderr)
	}
	return s
}

// marked lists the live processes whose environment holds
// GANTRY_TEST_MARK=mark: the gateway and everything it started, however
// far down and whatever group or session they moved to.
func marked(mark string) []int {
	want := []byte("GANTRY_TEST_MARK=" + mark + "\x00")
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(env, want) && childproc.Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// A SIGKILLed gateway takes its instances with it, and what they started:
// here each instance's shell leaves a sleep in a session of its own, out
// of the instance's process group, before it execs the function.
func TestKilledServeLeavesNoInstanceProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gantry serve")
	}
	if os.Geteuid() != 0 {
		// Without a PID namespace per instance, a grandchild that left
		// the instance's process group outlives it (a restarted gateway
		// stops it from its records, TestKeepRecordsStopsLeftovers...).
		t.Skip("needs root: PID namespaces take what instances started down with them")
	}
	self, _ := os.Executable()
	mark := strconv.FormatInt(time.Now().UnixNano(), 36)
	stack := fmt.Sprintf(`functions:
  orphan:
    fprocess: "setsid sleep 600 & exec '%s' fn sentiment"
  plain:
    fprocess: "'%s' fn sentiment"
`, self, self)
	s := startServe(t, stack, mark)
	for _, fn := range []string{"orphan", "plain"} {
		resp, err := http.Post(s.url+"/function/"+fn, "text/plain", strings.NewReader("what a lovely day"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", fn, resp.StatusCode)
		}
	}
	// The gateway, two instances and the sleep.
	before := marked(mark)
	if len(before) < 4 {
		t.Fatalf("processes of the run before the kill: %v, want the gateway, 2 instances and a sleep", before)
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := marked(mark)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("processes still running 15s after the gateway was killed: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// slowStack is one function that takes sleep per request, concurrency 1,
// at most two instances.
func slowStack(t *testing.T, receipts, sleep string) string {
	self, _ := os.Executable()
	return fmt.Sprintf(`functions:
  slow:
    fprocess: '%s'
    concurrency: 1
    scale: {min: 0, max: 2}
    timeout: 60s
    environment: {GANTRY_TEST_INSTANCE: slow, GANTRY_TEST_SLEEP: %s, GANTRY_TEST_RECEIPTS: %s}
`, self, sleep, receipts)
}

// answer is what a client got: a status and headers, or an error.
type answer struct {
	id     string
	status int
	header http.Header
	err    error
}

// fire sends n requests to the function at once and returns their answers
// on a channel.
func fire(url string, n int) <-chan answer {
	out := make(chan answer, n)
	for i := range n {
		go func() {
			id := strconv.Itoa(i)
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
			req.Header.Set("X-Test-Id", id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- answer{id: id, err: err}
				return
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			out <- answer{id: id, status: resp.StatusCode, header: resp.Header, err: err}
		}()
	}
	return out
}

// waitFiles waits until dir holds at least n files.
func waitFiles(t *testing.T, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if entries, _ := os.ReadDir(dir); len(entries) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d requests reached an instance within 60s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func exitCode(t *testing.T, cmd *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		t.Fatalf("gantry serve still running %v after the signal", within)
		return -1
	}
}

// At the end of the drain every open request is answered: 504 saying it
// may have run for each that an instance received, 503 with Retry-After
// for each still queued; and the gateway exits 0.
func TestDrainAnswersEveryOpenRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gantry serve")
	}
	receipts := t.TempDir()
	s := startServe(t, slowStack(t, receipts, "60s"), "drain", "--drain-timeout", "1s")
	const n = 6
	answers := fire(s.url+"/function/slow", n)
	waitFiles(t, receipts, 1)
	// Give the autoscaler its chance at a second instance, then stop.
	time.Sleep(500 * time.Millisecond)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var got []answer
	for range n {
		select {
		case a := <-answers:
			got = append(got, a)
		case <-time.After(60 * time.Second):
			t.Fatalf("answers after 60s: %d of %d", len(got), n)
		}
	}
	if code := exitCode(t, s.cmd, 60*time.Second); code != 0 {
		t.Errorf("gantry serve exited %d after its drain, want 0", code)
	}
	entries, _ := os.ReadDir(receipts)
	delivered := map[string]bool{}
	for _, e := range entries {
		delivered[e.Name()] = true
	}
	// An instance's receipt proves delivery; a request written to an
	// instance that was stopped before it ran its handler has none, and
	// "may have run" is still the truthful answer for it.
	n503, n504 := 0, 0
	for _, a := range got {
		switch {
		case a.err != nil:
			t.Errorf("request %s: no HTTP answer: %v", a.id, a.err)
		case a.status == http.StatusGatewayTimeout && a.header.Get("X-Gantry-May-Have-Run") == "true":
			n504++
		case a.status == http.StatusServiceUnavailable && a.header.Get("Retry-After") != "" && !delivered[a.id]:
			n503++
		default:
			t.Errorf("request %s (received by an instance: %v): %d %v, want 504 with X-Gantry-May-Have-Run, or 503 with Retry-After if never received", a.id, delivered[a.id], a.status, a.header)
		}
	}
	if n503 == 0 || n504 < len(delivered) {
		t.Errorf("%d answered 503 and %d 504, %d received by an instance; the test needs both kinds", n503, n504, len(delivered))
	}
}

// A second signal ends a long drain at once, still answering.
func TestSecondSignalEndsTheDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gantry serve")
	}
	receipts := t.TempDir()
	s := startServe(t, slowStack(t, receipts, "120s"), "hurry", "--drain-timeout", "10m")
	answers := fire(s.url+"/function/slow", 2)
	waitFiles(t, receipts, 1)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Within a second on a quiet machine; the bound here is for a busy one
	// and still far below the 10-minute drain.
	if code := exitCode(t, s.cmd, 30*time.Second); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	for range 2 {
		if a := <-answers; a.err != nil {
			t.Errorf("request %s: no HTTP answer: %v", a.id, a.err)
		}
	}
}
