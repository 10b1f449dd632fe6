package backend

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gantry.dev/gantry/pkg/childproc"
)

// A start that cannot succeed is failed before ReadyTimeout when that is
// certain from what the instance does (awaitReady):
//   - its health path answers a server error other than 502, 503 or 504
//     on every check for brokenHealthAfter: it listens and answers, and
//     says it is broken, not starting (of-watchdog answers 503 until its
//     function is ready; a proxy in front of a starting server 502 or 504);
//   - its processes listen on TCP ports, none of them $PORT, on every look
//     for wrongPortAfter: a program with its own port (Flask's 5000, a
//     hard-coded 8080) that ignores $PORT.
const (
	brokenHealthAfter = time.Second
	wrongPortAfter    = 2 * time.Second
	// The looks at the instance's sockets read /proc (every process's
	// stat): none in an instance's first listenLookAfter, when most are
	// ready, then one every listenLookGap.
	listenLookAfter = time.Second
	listenLookGap   = 500 * time.Millisecond
)

// notYet reports a health status that says "not ready yet" rather than
// "broken".
func notYet(status int) bool { return status == 502 || status == 503 || status == 504 }

// streak tracks for how long one condition has held on consecutive checks.
type streak struct {
	since time.Time
	n     int
}

// see records one check at now; it returns how long the condition has held
// over at least three checks in a row (0 before that).
func (s *streak) see(ok bool, now time.Time) time.Duration {
	if !ok {
		*s = streak{}
		return 0
	}
	if s.n == 0 {
		s.since = now
	}
	s.n++
	if s.n < 3 {
		return 0
	}
	return now.Sub(s.since)
}

// listeningPorts lists the TCP ports (IPv4 and IPv6) that the process pid
// and its descendants listen on, sorted; ok is false when it cannot tell
// (the process is gone, or /proc does not show its descriptors).
func listeningPorts(pid int) (ports []int, ok bool) {
	if _, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err != nil {
		return nil, false
	}
	inodes := map[string]bool{}
	for _, p := range descendants(pid) {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", p), fd.Name()))
			if err == nil && strings.HasPrefix(link, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
			}
		}
	}
	if len(inodes) == 0 {
		return nil, true
	}
	seen := map[int]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		for _, port := range listenersIn(fmt.Sprintf("/proc/%d/net/%s", pid, table), inodes) {
			seen[port] = true
		}
	}
	for p := range seen {
		ports = append(ports, p)
	}
	sort.Ints(ports)
	return ports, true
}

// errPortTaken is a start whose port another process took between the
// gateway finding it free and the instance binding it (freePort cannot
// hold it for a process that binds its own): the start is tried again on
// another port, and does not count as a failure.
var errPortTaken = errors.New("another process listens on the instance's port")

// portTaken reports whether a process other than the instance p (which is
// gone, or whose processes do not listen on its port) answers on its port.
func portTaken(p *proc) bool {
	c, err := net.DialTimeout("tcp", p.inst.Addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	select {
	case <-p.exited:
		return true
	default:
	}
	ports, ok := listeningPorts(p.cmd.Process.Pid)
	return ok && !slices.Contains(ports, p.port())
}

// listenersIn reads a /proc/net/tcp table: the local ports of the sockets
// in LISTEN state (0A) whose inode is in inodes.
func listenersIn(path string, inodes map[string]bool) []int {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var ports []int
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
			continue
		}
		_, hexPort, ok := strings.Cut(fields[1], ":")
		if !ok {
			continue
		}
		if port, err := strconv.ParseUint(hexPort, 16, 16); err == nil {
			ports = append(ports, int(port))
		}
	}
	return ports
}

// descendants is pid and every process below it (bounded: a fork bomb is
// not walked past maxDescendants).
func descendants(pid int) []int {
	const maxDescendants = 256
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []int{pid}
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := parentOf(p); pp > 0 {
			children[pp] = append(children[pp], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out) && len(out) < maxDescendants; i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// parentOf reads the parent PID from /proc/PID/stat; 0 if it cannot.
func parentOf(pid int) int {
	fields := childproc.StatFields(pid)
	if len(fields) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(fields[1])
	return pp
}

// portList formats ports for a message.
func portList(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}
