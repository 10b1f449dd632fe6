package childproc

import (
	"os"
	"strconv"
	"strings"
)

// StatFields returns the fields of /proc/PID/stat after the command
// name (field 3 of the line is the first), or nil if the process is gone.
// The name is in parentheses and may hold spaces and parentheses itself,
// so the line's last ')' ends it.
func StatFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}
