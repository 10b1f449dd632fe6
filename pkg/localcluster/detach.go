package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gantry.dev/gantry/pkg/knativeinstall"
	"gantry.dev/gantry/pkg/processnode"
)

// The files of a detached cluster, besides Start's, in its folder.
const (
	pidFile     = "cluster.pid" // the pid of the Serve process; marks the folder as a cluster's
	serveLog    = "cluster.log" // the Serve process's own output
	readyPrefix = "KUBECONFIG="
	readyFdEnv  = "GANTRY_CLUSTER_READY_FD"
)

// downTimeout is how long Down waits for a detached cluster to stop before
// killing it.
const downTimeout = 30 * time.Second

// DefaultDir is the folder `gantry cluster` uses without --dir:
// $GANTRY_CACHE/cluster.
func DefaultDir() string { return filepath.Join(gantryCache(), "cluster") }

// Up starts a detached cluster in opts.Dir and returns its kubeconfig path
// once it is ready. argv is the command that runs Serve with opts, such as
// `gantry cluster serve --dir DIR ...`; it runs in its own session, so it
// outlives the caller, with its output in DIR/cluster.log. Up checks opts
// itself, so bad input fails before anything starts, and copies the start-up
// progress to progress.
func Up(ctx context.Context, opts Options, argv []string, progress io.Writer) (string, error) {
	dir := opts.Dir
	if dir == "" {
		return "", errors.New("localcluster.Up: Options.Dir is empty")
	}
	if err := opts.withDefaults().validate(); err != nil {
		return "", err
	}
	if pid, ok := runningPid(dir); ok {
		return "", fmt.Errorf("a cluster already runs in %s (pid %d); stop it with `gantry cluster down --dir %s`", dir, pid, dir)
	}
	if err := RequireBinaries(); err != nil {
		return "", err
	}
	if opts.Knative {
		if err := knativeinstall.RequireBuild(); err != nil {
			return "", err
		}
	}
	if err := claimDir(dir); err != nil {
		return "", err
	}
	cmd, ready, err := spawn(dir, argv)
	if err != nil {
		return "", err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // reap it if it exits while we live
	kubeconfig, err := relay(ctx, ready, progress)
	if err != nil && ctx.Err() != nil {
		// Interrupted: the cluster that never was goes, folder and all.
		// Said so: "cluster up: context canceled" told the user nothing.
		if err := abandon(cmd, exited, dir); err != nil {
			return "", fmt.Errorf("cluster up: interrupted before the cluster was ready: %w", err)
		}
		return "", fmt.Errorf("cluster up: interrupted before the cluster was ready; it was stopped and %s removed: %w", dir, ctx.Err())
	}
	if err != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		log := filepath.Join(dir, serveLog)
		return "", fmt.Errorf("the cluster did not start: %w; its log is %s:\n%s", err, log, tailFile(log, logTailLines))
	}
	return kubeconfig, nil
}

// abandon stops a cluster interrupted while it started (SIGTERM: its
// start-up is cancelled and it kills what it started; SIGKILL after
// downTimeout), then removes what its nodes left and dir.
func abandon(cmd *exec.Cmd, exited <-chan struct{}, dir string) error {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case <-exited:
	case <-time.After(downTimeout):
		_ = cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("the cluster in %s ignored SIGTERM for %s and was killed", dir, downTimeout)
	}
	return errors.Join(err, cleanupNetworks(dir), os.RemoveAll(dir))
}

// claimDir makes dir ready for a new cluster: it may be missing, empty, or
// the folder of a cluster that no longer runs.
func claimDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || (err == nil && len(entries) == 0):
	case err != nil:
		return err
	case fileExists(filepath.Join(dir, pidFile)):
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s is not empty and holds no gantry cluster; choose another --dir", dir)
	}
	return os.MkdirAll(dir, 0o700)
}

// spawn starts argv in a new session and records its pid. The returned pipe
// carries its progress lines and, last, the ready line.
func spawn(dir string, argv []string) (*exec.Cmd, *os.File, error) {
	logf, err := os.Create(filepath.Join(dir, serveLog))
	if err != nil {
		return nil, nil, err
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer w.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the child
	cmd.Env = append(os.Environ(), readyFdEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		return nil, nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	pid := []byte(strconv.Itoa(cmd.Process.Pid))
	if err := os.WriteFile(filepath.Join(dir, pidFile), pid, 0o600); err != nil {
		_ = cmd.Process.Kill()
		r.Close()
		return nil, nil, err
	}
	return cmd, r, nil
}

// relay copies progress lines from r until the ready line, and returns the
// kubeconfig path it names.
func relay(ctx context.Context, r *os.File, progress io.Writer) (string, error) {
	defer r.Close()
	stop := context.AfterFunc(ctx, func() { r.Close() })
	defer stop()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if path, ok := strings.CutPrefix(line, readyPrefix); ok {
			return path, nil
		}
		fmt.Fprintln(progress, line)
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	return "", errors.New("its process exited before the cluster was ready")
}

// Serve runs a cluster until ctx is done, then stops it: the detached side
// of Up. It reports progress and readiness on the pipe Up passed it, or on
// stdout when started by hand.
func Serve(ctx context.Context, opts Options) error {
	report := os.Stdout
	if fd, err := strconv.Atoi(os.Getenv(readyFdEnv)); err == nil {
		report = os.NewFile(uintptr(fd), "ready")
	}
	opts.Progress = report
	c, err := Start(ctx, opts)
	if err != nil {
		return err // the caller prints it to the log Up quotes
	}
	fmt.Fprintln(report, readyPrefix+c.KubeconfigPath())
	if report != os.Stdout {
		report.Close()
	}
	<-ctx.Done()
	return c.Stop()
}

// Down stops the detached cluster in dir (SIGTERM, SIGKILL after 30 s),
// removes the pod networks of its process nodes if a killed or crashed
// cluster left them (namespaces, links, routes), and removes dir.
func Down(dir string) error {
	if !fileExists(filepath.Join(dir, pidFile)) {
		return fmt.Errorf("no cluster in %s (no %s)", dir, pidFile)
	}
	var err error
	if pid, ok := runningPid(dir); ok {
		err = stopPid(pid, dir)
		// Killed, it may take a moment to go; its nodes' networks are
		// removed once it has.
		for deadline := time.Now().Add(5 * time.Second); processAlive(pid); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				return err
			}
		}
	}
	return errors.Join(err, cleanupNetworks(dir), os.RemoveAll(dir))
}

// cleanupNetworks removes what the process nodes under dir left of their
// pod networks; a node that stopped cleanly left nothing.
func cleanupNetworks(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs error
	for _, e := range entries {
		if e.IsDir() {
			errs = errors.Join(errs, processnode.CleanupNetwork(filepath.Join(dir, e.Name())))
		}
	}
	return errs
}

func stopPid(pid int, dir string) error {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(downTimeout)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // its components die with it
			return fmt.Errorf("the cluster in %s (pid %d) ignored SIGTERM for %s and was killed", dir, pid, downTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Env returns the kubeconfig path of the cluster running in dir.
func Env(dir string) (string, error) {
	if _, ok := runningPid(dir); !ok {
		return "", fmt.Errorf("no cluster runs in %s; start one with `gantry cluster up`", dir)
	}
	return filepath.Join(dir, "kubeconfig"), nil
}

// runningPid returns the pid in dir's pid file if that process is alive and
// is the one serving dir (its command line names dir), not a reused pid.
func runningPid(dir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !processAlive(pid) {
		return 0, false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return pid, err == nil && strings.Contains(string(cmdline), dir)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
