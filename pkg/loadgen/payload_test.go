package loadgen

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"testing"
)

func TestZerosSendsTheSizeInBytes(t *testing.T) {
	p := Zeros(1e3)
	for _, size := range []float64{0.0004, 1.5, 64, 2} {
		body, h, err := p(size, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := int(size*1e3 + 0.5)
		if len(body) != want || h.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("size %v: %d bytes, header %v; want %d", size, len(body), h, want)
		}
		for _, c := range body {
			if c != 0 {
				t.Fatalf("size %v: non-zero byte", size)
			}
		}
	}
	if _, _, err := p(MaxBodyBytes, nil); !errors.Is(err, ErrPayloadTooLarge) {
		t.Errorf("oversized body: got %v", err)
	}
}

func TestHeaderSendsTheSize(t *testing.T) {
	body, h, err := Header()(2.5, nil)
	if err != nil || string(body) != "2.5" || h.Get(SizeHeader) != "2.5" {
		t.Errorf("body %q header %v err %v", body, h, err)
	}
}

func TestBuiltinAndUnitBytes(t *testing.T) {
	for _, name := range BuiltinNames() {
		if _, err := Builtin(name, 1e6); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Builtin("wav", 1); !errors.Is(err, ErrUnknownPayload) {
		t.Errorf("unknown payload: got %v", err)
	}
	if _, err := Builtin("zeros", 0); !errors.Is(err, ErrBadConfig) {
		t.Errorf("zeros with no unit: got %v", err)
	}
	for unit, want := range map[string]float64{"KB": 1024, "MB": 1 << 20, "mb": 1 << 20, "GB": 1 << 30, "words": 1} {
		if got := UnitBytes(unit); got != want {
			t.Errorf("UnitBytes(%q) = %v, want %v", unit, got, want)
		}
	}
}

// The pool builds each bucket at its middle size and hands requests the
// bucket their size falls in.
func TestPoolPicksTheSizesBucket(t *testing.T) {
	calls := 0
	record := func(size float64, _ *rand.Rand) ([]byte, http.Header, error) {
		calls++
		return []byte{byte(size)}, nil, nil
	}
	p, err := newPool(Config{Payload: record, Pool: 3, Buckets: 4, MinSize: 0, MaxSize: 40}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if calls != 12 {
		t.Errorf("%d payloads generated, want 3 x 4", calls)
	}
	for size, mid := range map[float64]byte{0: 5, 9.9: 5, 10: 15, 25: 25, 40: 35} {
		for seed := range uint64(5) {
			if got := p.pick(size, seed).body[0]; got != mid {
				t.Errorf("size %v: payload built at %d, want %d", size, got, mid)
			}
		}
	}
	fail := func(float64, *rand.Rand) ([]byte, http.Header, error) { return nil, nil, errors.New("boom") }
	if _, err := newPool(Config{Payload: fail, Pool: 1, MinSize: 1, MaxSize: 2}.withDefaults()); err == nil {
		t.Error("a failing payload built a pool")
	}
}
