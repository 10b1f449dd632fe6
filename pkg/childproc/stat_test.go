package childproc

import (
	"os"
	"strconv"
	"testing"
)

// The parent PID is the second field after the command name, whatever
// the name holds.
func TestStatFieldsOfThisProcess(t *testing.T) {
	f := StatFields(os.Getpid())
	if len(f) < 13 {
		t.Fatalf("StatFields(self) = %d fields, want at least 13", len(f))
	}
	if pp, _ := strconv.Atoi(f[1]); pp != os.Getppid() {
		t.Errorf("parent PID field = %q, want %d", f[1], os.Getppid())
	}
	if f := StatFields(-1); f != nil {
		t.Errorf("StatFields(-1) = %v, want nil", f)
	}
}
