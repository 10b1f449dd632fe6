package backend

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"gantry.dev/gantry/pkg/childproc"
	"gantry.dev/gantry/pkg/statedir"
)

// record is what the state folder keeps of a running instance
// (../shared/conventions.md): enough for a gateway that restarts after a
// crash to stop what the crashed one left, and to be sure it signals that
// process and no other that reused its PID.
type record struct {
	ID       string `json:"id"`
	Function string `json:"function"`
	PID      int    `json:"pid"`
	PGID     int    `json:"pgid"`
	// StartTime is /proc/PID/stat's start time, in clock ticks since boot.
	StartTime uint64 `json:"start_time"`
}

// KeepRecords makes the runtime keep a record of each instance it runs in
// dir (the state folder's instances/), from now on. First it stops the
// instances that the records already there name, left by a gateway that
// did not stop them (a crash, SIGKILL), and removes those records; it
// returns how many processes it stopped.
func (l *Local) KeepRecords(dir string) (int, error) {
	stopped, err := reapRecords(dir)
	l.mu.Lock()
	l.recDir = dir
	l.mu.Unlock()
	return stopped, err
}

// record writes p's record, if records are kept; it returns the record's
// path ("" if none).
func (l *Local) record(p *proc) string {
	l.mu.Lock()
	dir := l.recDir
	l.mu.Unlock()
	if dir == "" {
		return ""
	}
	pid := p.cmd.Process.Pid
	st, err := childproc.StartTime(pid)
	if err != nil {
		// Exited already: nothing to leave behind.
		return ""
	}
	b, _ := json.Marshal(record{ID: p.inst.ID, Function: p.inst.Function, PID: pid, PGID: pid, StartTime: st})
	path := filepath.Join(dir, p.inst.ID+".json")
	if err := statedir.WriteFile(path, b, 0o644); err != nil {
		l.cfg.Logger.Warn("instance record not written: a crash would leave this instance running", "instance", p.inst.ID, "err", err)
		return ""
	}
	return path
}

func (l *Local) unrecord(path string) {
	if path != "" {
		_ = os.Remove(path)
	}
}

// reapRecords stops every process that the records in dir name and removes
// the records. A process is signalled only if its PID still names the
// process that started at the recorded time, or it is in the recorded
// process group and started no earlier (a member the instance started; a
// group's ID is not reused while any member lives).
func reapRecords(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	var recs []record
	var errs []error
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		var r record
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil || r.PID <= 1 || r.PGID <= 1 {
			errs = append(errs, fmt.Errorf("instance record %s: unreadable, removed: %v", path, err))
		} else {
			recs = append(recs, r)
		}
		_ = os.Remove(path)
	}
	if len(recs) == 0 {
		return 0, errors.Join(errs...)
	}
	stopped := 0
	for _, pid := range leftovers(recs) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			stopped++
		}
	}
	return stopped, errors.Join(errs...)
}

// leftovers are the live processes the records name, by the rule above.
func leftovers(recs []record) []int {
	// A group whose leader's PID now names another process is not the
	// recorded one: that PID was free, so the recorded group had ended.
	reused := map[int]bool{}
	for _, r := range recs {
		if st, err := childproc.StartTime(r.PGID); err == nil && (r.PGID != r.PID || st != r.StartTime) {
			reused[r.PGID] = true
		}
	}
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !childproc.Alive(pid) {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil {
			continue
		}
		st, err := childproc.StartTime(pid)
		if err != nil {
			continue
		}
		for _, r := range recs {
			if (pid == r.PID && st == r.StartTime) || (pgid == r.PGID && !reused[pgid] && st >= r.StartTime) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
