package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeChecks is what a documented command must print (a regular
// expression over its stdout); every command of a checked section needs
// one, so a command added to the docs without a check fails the test. The
// load's check asks for answered requests and the gateway's SLO, not for
// zero errors, which a stalled machine (its load average at 40 while the
// test ran) can deny without the command being wrong.
var readmeChecks = map[string]string{
	"go build -o bin/gantry ./cmd/gantry":                                                                                          ``, // the test runs this binary's CLI instead
	"bin/gantry serve --stack examples/stack.yml --addr 127.0.0.1:8080 &":                                                          ``,
	"curl -fsS --retry 50 --retry-connrefused --retry-delay 1 -o /dev/null 127.0.0.1:8080/healthz":                                 ``,
	"curl -fsS -d 'what a great and happy day' 127.0.0.1:8080/function/sentiment":                                                  `"label":"positive"`,
	"curl -fsS 127.0.0.1:8080/system/functions":                                                                                    `"name":"sentiment".*"slo":"100ms","criticality":8`,
	"curl -fsS 127.0.0.1:8080/system/apps/audio-translation":                                                                       `"slo":"350ms"`,
	"bin/gantry load --gateway http://127.0.0.1:8080 --app audio-translation --payload audio-translation --rate 10 --duration 10s": `(?s)ok [1-9][0-9]*, errors .*SLO 350 ms`,
}

// longRunning are the subcommands whose documented runs take minutes (up,
// benchmarks, simulations): the test parses their flags against the CLI,
// and their own tests run them (gantry up in TestUpComparesPoliciesSideBySide).
var longRunning = map[string]bool{"up": true, "bench": true, "sim": true}

// Every shell command of README.md's "Serve functions" section and of
// docs/platform.md's opening runs as written against a gateway started as
// the docs start it (on a free port instead of 8080, with durations cut to
// keep the test fast): each must exit 0 (curl with -f, so an HTTP error
// fails) and print what the docs promise.
func TestReadmeServeCommandsRunAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a gateway and real function instances")
	}
	for _, doc := range []struct {
		file, section string
		least         int
	}{
		{"../../README.md", "## Serve functions", 6},
		{"../../docs/platform.md", "# The live platform", 6},
	} {
		t.Run(filepath.Base(doc.file), func(t *testing.T) {
			cmds := shellCommands(t, doc.file, doc.section)
			if len(cmds) < doc.least {
				t.Fatalf("found only %d commands: %q", len(cmds), cmds)
			}
			runDocCommands(t, cmds)
		})
	}
}

// runDocCommands runs one document's commands in order, in a folder and
// against a gateway address of their own.
func runDocCommands(t *testing.T, cmds []string) {
	env := newDocEnv(t)
	for _, c := range cmds {
		words := strings.Fields(c)
		switch {
		case words[0] == "make":
			checkMakeTarget(t, c)
			continue
		case words[0] == "bin/gantry" && len(words) > 1 && longRunning[words[1]]:
			checkFlagsParse(t, c)
			continue
		}
		want, ok := readmeChecks[c]
		if !ok {
			t.Errorf("%q has no check in readmeChecks: add what it must print", c)
			continue
		}
		switch {
		case strings.HasPrefix(c, "go build "):
		case strings.HasSuffix(c, "&"):
			env.background(t, strings.TrimSuffix(c, "&"))
		default:
			out := env.run(t, c)
			if want != "" && !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("%s\nprinted %.2000s\nwant %s", c, out, want)
			}
		}
	}
}

// shellCommands returns the commands of the ```sh blocks in the section
// that starts at heading (up to the next heading of the same level), one a
// line, comments cut.
func shellCommands(t *testing.T, file, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	level := strings.Fields(heading)[0] + " "
	var out []string
	in, block := false, false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == heading:
			in = true
			continue
		case in && !block && strings.HasPrefix(line, level):
			return out
		case !in:
			continue
		case strings.HasPrefix(line, "```sh"):
			block = true
			continue
		case block && strings.HasPrefix(line, "```"):
			block = false
			continue
		}
		if block {
			if cmd := stripComment(line); cmd != "" {
				out = append(out, cmd)
			}
		}
	}
	if !in {
		t.Fatalf("%s has no %q", file, heading)
	}
	return out
}

// stripComment drops a trailing "# ..." outside quotes and the spaces
// before it.
func stripComment(line string) string {
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' '):
			return strings.TrimSpace(line[:i])
		}
	}
	return strings.TrimSpace(line)
}

// checkFlagsParse checks that a gantry command line names a command and
// flags the CLI knows, with values of the right types.
func checkFlagsParse(t *testing.T, c string) {
	t.Helper()
	words := strings.Fields(strings.SplitN(c, ">", 2)[0])
	root := newRootCmd()
	cmd, rest, err := root.Find(words[1:])
	if err == nil {
		err = cmd.ParseFlags(rest)
	}
	if err != nil {
		t.Errorf("%s: %v", c, err)
		return
	}
	// A file a command names must be in a fresh clone.
	for _, name := range []string{"trace-file", "stack"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			if _, err := os.Stat(filepath.Join("../..", f.Value.String())); err != nil {
				t.Errorf("%s: --%s names a file a fresh clone does not have: %v", c, name, err)
			}
		}
	}
}

// README.md's "Simulate" commands parse, and name files a fresh clone has
// (the trace file was a load.csv of the reader's own).
func TestReadmeSimulateCommandsParseAndNameFilesThatExist(t *testing.T) {
	cmds := shellCommands(t, "../../README.md", "## Simulate")
	if len(cmds) < 4 {
		t.Fatalf("found only %d commands: %q", len(cmds), cmds)
	}
	for _, c := range cmds {
		if strings.HasPrefix(c, "bin/gantry ") {
			checkFlagsParse(t, c)
		}
	}
}

// checkMakeTarget checks that a make command names a target of the
// Makefile and variables the Makefile reads.
func checkMakeTarget(t *testing.T, c string) {
	t.Helper()
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range strings.Fields(c)[1:] {
		name, _, isVar := strings.Cut(w, "=")
		switch {
		case isVar && !bytes.Contains(mk, []byte("$("+name+")")):
			t.Errorf("%s: the Makefile does not read %s", c, name)
		case !isVar && !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(w)+`:`).Match(mk):
			t.Errorf("%s: the Makefile has no target %s", c, w)
		}
	}
}

// docEnv runs documented commands in a folder of their own, with bin/gantry
// being this test binary's CLI and examples/ the repository's.
type docEnv struct {
	dir, addr string
	env       []string
	bg        []*exec.Cmd
}

func newDocEnv(t *testing.T) *docEnv {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	shim := fmt.Sprintf("#!/bin/sh\nexec %q \"$@\"\n", exe)
	if err := os.WriteFile(filepath.Join(dir, "bin", "gantry"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(examples, filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	e := &docEnv{dir: dir, addr: freeAddr(t),
		env: append(os.Environ(), cliChildEnv+"=1", "XDG_STATE_HOME="+filepath.Join(dir, "state"))}
	t.Cleanup(e.stop)
	return e
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// durationFlag cuts a documented load's length to keep the test fast.
var durationFlag = regexp.MustCompile(`--duration \S+`)

func (e *docEnv) command(ctx context.Context, c string) *exec.Cmd {
	c = strings.ReplaceAll(c, "127.0.0.1:8080", e.addr)
	c = durationFlag.ReplaceAllString(c, "--duration 2s")
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -o pipefail; "+c)
	cmd.Dir, cmd.Env = e.dir, e.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func (e *docEnv) run(t *testing.T, c string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := e.command(ctx, c)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("%s: %v\nstdout: %.2000s\nstderr: %.2000s", c, err, out, stderr.String())
	}
	return string(out)
}

func (e *docEnv) background(t *testing.T, c string) {
	t.Helper()
	cmd := e.command(context.Background(), c)
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	e.bg = append(e.bg, cmd)
}

// stop ends the background commands as a user's Ctrl-C would (SIGTERM to
// their process groups; the gateway drains and stops its instances).
func (e *docEnv) stop() {
	for _, cmd := range e.bg {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
}
