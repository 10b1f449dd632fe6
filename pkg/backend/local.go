package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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
	"gantry.dev/gantry/pkg/ctxtime"
	"gantry.dev/gantry/pkg/listenfd"
	"gantry.dev/gantry/pkg/stack"
)

// ErrNotDeployed is returned for a function the backend does not know.
var ErrNotDeployed = errors.New("function not deployed")

// HealthPath is where an instance reports readiness. Any HTTP answer below
// 500 counts, so a user's process that only serves POST / is ready as soon
// as it listens, as under OpenFaaS's of-watchdog.
const HealthPath = "/_/health"

// LocalConfig configures the local process runtime.
type LocalConfig struct {
	// StartDelay is added before each process is spawned, to emulate a
	// container's start-up (the Cypress paper's 1.5 s cold start).
	StartDelay time.Duration
	// ReadyTimeout bounds spawn to ready (default 30 s).
	ReadyTimeout time.Duration
	// StopGrace is how long a stopped instance may drain before SIGKILL
	// (default 10 s).
	StopGrace time.Duration
	// Log receives the instances' stdout and stderr, each line prefixed
	// with the instance's ID (default: discarded).
	Log io.Writer
	// Self is the path that a command's leading word "gantry" becomes
	// (default: this executable).
	Self string
	// FnRuntime is the slim example-functions runtime (FnRuntimeName)
	// that a command "gantry fn ..." runs instead of Self, for a start
	// without the Kubernetes libraries' initialisation. Empty: the one
	// beside Self, if any (FindFnRuntime); NoFnRuntime: none, Self runs.
	FnRuntime string
	Logger    *slog.Logger
}

// Local runs each instance as a local process listening on its own
// loopback port.
type Local struct {
	cfg LocalConfig
	ev  Events
	ctx context.Context // cancelled by Close: aborts pending starts
	end context.CancelFunc

	mu    sync.Mutex // guards fns, procs, seq, recDir
	fns   map[string]stack.Function
	procs map[string]*proc
	seq   int64
	// recDir is where instance records go ("": none are kept).
	recDir string
	wg     sync.WaitGroup
	hook   InstanceHook               // hooks.go
	check  func(stack.Function) error // hooks.go
	// pickPort finds a free port for an instance (freePort; a test
	// hands out a taken one).
	pickPort func() (int, error)
}

type proc struct {
	inst    Instance
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
	// isolated: the instance is the init of its own PID namespace.
	isolated bool
	// stderr keeps the last lines the instance wrote there (its exit
	// reason quotes them).
	stderr tail
}

// NewLocal returns a local runtime.
func NewLocal(cfg LocalConfig) *Local {
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Self == "" {
		cfg.Self, _ = os.Executable()
	}
	switch cfg.FnRuntime {
	case NoFnRuntime:
		cfg.FnRuntime = ""
	case "":
		path, err := FindFnRuntime(cfg.Self)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			cfg.Logger.Warn("example functions run from the gantry binary, not the slim runtime", "err", err)
		}
		cfg.FnRuntime = path
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Local{cfg: cfg, ctx: ctx, end: cancel, fns: map[string]stack.Function{}, procs: map[string]*proc{}, pickPort: freePort}
}

func (l *Local) Attach(ev Events) { l.ev = ev }

func (l *Local) Deploy(_ context.Context, f stack.Function) error {
	if f.Command == "" {
		return fmt.Errorf("%w: function %q has no fprocess; the local runtime runs commands, not images", stack.ErrInvalid, f.Name)
	}
	if err := l.refusal(f); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fns[f.Ref()] = f
	return nil
}

func (l *Local) Undeploy(_ context.Context, name string) error {
	l.mu.Lock()
	_, ok := l.fns[name]
	delete(l.fns, name)
	var victims []Instance
	for _, p := range l.procs {
		if p.inst.Function == name {
			victims = append(victims, p.inst)
		}
	}
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotDeployed, name)
	}
	for _, inst := range victims {
		l.Stop(inst)
	}
	return nil
}

func (l *Local) Start(function string, n int) {
	for range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.spawn(function)
		}()
	}
}

func (l *Local) spawn(function string) {
	begin := time.Now()
	l.mu.Lock()
	f, ok := l.fns[function]
	l.seq++
	id := fmt.Sprintf("%s-%d", function, l.seq)
	l.mu.Unlock()
	if !ok {
		l.ev.Failed(function, fmt.Errorf("%w: %q", ErrNotDeployed, function))
		return
	}
	if err := ctxtime.Sleep(l.ctx, l.cfg.StartDelay); err != nil {
		l.ev.Failed(function, err)
		return
	}
	p, err := l.launchReady(id, f)
	if err != nil {
		l.ev.Failed(function, err)
		return
	}
	if f.SocketActivation {
		// Requests queue on the socket already (socket.go).
		p.inst.ColdStart = time.Since(begin)
		l.ev.Ready(p.inst)
		if err := l.confirm(p); err != nil {
			l.kill(p)
			l.exited(p, err)
			return
		}
		l.exited(p, nil)
		return
	}
	p.inst.ColdStart = time.Since(begin)
	l.ev.Ready(p.inst)
	l.exited(p, nil)
}

// portTries bounds the launches of one start whose port another process
// takes each time.
const portTries = 3

// launchReady launches the instance and, unless it is socket-activated,
// waits until it is ready; a start whose port another process took is
// launched again on a new one.
func (l *Local) launchReady(id string, f stack.Function) (*proc, error) {
	for try := 1; ; try++ {
		p, err := l.launch(id, f)
		if err != nil || f.SocketActivation {
			return p, err
		}
		err = l.awaitReady(p)
		if err == nil {
			return p, nil
		}
		l.kill(p)
		<-p.exited
		l.forget(p)
		if errors.Is(err, errPortTaken) && try < portTries {
			l.cfg.Logger.Info("instance's port taken by another process; launching it on another", "instance", id, "addr", p.inst.Addr)
			continue
		}
		if exit := (*ExitError)(nil); !errors.As(err, &exit) {
			err = fmt.Errorf("instance %s: %w", id, err)
		}
		return nil, err
	}
}

// exited waits for a ready instance's process to end and reports it: no
// error if it was stopped, else reason, or its exit status when reason is
// nil.
func (l *Local) exited(p *proc, reason error) {
	<-p.exited
	l.mu.Lock()
	stopped := p.stopped
	l.mu.Unlock()
	l.forget(p)
	var err error
	switch {
	case stopped:
	case reason != nil:
		err = reason
	default:
		err = exitError(p.inst.ID, "after ready", p.cmd.ProcessState, p.stderr.Lines())
	}
	l.ev.Exited(p.inst, err)
}

// launch starts the process on a free loopback port.
func (l *Local) launch(id string, f stack.Function) (*proc, error) {
	var sock *passedSocket
	port, err := 0, error(nil)
	if f.SocketActivation {
		if sock, err = openSocket(); err != nil {
			return nil, err
		}
		defer sock.close()
		port = sock.port
	} else if port, err = l.pickPort(); err != nil {
		return nil, err
	}
	prep, err := l.prepare(id, f)
	if err != nil {
		return nil, fmt.Errorf("instance %s: %w", id, err)
	}
	cmd := l.commandFor(f.Command)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "GANTRY_FUNCTION_NAME="+f.Name)
	for k, v := range f.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, prep.Env...)
	// Its own process group, so stopping an instance also stops whatever
	// it started; a parent-death signal, so it dies with the gateway
	// however the gateway dies; and its own PID namespace where allowed,
	// so that everything it started dies with it (childproc).
	cmd.SysProcAttr = childproc.Attr()
	p := &proc{inst: Instance{ID: id, Function: f.Ref(), Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))},
		cmd: cmd, exited: make(chan struct{})}
	// One writer per stream: stdout and stderr are two pipes copied
	// concurrently, and a line cutter shared by both would join a partial
	// line of one to a line of the other.
	stderr := prep.Stderr
	if stderr == nil {
		stderr = prep.Output
	}
	cmd.Stdout = streamWriter(&prefixWriter{w: l.cfg.Log, prefix: id + ": "}, prep.Output)
	cmd.Stderr = streamWriter(&prefixWriter{w: l.cfg.Log, prefix: id + ": "}, stderr, &p.stderr)
	// A child that outlives the instance would hold the output pipe open
	// and Wait with it; past this delay Wait returns anyway.
	cmd.WaitDelay = time.Second
	var isolated bool
	if sock != nil {
		// PORT names the passed socket's port too: a program that
		// ignores the descriptor fails to bind it, and says so.
		cmd.ExtraFiles = []*os.File{sock.file}
		cmd.Env = append(cmd.Env, listenfd.Env()...)
		isolated, err = childproc.StartIsolatedWithPID(cmd, listenfd.EnvPID)
	} else {
		isolated, err = childproc.StartIsolated(cmd)
	}
	if err != nil {
		prep.done()
		return nil, fmt.Errorf("start %q: %w", f.Command, err)
	}
	p.isolated = isolated
	if prep.Started != nil {
		prep.Started(cmd.Process.Pid)
	}
	rec := l.record(p)
	l.mu.Lock()
	l.procs[id] = p
	l.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		// Whatever the instance started goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		l.unrecord(rec)
		prep.done()
		close(p.exited)
	}()
	return p, nil
}

// commandFor is how an instance's command line runs. A line of plain words
// is exec'd as it is; one that needs a shell runs under /bin/sh -c, with
// "exec" in front when it is one simple command, so that the shell becomes
// the command instead of forking it (dash forks otherwise), and signals and
// the parent-death signal reach the command itself.
func (l *Local) commandFor(line string) *exec.Cmd {
	if argv, ok := plainWords(line); ok && len(argv) > 0 {
		if args, ok := fnArgs(argv); ok && l.cfg.FnRuntime != "" {
			cmd := exec.Command(l.cfg.FnRuntime, args...)
			cmd.Args[0] = FnRuntimeName
			return cmd
		}
		if argv[0] == "gantry" {
			argv[0] = l.cfg.Self
		}
		path, err := exec.LookPath(argv[0])
		if err == nil {
			cmd := exec.Command(path, argv[1:]...)
			cmd.Args[0] = argv[0]
			return cmd
		}
		// Not a program (a shell builtin, or missing): the shell runs
		// it, or says what is wrong.
		return exec.Command("/bin/sh", "-c", l.command(line))
	}
	line = l.command(line)
	if simpleCommand(line) {
		line = "exec " + line
	}
	return exec.Command("/bin/sh", "-c", line)
}

// plainWords splits a line that needs no shell: words of ordinary
// characters, or quoted with single quotes. Anything a shell would expand
// or interpret makes ok false.
func plainWords(line string) (words []string, ok bool) {
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case plainByte(c):
			cur.WriteByte(c)
			inWord = true
		default:
			return nil, false
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	// A leading NAME=value is an assignment to the shell.
	if len(words) > 0 && strings.Contains(words[0], "=") {
		return nil, false
	}
	return words, true
}

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_./:,@%+=", c) >= 0
}

// simpleCommand reports whether a shell line is one command that "exec"
// may prefix: no operators, groups, substitutions or leading assignment.
func simpleCommand(line string) bool {
	if strings.ContainsAny(line, ";&|()`{}\n<>") || strings.Contains(line, "$(") {
		return false
	}
	first, _, _ := strings.Cut(strings.TrimSpace(line), " ")
	switch first {
	case "", "if", "while", "until", "for", "case", "!", "exec":
		return false
	}
	return !strings.Contains(first, "=")
}

// command replaces a leading "gantry" with this binary, so stack files can
// name the example functions without knowing where Gantry is installed;
// "gantry fn" becomes the slim runtime where there is one.
func (l *Local) command(c string) string {
	if rest, ok := fnLine(c); ok && l.cfg.FnRuntime != "" {
		return shellQuote(l.cfg.FnRuntime) + rest
	}
	if c == "gantry" || strings.HasPrefix(c, "gantry ") {
		return shellQuote(l.cfg.Self) + strings.TrimPrefix(c, "gantry")
	}
	return c
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (l *Local) awaitReady(p *proc) error {
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.ReadyTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	url := "http://" + p.inst.Addr + HealthPath
	// A probe of a port nothing listens on yet is a refused loopback
	// connect, a few microseconds: the gaps start at half a millisecond
	// and grow by a quarter, so a program that listens within tens of
	// milliseconds is found a millisecond or two late, not up to ten
	// (doubling from 1 ms was), and a slow one costs a probe every 20 ms.
	// seen is what the last check saw, so a start that times out says
	// what failed: nothing listening, or the status the health path gave.
	seen := ""
	var broken, wrongPort streak
	lookedAt := time.Now().Add(listenLookAfter - listenLookGap)
	port := p.inst.Addr[strings.LastIndexByte(p.inst.Addr, ':')+1:]
	for delay := probeFirstGap; ; delay = min(delay*5/4, probeMaxGap) {
		status, saw := probeStatus(ctx, client, url)
		if status > 0 && status < 500 {
			if portTaken(p) {
				return fmt.Errorf("%w (%s answered, not the instance)", errPortTaken, p.inst.Addr)
			}
			return nil
		}
		if ctx.Err() == nil || seen == "" {
			seen = saw // a check the deadline cut short says less
		}
		now := time.Now()
		if held := broken.see(status >= 500 && !notYet(status), now); held >= brokenHealthAfter {
			return p.certainFailure(fmt.Errorf("GET %s answered %s on every check for %v: it is broken, not starting (503 means not ready yet, an answer below 500 ready)",
				HealthPath, saw, held.Round(time.Millisecond)))
		}
		if status == 0 && now.Sub(lookedAt) >= listenLookGap {
			lookedAt = now
			ports, _ := listeningPorts(p.cmd.Process.Pid)
			if held := wrongPort.see(len(ports) > 0 && !slices.Contains(ports, p.port()), now); held >= wrongPortAfter {
				return p.certainFailure(fmt.Errorf("it listens on port %s, not on $PORT (%s), for %v: the gateway sends requests to $PORT",
					portList(ports), port, held.Round(time.Millisecond)))
			}
		}
		select {
		case <-p.exited:
			if portTaken(p) {
				return fmt.Errorf("%w (%s): it could not bind it", errPortTaken, p.inst.Addr)
			}
			return exitError(p.inst.ID, "before ready", p.cmd.ProcessState, p.stderr.Lines())
		case <-ctx.Done():
			if l.ctx.Err() != nil {
				// Close, not the deadline: the start is abandoned.
				return fmt.Errorf("start abandoned: the runtime is closing: %w", l.ctx.Err())
			}
			err := fmt.Errorf("instance %s not ready within %v: GET %s last saw %s: %w", p.inst.ID, l.cfg.ReadyTimeout, HealthPath, seen, ctx.Err())
			if lines := p.stderr.Lines(); len(lines) > 0 {
				err = fmt.Errorf("%w; last stderr: %s", err, strings.Join(lines, " | "))
			}
			return err
		case <-time.After(delay):
		}
	}
}

// certainFailure is err with the instance's last stderr lines.
func (p *proc) certainFailure(err error) error {
	if lines := p.stderr.Lines(); len(lines) > 0 {
		err = fmt.Errorf("%w; last stderr: %s", err, strings.Join(lines, " | "))
	}
	return err
}

// port is the port the instance was given in $PORT.
func (p *proc) port() int {
	_, s, _ := net.SplitHostPort(p.inst.Addr)
	n, _ := strconv.Atoi(s)
	return n
}

// Gaps between readiness probes (awaitReady).
const (
	probeFirstGap = 500 * time.Microsecond
	probeMaxGap   = 20 * time.Millisecond
)

func probe(ctx context.Context, client *http.Client, url string) bool {
	ok, _ := probeSaw(ctx, client, url)
	return ok
}

// probeSaw is probe that also says what it saw: the status answered, or
// why no answer came (connection refused: nothing listens; a timeout:
// something listens but does not answer).
func probeSaw(ctx context.Context, client *http.Client, url string) (bool, string) {
	status, saw := probeStatus(ctx, client, url)
	return status > 0 && status < 500, saw
}

// probeStatus is the status the health path answered (0: no answer) and
// what the check saw.
func probeStatus(ctx context.Context, client *http.Client, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return 0, "connection refused (nothing listening)"
		}
		return 0, "no answer: " + err.Error()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode, "status " + resp.Status
}

func (l *Local) Stop(inst Instance) {
	l.mu.Lock()
	p, ok := l.procs[inst.ID]
	if ok {
		p.stopped = true
	}
	l.mu.Unlock()
	if !ok {
		return
	}
	l.terminate(p)
	go func() {
		select {
		case <-p.exited:
		case <-time.After(l.cfg.StopGrace):
			l.kill(p)
		}
	}()
}

// terminate asks an instance and everything it started to stop. A
// namespace's init gets SIGTERM only if it handles it; one that does not
// would have died of it outside the namespace, so it gets SIGKILL now.
func (l *Local) terminate(p *proc) {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	if p.isolated && !childproc.Catches(p.cmd.Process.Pid, syscall.SIGTERM) {
		l.kill(p)
	}
}

func (l *Local) kill(p *proc) { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

func (l *Local) forget(p *proc) {
	l.mu.Lock()
	delete(l.procs, p.inst.ID)
	l.mu.Unlock()
}

// Close stops every instance and waits for them; past ctx it kills the
// rest.
func (l *Local) Close(ctx context.Context) error {
	l.end()
	l.mu.Lock()
	var all []*proc
	for _, p := range l.procs {
		p.stopped = true
		all = append(all, p)
	}
	l.mu.Unlock()
	for _, p := range all {
		l.terminate(p)
	}
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, p := range all {
			l.kill(p)
		}
		<-done
		return ctx.Err()
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// streamWriter writes one output stream to every writer of ws that is not
// nil.
func streamWriter(ws ...io.Writer) io.Writer {
	var out []io.Writer
	for _, w := range ws {
		if w != nil {
			out = append(out, w)
		}
	}
	return io.MultiWriter(out...)
}

// prefixWriter prefixes every line with an instance's ID.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	mid    bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []byte
	for _, c := range b {
		if !p.mid {
			out = append(out, p.prefix...)
			p.mid = true
		}
		out = append(out, c)
		if c == '\n' {
			p.mid = false
		}
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Running counts function's instances whose process has not been reaped
// yet, ready or not: zero means no process of the function exists (the
// cold-start benchmark waits for it).
func (l *Local) Running(function string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.procs {
		if p.inst.Function == function {
			n++
		}
	}
	return n
}
