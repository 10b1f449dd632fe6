package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/childproc"
)

// serveChaos is the chaos test's instance: a POST whose body is "ok"
// answers after 20 ms, "slow" after 3 s, "hang" never (an hour); each
// POST with an X-Test-Id leaves a receipt in $GANTRY_TEST_RECEIPTS. The
// instance counts its own requests in flight and keeps the most it ever
// saw in $GANTRY_TEST_RECEIPTS/most-PID: what it ran at once, whatever
// the gateway believes.
func serveChaos() {
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
	if err != nil {
		os.Exit(1)
	}
	dir := os.Getenv("GANTRY_TEST_RECEIPTS")
	pid := hostPID()
	mostFile := filepath.Join(dir, fmt.Sprintf("most-%d", pid))
	var mu sync.Mutex
	inFlight, most := 0, 0
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			return // the health check
		}
		mu.Lock()
		inFlight++
		if inFlight > most {
			most = inFlight
			_ = os.WriteFile(mostFile, []byte(strconv.Itoa(most)), 0o644)
		}
		mu.Unlock()
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		if id := r.Header.Get("X-Test-Id"); id != "" {
			_ = os.WriteFile(filepath.Join(dir, "got-"+id), []byte(strconv.Itoa(pid)), 0o644)
		}
		body, _ := io.ReadAll(r.Body)
		switch string(body) {
		case "hang":
			time.Sleep(time.Hour)
		case "slow":
			time.Sleep(3 * time.Second)
		default:
			time.Sleep(20 * time.Millisecond)
		}
		_, _ = w.Write(body)
	}))
}

// hostPID is this process's PID as the host sees it: an instance may run
// in a PID namespace of its own, where it is 1, but /proc is the host's.
func hostPID() int {
	if self, err := os.Readlink("/proc/self"); err == nil {
		if pid, err := strconv.Atoi(self); err == nil {
			return pid
		}
	}
	return os.Getpid()
}

// tally is what the chaos test's clients sent and got, by function.
type tally struct {
	mu       sync.Mutex
	sent     map[string]int
	answered map[string]int
	status   map[int]int
	failures []string
}

func newTally() *tally {
	return &tally{sent: map[string]int{}, answered: map[string]int{}, status: map[int]int{}}
}

// post sends one request to the function and counts it, and its answer.
func (c *tally) post(client *http.Client, base, fn, body, id string) (int, http.Header) {
	req, _ := http.NewRequest(http.MethodPost, base+"/function/"+fn, strings.NewReader(body))
	if id != "" {
		req.Header.Set("X-Test-Id", id)
	}
	c.mu.Lock()
	c.sent[fn]++
	c.mu.Unlock()
	resp, err := client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failures = append(c.failures, fmt.Sprintf("%s %q: no HTTP answer: %v", fn, body, err))
		return 0, nil
	}
	c.answered[fn]++
	c.status[resp.StatusCode]++
	return resp.StatusCode, resp.Header
}

// chaosStack is "work" (the test binary as a chaos instance, concurrency
// 2, timeout 1 s, up to 3 instances) and "broken" (a command that does
// not exist: it crash-loops).
func chaosStack(t *testing.T, receipts string) string {
	self, _ := os.Executable()
	return fmt.Sprintf(`functions:
  work:
    fprocess: '%s'
    concurrency: 2
    scale: {min: 1, max: 3}
    timeout: 1s
    max_queue: 1000
    environment: {GANTRY_TEST_INSTANCE: chaos, GANTRY_TEST_RECEIPTS: %s}
  broken:
    fprocess: gantry-test-no-such-command
`, self, receipts)
}

// The chaos test: a mixed load against a real `gantry serve` while it
// injects, in turn, an instance SIGKILL, a hung instance, a crash-looping
// function, slow clients, and a SIGTERM with requests in flight. Every
// request the gateway accepted gets exactly one HTTP answer (counted by
// the clients and in the gateway's /metrics), no instance ever runs more
// requests than its concurrency (counted by the instance itself), and no
// process of any instance is left afterwards.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gantry serve")
	}
	receipts := t.TempDir()
	mark := "chaos" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s := startServe(t, chaosStack(t, receipts), mark, "--drain-timeout", "1s", "--tick", "50ms",
		"--read-header-timeout", "1s", "--body-idle-timeout", "1s", "--write-timeout-extra", "1s")
	c := newTally()
	client := &http.Client{Timeout: 60 * time.Second}
	defer client.CloseIdleConnections()

	// The mixed load: four clients on "work", one on "broken", until the
	// drain.
	stop := make(chan struct{})
	var load sync.WaitGroup
	for i := range 5 {
		load.Go(func() {
			fn := "work"
			if i == 4 {
				fn = "broken"
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.post(client, s.url, fn, "ok", "")
				if fn == "broken" {
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	served := func() int { c.mu.Lock(); defer c.mu.Unlock(); return c.status[http.StatusOK] }
	waitFor(t, "requests served", func() bool { return served() >= 20 })

	// 1. An instance of "work" is SIGKILLed while it serves: one that has
	// counted requests, so that the killed, the hung and the instance
	// serving after both are three instances that counted theirs.
	victim := 0
	waitFor(t, "an instance of work that served", func() bool {
		for _, pid := range instancesOf(mark) {
			if _, err := os.Stat(filepath.Join(receipts, fmt.Sprintf("most-%d", pid))); err == nil {
				victim = pid
				return true
			}
		}
		return false
	})
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	before := served()
	waitFor(t, "requests served after the kill", func() bool { return served() >= before+20 })

	// 2. An instance hangs on a request: 504 at the timeout, and the
	// instance is replaced (the grace past the timeout is 2 s).
	code, _ := c.post(client, s.url, "work", "hang", "hang")
	if code != http.StatusGatewayTimeout {
		t.Errorf("the hung request: %d, want 504", code)
	}
	hung := receiptPID(t, receipts, "hang")
	waitFor(t, "the hung instance stopped", func() bool { return !childproc.Alive(hung) })
	before = served()
	waitFor(t, "requests served after the hang", func() bool { return served() >= before+20 })

	// 3. The crash loop has been answered all along: 503 with its reason.
	code, _ = c.post(client, s.url, "broken", "ok", "")
	if code != http.StatusServiceUnavailable {
		t.Errorf("the crash-looping function: %d, want 503", code)
	}

	// 4. Slow clients: headers that never end, a body that stalls, and a
	// reader that never reads; each is cut by its bound.
	slow := slowClients(t, s.url, c)
	before = served()
	waitFor(t, "requests served beside slow clients", func() bool { return served() >= before+20 })
	for kind, first := range slow() {
		if kind == "stalled body" && !strings.Contains(first, " 408 ") {
			c.mu.Lock()
			c.failures = append(c.failures, fmt.Sprintf("stalled body answered %q, want 408", first))
			c.mu.Unlock()
		}
	}
	close(stop)
	load.Wait()

	// Every request answered so far is counted once by the gateway too:
	// those it began to serve are those answered by a function or by
	// itself.
	checkMetrics(t, s.url, c)

	// 5. SIGTERM with requests in flight: delivered ones are answered 504
	// (they may have run), queued ones 503, at the drain's 1 s deadline.
	drain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var last sync.WaitGroup
	const inFlight = 8
	accepted := c.sentCount("work") + inFlight
	codes := make(chan int, inFlight)
	for i := range inFlight {
		last.Go(func() {
			code, _ := c.post(drain, s.url, "work", "slow", "drain-"+strconv.Itoa(i))
			codes <- code
		})
	}
	// All accepted (begun by the gateway) and one delivered, then the
	// signal.
	waitFor(t, "the last requests accepted", func() bool {
		m, err := scrape(s.url)
		return err == nil && m.sum("gateway_function_invocation_started", "work") >= float64(accepted)
	})
	waitFor(t, "a request delivered", func() bool {
		got, _ := filepath.Glob(filepath.Join(receipts, "got-drain-*"))
		return len(got) > 0
	})
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	last.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK && code != http.StatusServiceUnavailable && code != http.StatusGatewayTimeout {
			t.Errorf("a request open at the SIGTERM: %d, want 200, 503 or 504", code)
		}
	}
	if code := exitCode(t, s.cmd, 60*time.Second); code != 0 {
		t.Errorf("gantry serve exited %d after its drain, want 0", code)
	}

	// Every request got exactly one answer, on the client's side.
	c.mu.Lock()
	for _, f := range c.failures {
		t.Error(f)
	}
	for fn, n := range c.sent {
		if c.answered[fn] != n {
			t.Errorf("%s: %d requests sent, %d answered", fn, n, c.answered[fn])
		}
	}
	t.Logf("answers by status: %v", c.status)
	c.mu.Unlock()

	// No instance ran more than its concurrency, by its own count.
	mosts, _ := filepath.Glob(filepath.Join(receipts, "most-*"))
	if len(mosts) < 3 {
		t.Errorf("%d instances counted their requests; the killed, the hung and their replacements make at least 3", len(mosts))
	}
	busiest := 0
	for _, f := range mosts {
		b, _ := os.ReadFile(f)
		n, _ := strconv.Atoi(string(b))
		busiest = max(busiest, n)
		if n > 2 {
			t.Errorf("instance %s ran %d requests at once; its concurrency is 2", filepath.Base(f), n)
		}
	}
	if busiest < 2 {
		t.Errorf("no instance ever ran 2 requests at once: the load never reached the bound it checks")
	}

	// Nothing is left running.
	waitFor(t, "no process of the run left", func() bool { return len(marked(mark)) == 0 })
}

// instancesOf lists the running instances of the chaos test's "work".
func instancesOf(mark string) []int {
	var out []int
	for _, pid := range marked(mark) {
		env, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if strings.Contains(string(env), "\x00GANTRY_TEST_INSTANCE=chaos\x00") {
			out = append(out, pid)
		}
	}
	return out
}

// receiptPID is the instance that received the request with X-Test-Id
// id: its receipt holds its PID.
func receiptPID(t *testing.T, receipts, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(receipts, "got-"+id))
	pid, perr := strconv.Atoi(string(b))
	if err != nil || perr != nil {
		t.Fatalf("receipt of %s: %v %v", id, err, perr)
	}
	return pid
}

func (c *tally) sentCount(fn string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[fn]
}

// waitFor polls cond for up to a minute: long on a loaded machine, and
// it ends as soon as cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slowClients opens, to "work", a connection whose headers never end, one
// whose body stalls (accepted: answered 408) and one that never reads its
// answer (accepted: answered, the answer waits in the socket). The
// function returned waits for each connection's end and returns, by kind,
// the first line the client got; the accepted ones are counted in c.
func slowClients(t *testing.T, base string, c *tally) func() map[string]string {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	reqs := map[string]string{
		"slow headers": "POST /function/work HTTP/1.1\r\nHost: x\r\n",
		"stalled body": "POST /function/work HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123",
		"never reads":  "POST /function/work HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok",
	}
	conns := map[string]net.Conn{}
	for kind, req := range reqs {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if kind != "slow headers" {
			c.mu.Lock()
			c.sent["work"]++
			c.mu.Unlock()
		}
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		conns[kind] = conn
	}
	return func() map[string]string {
		out := map[string]string{}
		for kind, conn := range conns {
			// Cut within their 1 s bounds; the wait is for a loaded machine.
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			first, _ := bufio.NewReader(conn).ReadString('\n')
			out[kind] = first
			if kind == "slow headers" {
				continue
			}
			c.mu.Lock()
			if code, ok := statusOf(first); ok {
				c.answered["work"]++
				c.status[code]++
			} else {
				c.failures = append(c.failures, fmt.Sprintf("%s: no HTTP answer (%q)", kind, first))
			}
			c.mu.Unlock()
		}
		return out
	}
}

var statusLine = regexp.MustCompile(`^HTTP/1\.1 (\d{3}) `)

func statusOf(line string) (int, bool) {
	m := statusLine.FindStringSubmatch(line)
	if m == nil {
		return 0, false
	}
	code, _ := strconv.Atoi(m[1])
	return code, true
}

// series is a scrape of /metrics: each sample's value by its line's name
// and labels as written.
type series map[string]float64

var sample = regexp.MustCompile(`^(\w+)\{([^}]*)\} (\S+)$`)

func scrape(base string) (series, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := series{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if m := sample.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[3], 64)
			out[m[1]+"{"+m[2]+"}"] = v
		}
	}
	return out, sc.Err()
}

// sum adds up the samples of metric name for function fn (of the default
// namespace), whatever their other labels.
func (s series) sum(name, fn string) float64 {
	label := `function_name="` + fn + `.openfaas-fn"`
	total := 0.0
	for k, v := range s {
		if strings.HasPrefix(k, name+"{") && strings.Contains(k, label) {
			total += v
		}
	}
	return total
}

// checkMetrics waits until, for each function, the requests the gateway
// began to serve are as many as it answered (by a function:
// gateway_function_invocation_total; by itself:
// gantry_request_failures_total) and as the clients sent.
func checkMetrics(t *testing.T, base string, c *tally) {
	t.Helper()
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := scrape(base)
		ok := err == nil
		last = fmt.Sprint(err)
		for _, fn := range []string{"work", "broken"} {
			started := m.sum("gateway_function_invocation_started", fn)
			answered := m.sum("gateway_function_invocation_total", fn) + m.sum("gantry_request_failures_total", fn)
			sent := float64(c.sentCount(fn))
			if started != answered || started != sent {
				ok = false
				last = fmt.Sprintf("%s: the gateway began %v and answered %v; the clients sent %v", fn, started, answered, sent)
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics: %s", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
