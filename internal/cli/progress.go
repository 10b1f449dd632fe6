package cli

import (
	"io"
	"os"
)

// terminalOnly is w when it is a terminal, else nil: progress goes to
// stderr only when a person watches it (../shared/conventions.md), not
// into a log file or a pipe, where a progress bar's carriage returns
// made one 6-7 KB line of every `gantry sim`'s stderr.
func terminalOnly(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		return w
	}
	return nil
}
