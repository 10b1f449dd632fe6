package loadgen

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Payload builds one request from an input size: its body and any extra
// headers. It is called from many goroutines at once, each with its own rng;
// it must not modify a body after returning it, because bodies may be shared
// between requests.
type Payload func(size float64, rng *rand.Rand) (body []byte, header http.Header, err error)

// Payload bounds.
const (
	// MaxBodyBytes caps one built-in body.
	MaxBodyBytes = 256 << 20
	// DefaultBuckets is the number of size buckets of a payload pool.
	DefaultBuckets = 16
	// MaxPoolPayloads caps Pool x Buckets.
	MaxPoolPayloads = 4096
	// MaxPoolBytes caps the memory a payload pool holds.
	MaxPoolBytes = 1 << 30
)

// SizeHeader carries the input size for the header payload.
const SizeHeader = "X-Input-Size"

var (
	// ErrUnknownPayload is returned by Builtin for a name not in BuiltinNames().
	ErrUnknownPayload = errors.New("unknown payload")
	// ErrPayloadTooLarge is returned for a body beyond MaxBodyBytes or a
	// pool beyond MaxPoolBytes.
	ErrPayloadTooLarge = errors.New("payload too large")
)

// BuiltinNames lists the payloads Builtin knows.
func BuiltinNames() []string { return []string{"zeros", "header"} }

// Builtin returns a built-in payload by name; unitBytes is the bytes in one
// unit of input size, used by zeros.
func Builtin(name string, unitBytes float64) (Payload, error) {
	switch name {
	case "zeros":
		if !positive(unitBytes) {
			return nil, fmt.Errorf("%w: zeros needs a positive unit size in bytes, got %v", ErrBadConfig, unitBytes)
		}
		return Zeros(unitBytes), nil
	case "header":
		return Header(), nil
	}
	return nil, fmt.Errorf("%w %q (built in: %v)", ErrUnknownPayload, name, BuiltinNames())
}

// Zeros sends round(size*unitBytes) zero bytes. All bodies are slices of one
// shared zero buffer, which grows to the largest size seen, so a run of
// 8 MB images does not allocate 8 MB per request.
func Zeros(unitBytes float64) Payload {
	var (
		mu  sync.Mutex
		buf []byte
	)
	header := http.Header{"Content-Type": {"application/octet-stream"}}
	return func(size float64, _ *rand.Rand) ([]byte, http.Header, error) {
		n := math.Round(size * unitBytes)
		if !(n >= 0) || n > MaxBodyBytes {
			return nil, nil, fmt.Errorf("%w: %v bytes for size %v (limit %d)", ErrPayloadTooLarge, n, size, MaxBodyBytes)
		}
		mu.Lock()
		defer mu.Unlock()
		if int(n) > len(buf) {
			// Older slices stay valid: they point into the old buffer,
			// which is zero too and never written.
			buf = make([]byte, min(max(int(n), 2*len(buf)), MaxBodyBytes))
		}
		return buf[:int(n)], header, nil
	}
}

// Header sends the size as a short text body and in the X-Input-Size
// header, for gateways and functions that only need to know the size.
func Header() Payload {
	return func(size float64, _ *rand.Rand) ([]byte, http.Header, error) {
		text := strconv.FormatFloat(size, 'g', -1, 64)
		h := http.Header{SizeHeader: {text}, "Content-Type": {"text/plain"}}
		return []byte(text), h, nil
	}
}

// UnitBytes is the bytes in one unit of a workload's SizeUnit: B, KB, MB, GB
// in binary multiples (1 KB = 1024 B), as the gateway converts a body's
// length to a function's input_size.unit and the example functions count
// their input. Units that are not byte sizes give 1.
func UnitBytes(unit string) float64 {
	switch strings.ToUpper(strings.TrimSpace(unit)) {
	case "KB":
		return 1 << 10
	case "MB":
		return 1 << 20
	case "GB":
		return 1 << 30
	}
	return 1
}

// built is one pre-generated payload.
type built struct {
	body   []byte
	header http.Header
}

// pool holds payloads generated before the run, Pool per size bucket, each
// built at its bucket's middle size. A request takes one from its size's
// bucket, chosen by its seed.
type pool struct {
	minSize, width float64
	buckets        [][]built
}

// newPool builds the pool, or returns nil when cfg.Pool is 0.
func newPool(cfg Config) (*pool, error) {
	if cfg.Pool == 0 {
		return nil, nil
	}
	buckets := cfg.Buckets
	if cfg.MinSize == cfg.MaxSize {
		buckets = 1
	}
	p := &pool{minSize: cfg.MinSize, width: (cfg.MaxSize - cfg.MinSize) / float64(buckets), buckets: make([][]built, buckets)}
	rng := rand.New(rand.NewPCG(cfg.Seed, streamPayloads+1))
	total := 0
	for i := range p.buckets {
		size := cfg.MinSize + (float64(i)+0.5)*p.width
		for range cfg.Pool {
			body, header, err := cfg.Payload(size, rng)
			if err != nil {
				return nil, fmt.Errorf("pre-generate payload of size %v: %w", size, err)
			}
			if total += len(body); total > MaxPoolBytes {
				return nil, fmt.Errorf("%w: pool exceeds %d bytes", ErrPayloadTooLarge, MaxPoolBytes)
			}
			p.buckets[i] = append(p.buckets[i], built{body, header})
		}
	}
	return p, nil
}

// pick returns the pooled payload for a size.
func (p *pool) pick(size float64, seed uint64) built {
	i := 0
	if p.width > 0 {
		i = min(max(int((size-p.minSize)/p.width), 0), len(p.buckets)-1)
	}
	b := p.buckets[i]
	return b[seed%uint64(len(b))]
}
