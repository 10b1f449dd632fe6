// Package funclogs keeps what function instances print: a bounded ring of
// lines per function, fed by one writer per instance, read back by tail,
// time and instance, and followed live. It is what /system/logs serves, so
// the lines of instances that have already exited stay readable until
// newer lines push them out.
package funclogs

import (
	"errors"
	"sync"
	"time"
	"unicode/utf8"
)

// Bounds. Every one is checked before memory is taken.
const (
	// MaxLine bounds one line; a longer one is cut and marked.
	MaxLine = 4 << 10
	// MaxLines and MaxBytes bound one function's ring; the oldest lines
	// go first.
	MaxLines = 2000
	MaxBytes = 256 << 10
	// MaxFunctions bounds the rings (a gateway serves at most 1000
	// functions; rings of removed ones are dropped).
	MaxFunctions = 1000
	// MaxFollowers bounds the live readers, all functions together.
	MaxFollowers = 64
	// MaxInstanceNames bounds the instance names a function's record
	// keeps; the oldest are forgotten first.
	MaxInstanceNames = 4096
	// followBuffer is how many lines a follower may lag before it is cut
	// off (told so in its last line) rather than slow the instance.
	followBuffer = 1024
)

// Truncated ends a line that was cut at MaxLine.
const Truncated = " [truncated]"

// ErrTooManyFollowers is returned by Follow past MaxFollowers.
var ErrTooManyFollowers = errors.New("too many log followers")

// Line is one line an instance printed.
type Line struct {
	Function string
	Instance string
	Time     time.Time
	Text     string
}

// Hub holds every function's ring.
type Hub struct {
	now func() time.Time

	mu        sync.Mutex
	rings     map[string]*ring
	instances map[string]*names // the instances each function has started
	followers int
	closed    bool
}

type ring struct {
	lines []Line // circular, capacity MaxLines
	head  int    // index of the oldest line
	n     int
	bytes int
	subs  map[*Follower]struct{}
}

// New returns an empty hub; now is its clock (time.Now if nil).
func New(now func() time.Time) *Hub {
	if now == nil {
		now = time.Now
	}
	return &Hub{now: now, rings: map[string]*ring{}, instances: map[string]*names{}}
}

// names is a bounded set of instance names in the order they came.
type names struct {
	set   map[string]struct{}
	order []string
}

// Writer returns the writer one instance's stdout and stderr go to. It cuts
// lines itself; Close flushes a last line that has no newline.
func (h *Hub) Writer(function, instance string) *Writer {
	h.remember(function, instance)
	return &Writer{h: h, function: function, instance: instance}
}

// Drop forgets a function's lines (when it is removed) and ends its
// followers.
func (h *Hub) Drop(function string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.instances, function)
	r, ok := h.rings[function]
	if !ok {
		return
	}
	for f := range r.subs {
		h.lockedEnd(r, f, "")
	}
	delete(h.rings, function)
}

// remember records that an instance of function started, so a query for
// it is known before it prints a line.
func (h *Hub) remember(function, instance string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.instances[function]
	if !ok {
		if len(h.instances) >= MaxFunctions {
			return // bounded; KnownInstance then cannot tell, and says yes
		}
		n = &names{set: map[string]struct{}{}}
		h.instances[function] = n
	}
	if _, ok := n.set[instance]; ok {
		return
	}
	if len(n.order) >= MaxInstanceNames {
		delete(n.set, n.order[0])
		n.order = n.order[1:]
	}
	n.set[instance] = struct{}{}
	n.order = append(n.order, instance)
}

// KnownInstance reports whether instance is one of function's: started
// here, or with lines kept. When the record is past its bounds it cannot
// tell, and says yes.
func (h *Hub) KnownInstance(function, instance string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.instances[function]
	if !ok && len(h.instances) >= MaxFunctions {
		return true
	}
	if ok {
		if _, in := n.set[instance]; in || len(n.order) >= MaxInstanceNames {
			return true
		}
	}
	if r, ok := h.rings[function]; ok {
		for i := range r.n {
			if r.lines[(r.head+i)%len(r.lines)].Instance == instance {
				return true
			}
		}
	}
	return false
}

// Close ends every follower; later lines are still kept.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, r := range h.rings {
		for f := range r.subs {
			h.lockedEnd(r, f, "")
		}
	}
}

func (h *Hub) add(l Line) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.rings[l.Function]
	if !ok {
		if len(h.rings) >= MaxFunctions {
			return // bounded: a function past the bound keeps no lines
		}
		r = &ring{lines: make([]Line, 0, 16), subs: map[*Follower]struct{}{}}
		h.rings[l.Function] = r
	}
	r.push(l)
	for f := range r.subs {
		if !f.match(l) {
			continue
		}
		select {
		case f.c <- l:
		default:
			h.lockedEnd(r, f, "gantry: this log stream fell too far behind and was ended; ask again with since=")
		}
	}
}

func (r *ring) push(l Line) {
	size := len(l.Text) + len(l.Instance)
	for r.n > 0 && (r.n >= MaxLines || r.bytes+size > MaxBytes) {
		old := r.lines[r.head]
		r.bytes -= len(old.Text) + len(old.Instance)
		r.lines[r.head] = Line{}
		r.head = (r.head + 1) % len(r.lines)
		r.n--
	}
	if r.n == len(r.lines) {
		// Grow the circle, unrolled, up to MaxLines.
		grown := make([]Line, r.n, min(max(2*len(r.lines), 16), MaxLines))
		for i := range r.n {
			grown[i] = r.lines[(r.head+i)%len(r.lines)]
		}
		r.lines, r.head = grown[:cap(grown)], 0
	}
	r.lines[(r.head+r.n)%len(r.lines)] = l
	r.n++
	r.bytes += size
}

// Query selects lines: of one instance (if set), at or after Since (if
// set), the last Tail of them (if > 0).
type Query struct {
	Function string
	Instance string
	Since    time.Time
	Tail     int
}

func (q Query) match(l Line) bool {
	return (q.Instance == "" || l.Instance == q.Instance) && (q.Since.IsZero() || !l.Time.Before(q.Since))
}

// Known reports whether a function has lines kept.
func (h *Hub) Known(function string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.rings[function]
	return ok
}

// Lines returns the kept lines q selects, oldest first.
func (h *Hub) Lines(q Query) []Line {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lockedLines(q)
}

func (h *Hub) lockedLines(q Query) []Line {
	r, ok := h.rings[q.Function]
	if !ok {
		return nil
	}
	var out []Line
	for i := range r.n {
		if l := r.lines[(r.head+i)%len(r.lines)]; q.match(l) {
			out = append(out, l)
		}
	}
	if q.Tail > 0 && len(out) > q.Tail {
		out = out[len(out)-q.Tail:]
	}
	return out
}

// Follower receives the lines a function's instances print from now on.
type Follower struct {
	q    Query
	c    chan Line
	mu   sync.Mutex
	last string // why it ended, if it was cut off
	done bool
}

func (f *Follower) match(l Line) bool { return f.q.match(l) }

// C delivers the lines; it is closed when the follower ends.
func (f *Follower) C() <-chan Line { return f.c }

// Reason is why the hub ended the follower ("" when it ended by Stop,
// Drop or Close).
func (f *Follower) Reason() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Follow returns the kept lines q selects and a follower for the lines to
// come, atomically, so no line is missed or seen twice between the two.
func (h *Hub) Follow(q Query) ([]Line, *Follower, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.followers >= MaxFollowers {
		return nil, nil, ErrTooManyFollowers
	}
	f := &Follower{q: q, c: make(chan Line, followBuffer)}
	if h.closed {
		close(f.c)
		f.done = true
		return h.lockedLines(q), f, nil
	}
	r, ok := h.rings[q.Function]
	if !ok {
		if len(h.rings) >= MaxFunctions {
			close(f.c)
			f.done = true
			return nil, f, nil
		}
		r = &ring{lines: make([]Line, 0, 16), subs: map[*Follower]struct{}{}}
		h.rings[q.Function] = r
	}
	r.subs[f] = struct{}{}
	h.followers++
	return h.lockedLines(q), f, nil
}

// Stop ends a follower; its reader calls it when it goes.
func (h *Hub) Stop(f *Follower) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := h.rings[f.q.Function]; ok {
		h.lockedEnd(r, f, "")
	}
}

func (h *Hub) lockedEnd(r *ring, f *Follower, reason string) {
	if _, ok := r.subs[f]; !ok {
		return
	}
	delete(r.subs, f)
	h.followers--
	f.mu.Lock()
	f.last, f.done = reason, true
	f.mu.Unlock()
	close(f.c)
}

// Writer cuts one instance's output into lines.
type Writer struct {
	h                  *Hub
	function, instance string

	mu      sync.Mutex
	buf     []byte
	cut     bool // the current line passed MaxLine: drop the rest of it
	started time.Time
}

// Write never fails, so the instance's output is never held up by its
// readers.
func (w *Writer) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := indexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		w.appendPart(part)
		if i < 0 {
			break
		}
		w.lockedEmit()
		b = b[i+1:]
	}
	return n, nil
}

func (w *Writer) appendPart(part []byte) {
	if w.cut {
		return
	}
	if len(w.buf) == 0 && len(part) > 0 {
		w.started = w.h.now()
	}
	if room := MaxLine - len(w.buf); len(part) > room {
		w.buf = append(w.buf, part[:room]...)
		w.cut = true
		return
	}
	w.buf = append(w.buf, part...)
}

func (w *Writer) lockedEmit() {
	text := string(w.buf)
	if w.cut {
		// Cut at a rune boundary, so the JSON carries no broken rune.
		for len(text) > 0 && !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
		text += Truncated
	}
	t := w.started
	if t.IsZero() {
		t = w.h.now()
	}
	w.buf, w.cut, w.started = w.buf[:0], false, time.Time{}
	if cap(w.buf) > MaxLine {
		w.buf = nil
	}
	w.h.add(Line{Function: w.function, Instance: w.instance, Time: t, Text: text})
}

// Close flushes a last line without a newline.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 || w.cut {
		w.lockedEmit()
	}
	return nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
