package liverun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gantry.dev/gantry/pkg/childproc"
)

// gatewayProc is one `gantry serve` child: a gateway process of its own,
// with its own instances and its own temporary state folder, so that the
// policies compared side by side share nothing but the machine.
type gatewayProc struct {
	policy string
	url    string
	cmd    *exec.Cmd
	state  string
	client *http.Client
	// exited closes when the process has been waited for; err is its end.
	exited chan struct{}
	err    error
	// tail keeps the last lines of its log, for an error message.
	tail *lineTail
}

// gatewaySpec is what a child gateway is started with.
type gatewaySpec struct {
	exe        string
	policy     string
	stackFile  string
	capacity   int
	startDelay time.Duration
	// idleTimeout is --idle-timeout (0: serve's default).
	idleTimeout time.Duration
	// log receives the gateway's own log lines (default discarded).
	log io.Writer
}

// listenMarker is the log line `gantry serve` writes once it listens; its
// url= field is the address a gateway on port 0 got.
const listenMarker = `msg="gateway listening"`

// gatewayStartTimeout bounds a child's start: the stack's deployment is
// quick, but the machine may be busy.
const gatewayStartTimeout = 60 * time.Second

// startGateway starts `exe serve` on a free loopback port with a fresh
// state folder and waits until it listens.
func startGateway(ctx context.Context, spec gatewaySpec) (*gatewayProc, error) {
	state, err := os.MkdirTemp("", "gantry-up-"+spec.policy+"-")
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--state-dir", state, "--stack", spec.stackFile,
		"--policy", spec.policy, "--capacity", strconv.Itoa(spec.capacity),
		"--start-delay", spec.startDelay.String(), "--drain-timeout", "1s"}
	if spec.idleTimeout > 0 {
		args = append(args, "--idle-timeout", spec.idleTimeout.String())
	}
	cmd := exec.Command(spec.exe, args...)
	cmd.SysProcAttr = childproc.Attr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(state)
		return nil, err
	}
	g := &gatewayProc{policy: spec.policy, cmd: cmd, state: state, exited: make(chan struct{}),
		tail: &lineTail{max: 20}, client: &http.Client{Timeout: 5 * time.Second}}
	if err := childproc.Start(cmd); err != nil {
		os.RemoveAll(state)
		return nil, fmt.Errorf("start gateway for %s: %w", spec.policy, err)
	}
	found := make(chan string, 1)
	go g.readLog(stderr, spec.log, found)
	go func() {
		g.err = cmd.Wait()
		close(g.exited)
	}()
	timer := time.NewTimer(gatewayStartTimeout)
	defer timer.Stop()
	select {
	case g.url = <-found:
		return g, nil
	case <-g.exited:
		g.stop(false)
		return nil, fmt.Errorf("gateway for %s exited before listening (%v): %s", spec.policy, g.err, g.tail.String())
	case <-timer.C:
		g.stop(false)
		return nil, fmt.Errorf("gateway for %s did not listen within %v: %s", spec.policy, gatewayStartTimeout, g.tail.String())
	case <-ctx.Done():
		g.stop(true)
		return nil, ctx.Err()
	}
}

// readLog copies the child's log, keeps its tail and picks the listening
// address out of it.
func (g *gatewayProc) readLog(r io.Reader, log io.Writer, found chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		g.tail.add(line)
		if log != nil {
			fmt.Fprintf(log, "[%s] %s\n", g.policy, line)
		}
		if !sent && strings.Contains(line, listenMarker) {
			if u := logField(line, "url"); u != "" {
				found <- u
				sent = true
			}
		}
	}
	// Keep draining nothing more: the pipe closed with the process.
	_, _ = io.Copy(io.Discard, r)
}

// logField returns key's value in a slog text line (key=value, value
// possibly quoted).
func logField(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if s, err := strconv.QuotedPrefix(v); err == nil {
			u, _ := strconv.Unquote(s)
			return u
		}
		return ""
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// gatewayStopTimeout bounds a child's drain: it drains for 2 s, then stops
// its instances.
const gatewayStopTimeout = 15 * time.Second

// hurriedStopTimeout bounds a hurried stop (stop).
const hurriedStopTimeout = 500 * time.Millisecond

// hurryEvery is how often a hurried stop repeats SIGTERM: the gateway
// takes a second signal only once it has begun draining on the first, so
// one repeat sent too early would be lost.
const hurryEvery = 25 * time.Millisecond

// stop sends SIGTERM (the gateway drains and stops its instances), kills
// the process group past gatewayStopTimeout, and removes the state folder.
// A hurried stop (the user interrupted the run) repeats the signal, which
// makes the gateway answer what is open and stop at once, so that the run
// ends within a second.
func (g *gatewayProc) stop(hurry bool) {
	if hurry {
		g.stopHurried(0)
		return
	}
	g.halt(nil, gatewayStopTimeout)
}

// stopHurried stops the gateway in a hurry, but first lets it drain for
// grace: on its first SIGTERM it stops accepting and lets what is open
// finish; only the repeats, from grace on, make it answer what is still
// open (503 or 504) and stop. An interrupted run gives its load's drain
// that long, so that the requests finishing then are answered as they
// would have been, not by the hurry.
func (g *gatewayProc) stopHurried(grace time.Duration) {
	again := make(chan time.Time)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		select {
		case <-time.After(grace):
		case <-quit:
			return
		}
		t := time.NewTicker(hurryEvery)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				select {
				case again <- now:
				case <-quit:
					return
				}
			case <-quit:
				return
			}
		}
	}()
	// An interrupted run must end within a second: past this the gateway
	// is killed, and its instances with it (each has the parent-death
	// signal), however slow a loaded machine makes its own stop of them.
	g.halt(again, grace+hurriedStopTimeout)
}

// halt sends SIGTERM, repeats it on every tick of again, kills the process
// group past limit, and removes the state folder.
func (g *gatewayProc) halt(again <-chan time.Time, limit time.Duration) {
	if g.cmd.Process != nil {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		deadline := time.NewTimer(limit)
		defer deadline.Stop()
	wait:
		for {
			select {
			case <-g.exited:
				break wait
			case <-again:
				_ = g.cmd.Process.Signal(syscall.SIGTERM)
			case <-deadline.C:
				_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
				<-g.exited
				break wait
			}
		}
	}
	_ = os.RemoveAll(g.state)
}

// instanceCounts is what a gateway's /metrics says of its instances.
type instanceCounts struct {
	// live counts instances ready or starting, all functions together.
	live int
	// started counts instances asked for since the gateway started.
	started int64
}

// counts reads the gateway's instance series from /metrics.
func (g *gatewayProc) counts(ctx context.Context) (instanceCounts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/metrics", nil)
	if err != nil {
		return instanceCounts{}, err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return instanceCounts{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return instanceCounts{}, fmt.Errorf("%s/metrics: %s", g.url, resp.Status)
	}
	return parseCounts(resp.Body)
}

// parseCounts sums gantry_function_replicas (ready and starting) and
// gantry_function_instances_started_total over functions, from Prometheus's
// text format.
func parseCounts(r io.Reader) (instanceCounts, error) {
	var c instanceCounts
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var live bool
		switch {
		case strings.HasPrefix(line, "gantry_function_replicas{"):
			live = true
		case strings.HasPrefix(line, "gantry_function_instances_started_total{"):
		default:
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return c, fmt.Errorf("metrics line %q: %w", line, err)
		}
		if live {
			c.live += int(v)
		} else {
			c.started += int64(v)
		}
	}
	return c, sc.Err()
}

// waitHealthy waits until every one of the stack's functions is deployed.
func (g *gatewayProc) waitHealthy(ctx context.Context, functions int) error {
	for {
		n, err := g.deployed(ctx)
		if err == nil && n >= functions {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-g.exited:
			return fmt.Errorf("gateway for %s exited (%v): %s", g.policy, g.err, g.tail.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// maxFunctionsBody bounds a gateway's /system/functions as read here.
const maxFunctionsBody = 4 << 20

// functions reads what the gateway says of its functions, sorted by name.
func (g *gatewayProc) functions(ctx context.Context) ([]FunctionProgress, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/system/functions", nil)
	if err != nil {
		return nil, err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/system/functions: %s", g.url, resp.Status)
	}
	var fns []FunctionProgress
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxFunctionsBody)).Decode(&fns); err != nil {
		return nil, fmt.Errorf("%s/system/functions: %w", g.url, err)
	}
	slices.SortFunc(fns, func(a, b FunctionProgress) int { return strings.Compare(a.Name, b.Name) })
	return fns, nil
}

func (g *gatewayProc) deployed(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/system/functions", nil)
	if err != nil {
		return 0, err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, errors.New(resp.Status)
	}
	return strings.Count(string(body), `"name":`), nil
}

// lineTail keeps the last max lines written to it.
type lineTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *lineTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
