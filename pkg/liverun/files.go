package liverun

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
)

// writeJSON prints v as one indented JSON object: every report of this
// package has the same shape on stdout and on disk.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeReportFiles creates dir and writes a report's markdown and JSON
// into it; the plots are the caller's, since each report draws its own.
func writeReportFiles(dir, mdName, md, jsonName string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, mdName), []byte(md), 0o644); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := writeJSON(&b, v); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, jsonName), b.Bytes(), 0o644)
}
