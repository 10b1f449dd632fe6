package processnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// maxLogLine is the longest line a log records as one; a longer one is
// split.
const maxLogLine = 16 << 10

// runLog records the output of one run of a container, stdout and stderr
// interleaved as written, one line per record, each stamped with the time
// it was read: "2026-12-01T02:00:00.123456789Z text\n", as a kubelet's CRI
// logs are. The file is capped: past max bytes, lines are counted, not
// kept, and a closing line says how many bytes were dropped.
type runLog struct {
	path string
	max  int64

	mu      sync.Mutex // guards the fields below
	f       *os.File
	size    int64
	dropped int64
	closed  bool
	changed chan struct{} // closed and replaced after each write, and at close
}

func newRunLog(path string, max int64) (*runLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &runLog{path: path, max: max, f: f, changed: make(chan struct{})}, nil
}

// copyFrom records r line by line until it ends (every writer closed it).
func (l *runLog) copyFrom(r io.Reader) {
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			l.record(time.Now(), line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func (l *runLog) record(t time.Time, line []byte) {
	var b bytes.Buffer
	b.Grow(len(line) + 40)
	b.WriteString(t.UTC().Format(time.RFC3339Nano))
	b.WriteByte(' ')
	b.Write(line)
	if line[len(line)-1] != '\n' {
		b.WriteByte('\n')
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.size+int64(b.Len()) > l.max {
		l.dropped += int64(len(line))
		return
	}
	n, _ := l.f.Write(b.Bytes())
	l.size += int64(n)
	l.wake()
}

func (l *runLog) wake() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// close ends the run's log, noting any bytes the cap dropped.
func (l *runLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.dropped > 0 {
		fmt.Fprintf(l.f, "%s processnode: %d bytes of output dropped past the %d-byte log limit\n",
			time.Now().UTC().Format(time.RFC3339Nano), l.dropped, l.max)
	}
	l.f.Close()
	l.closed = true
	l.wake()
}

// state says how far the file is written, whether the run is over, and
// gives a channel closed at the next change.
func (l *runLog) state() (size int64, closed bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		st, err := os.Stat(l.path)
		if err == nil {
			return st.Size(), true, l.changed
		}
	}
	return l.size, l.closed, l.changed
}

// readRange reads [from, to) of the file.
func (l *runLog) readRange(from, to int64) ([]byte, error) {
	if to <= from {
		return nil, nil
	}
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, to-from)
	n, err := f.ReadAt(buf, from)
	if err == io.EOF {
		err = nil
	}
	return buf[:n], err
}

// LogOptions select what a log read returns, as kubectl logs's flags do.
type LogOptions struct {
	Tail       int       // only the last Tail lines (0: all)
	LimitBytes int       // at most this many bytes (0: no limit)
	Timestamps bool      // keep each line's timestamp
	Follow     bool      // keep streaming until the run ends or ctx is done
	Since      time.Time // only lines read at or after it
}

// filter turns recorded lines into what a reader asked for.
func filterLines(data []byte, o LogOptions) []byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // a partial record: not written yet
		}
		rec := data[:i+1]
		data = data[i+1:]
		ts, text, ok := bytes.Cut(rec, []byte{' '})
		if !ok {
			continue
		}
		if !o.Since.IsZero() {
			if t, err := time.Parse(time.RFC3339Nano, string(ts)); err == nil && t.Before(o.Since) {
				continue
			}
		}
		if o.Timestamps {
			out = append(out, rec)
		} else {
			out = append(out, text)
		}
	}
	if o.Tail > 0 && len(out) > o.Tail {
		out = out[len(out)-o.Tail:]
	}
	return bytes.Join(out, nil)
}

// completeLen is the length of data's whole records.
func completeLen(data []byte) int { return bytes.LastIndexByte(data, '\n') + 1 }

// open returns the log as o selects. With Follow, the reader streams new
// lines until the run ends, ctx is done or the reader is closed.
func (l *runLog) open(ctx context.Context, o LogOptions) (io.ReadCloser, error) {
	size, closed, _ := l.state()
	data, err := l.readRange(0, size)
	if err != nil {
		return nil, err
	}
	data = data[:completeLen(data)]
	first := filterLines(data, o)
	if !o.Follow || closed {
		if o.LimitBytes > 0 && len(first) > o.LimitBytes {
			first = first[:o.LimitBytes]
		}
		return io.NopCloser(bytes.NewReader(first)), nil
	}
	pr, pw := io.Pipe()
	go l.follow(ctx, pw, first, int64(len(data)), o)
	return pr, nil
}

func (l *runLog) follow(ctx context.Context, pw *io.PipeWriter, first []byte, off int64, o LogOptions) {
	// A write blocked on a reader that went away ends with ctx.
	stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	defer stop()
	left := int64(o.LimitBytes)
	send := func(b []byte) bool {
		if o.LimitBytes > 0 {
			if int64(len(b)) > left {
				b = b[:left]
			}
			left -= int64(len(b))
		}
		if _, err := pw.Write(b); err != nil {
			return false
		}
		return o.LimitBytes == 0 || left > 0
	}
	if !send(first) {
		pw.Close()
		return
	}
	tail := o
	tail.Tail = 0
	for {
		size, closed, changed := l.state()
		if size > off {
			data, err := l.readRange(off, size)
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			data = data[:completeLen(data)]
			off += int64(len(data))
			if !send(filterLines(data, tail)) {
				pw.Close()
				return
			}
		}
		if closed && off >= size {
			pw.Close()
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			pw.CloseWithError(ctx.Err())
			return
		}
	}
}
