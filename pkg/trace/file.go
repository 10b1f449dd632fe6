package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ReadFile replays a trace file, telling the Azure Functions format (its
// header starts with HashOwner) from a per-second CSV. azureFunction picks
// the HashFunction to replay from an Azure file; empty sums all rows. The
// trace is named after the file.
func ReadFile(path, azureFunction string) (Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return Trace{}, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	azure, err := looksAzure(br)
	if err != nil {
		return Trace{}, fmt.Errorf("%s: %w", path, err)
	}
	var t Trace
	if azure {
		t, err = ReadAzure(br, azureFunction)
	} else {
		t, err = ReadCSV(br)
	}
	if err != nil {
		return Trace{}, fmt.Errorf("%s: %w", path, err)
	}
	t.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return t, nil
}

// looksAzure peeks at the start of the input without consuming it.
func looksAzure(br *bufio.Reader) (bool, error) {
	head, err := br.Peek(64)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return false, err
	}
	head = bytes.TrimLeft(head, " \t\r\n\ufeff")
	return len(head) >= 9 && strings.EqualFold(string(head[:9]), "HashOwner"), nil
}
