package listenfd

import (
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// passed opens a listening socket and returns a duplicate of its
// descriptor, as a child would find it at descriptor 3, and the address
// clients dial.
func passed(t *testing.T) (fd int, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	fd, err = syscall.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	return fd, ln.Addr().String()
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// The socket named by LISTEN_FDS is served: a connection made to it before
// anything accepted is taken by the listener Inherited returns.
func TestInheritedServesThePassedSocket(t *testing.T) {
	fd, addr := passed(t)
	c, err := net.Dial("tcp", addr) // queued in the backlog
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid := os.Getpid()
	ln, ok, err := inherited(env(map[string]string{EnvFDs: "1", EnvPID: strconv.Itoa(pid)}), pid, fd)
	if err != nil || !ok {
		t.Fatalf("inherited: %v %v", ok, err)
	}
	defer ln.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := io.WriteString(s, "hi"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
		t.Fatalf("read %q %v", buf, err)
	}
}

// Variables meant for another process, or none, leave the process to
// listen by itself; more than one socket is refused.
func TestInheritedIgnoresOtherProcessesSockets(t *testing.T) {
	pid := os.Getpid()
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr bool
	}{
		{"unset", map[string]string{}, false},
		{"another pid", map[string]string{EnvFDs: "1", EnvPID: strconv.Itoa(pid + 1)}, false},
		{"no pid", map[string]string{EnvFDs: "1"}, false},
		{"zero", map[string]string{EnvFDs: "0", EnvPID: strconv.Itoa(pid)}, false},
		{"two", map[string]string{EnvFDs: "2", EnvPID: strconv.Itoa(pid)}, true},
		{"garbage", map[string]string{EnvFDs: "x", EnvPID: strconv.Itoa(pid)}, true},
	} {
		ln, ok, err := inherited(env(tc.env), pid, 1<<20) // a descriptor nothing holds
		if ok || ln != nil || (err != nil) != tc.wantErr {
			t.Errorf("%s: got %v %v %v, want no socket, error %v", tc.name, ln, ok, err, tc.wantErr)
		}
	}
}

// The variables are removed once read, so that the process's own children
// do not take the socket for theirs.
func TestInheritedUnsetsTheVariables(t *testing.T) {
	t.Setenv(EnvFDs, "1")
	t.Setenv(EnvPID, strconv.Itoa(os.Getpid()+1))
	t.Setenv(EnvNames, "http")
	if _, ok, err := Inherited(); ok || err != nil {
		t.Fatalf("inherited: %v %v", ok, err)
	}
	for _, v := range []string{EnvFDs, EnvPID, EnvNames} {
		if _, set := os.LookupEnv(v); set {
			t.Errorf("%s still set", v)
		}
	}
}
