package localcluster

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// tempDirPattern names the folders Start makes when Options.Dir is empty.
const tempDirPattern = "gantry-cluster-*"

// ownerFile in an owned temp folder holds the pid of the process that made it.
const ownerFile = "owner.pid"

// makeOwnedTempDir makes a temp folder marked with this process's pid, after
// removing the folders of owners that have died without cleaning up (a test
// binary killed by -timeout, say). Their components died with them, through
// the parent-death signal.
func makeOwnedTempDir() (string, error) {
	removeOrphanedTempDirs()
	dir, err := os.MkdirTemp("", tempDirPattern)
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600)
}

func removeOrphanedTempDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempDirPattern))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or its owner is still writing the file
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err == nil && !processAlive(pid) {
			_ = os.RemoveAll(dir)
		}
	}
}

// processAlive reports whether pid names a live process (a zombie is dead).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
