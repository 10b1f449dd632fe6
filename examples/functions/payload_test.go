package functions

import (
	"bytes"
	"errors"
	"math"
	"net/http"
	"strconv"
	"testing"

	"gantry.dev/gantry/pkg/workload"
)

// payloadSizes are the sizes the chain test generates per app: the app's
// smallest and a mid-range one (images stay small to keep -race quick).
var payloadSizes = map[string][]float64{
	"image-compression":    {0.1, 0.5},
	"sentiment-analysis":   {1, 64},
	"email-categorization": {4, 100},
	"audio-translation":    {32, 300},
	"document-summary":     {50, 500},
}

// Each app's payload has about the asked size, carries it exactly in
// X-Input-Size, and goes through the app's whole chain: every function
// accepts the previous one's output with its X-Output-Size as input size.
func TestPayloadsRunThroughTheirChains(t *testing.T) {
	for _, appName := range workload.Names() {
		app, err := workload.Lookup(appName)
		if err != nil {
			t.Fatal(err)
		}
		gen, err := Payload(appName)
		if err != nil {
			t.Fatal(err)
		}
		sizes := payloadSizes[appName]
		if len(sizes) == 0 {
			t.Errorf("no payload sizes for %s", appName)
		}
		for _, size := range sizes {
			body, hdr, err := gen(size, testRand())
			if err != nil {
				t.Fatalf("%s at %v %s: %v", appName, size, app.SizeUnit, err)
			}
			checkPayloadSize(t, appName, app.SizeUnit, size, body, hdr)
			runChain(t, app, body, hdr)
		}
	}
}

// checkPayloadSize wants text, audio and documents byte-exact and images
// within 10%, since a JPEG's size is aimed at by choosing its dimensions.
func checkPayloadSize(t *testing.T, app, unitName string, size float64, body []byte, hdr http.Header) {
	t.Helper()
	u, _ := unitNamed(unitName)
	want := math.Round(size * u.bytes)
	tolerance := 0.0
	if app == "image-compression" {
		tolerance = 0.1 * want
	}
	if got := float64(len(body)); math.Abs(got-want) > tolerance {
		t.Errorf("%s at %v %s: %d bytes, want %v (±%v)", app, size, unitName, len(body), want, tolerance)
	}
	if got := hdr.Get(HeaderInputSize); got != strconv.FormatFloat(size, 'g', -1, 64) {
		t.Errorf("%s: X-Input-Size %q, want %v", app, got, size)
	}
	if hdr.Get("Content-Type") == "" {
		t.Errorf("%s: no Content-Type", app)
	}
}

// runChain posts the payload to each function of the chain in turn,
// forwarding body and X-Output-Size as the gateway does.
func runChain(t *testing.T, app workload.App, body []byte, hdr http.Header) {
	t.Helper()
	for _, f := range app.Chain {
		rec, out := postOK(t, mustHandler(t, f.Name), body, hdr)
		if out < 0 {
			t.Errorf("%s/%s: X-Output-Size %v", app.Name, f.Name, out)
		}
		body = rec.Body.Bytes()
		hdr = http.Header{HeaderInputSize: {rec.Header().Get(HeaderOutputSize)}}
	}
	if len(body) == 0 {
		t.Errorf("%s: the chain's last function returned nothing", app.Name)
	}
}

// Replay payloads are tiny and carry the size in the header; replay of every
// function of the chain accepts them.
func TestReplayPayloads(t *testing.T) {
	gen, err := Payload("replay:audio-translation")
	if err != nil {
		t.Fatal(err)
	}
	body, hdr, err := gen(40, testRand())
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > 100 || hdr.Get(HeaderInputSize) != "40" {
		t.Errorf("body %q, X-Input-Size %q; want a tiny body and 40", body, hdr.Get(HeaderInputSize))
	}
	app, _ := workload.Lookup("audio-translation")
	for i := range app.Chain {
		h := mustHandler(t, "replay", WithReplay(app.Name, strconv.Itoa(i), 1))
		postOK(t, h, body, hdr)
	}
}

func TestPayloadsAreDeterministicForASeed(t *testing.T) {
	for _, name := range append(workload.Names(), "replay:sentiment-analysis") {
		gen, err := Payload(name)
		if err != nil {
			t.Fatal(err)
		}
		app, _ := workload.Lookup(name)
		size := app.MinSize
		if size == 0 {
			size = 1
		}
		a, _, errA := gen(size, testRand())
		b, _, errB := gen(size, testRand())
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: two payloads from one seed differ (%v, %v)", name, errA, errB)
		}
	}
}

func TestPayloadRejectsBadNamesAndSizes(t *testing.T) {
	for _, name := range []string{"nope", "replay:nope", "image-compress", "replay:"} {
		if _, err := Payload(name); !errors.Is(err, workload.ErrUnknownApp) {
			t.Errorf("Payload(%q) = %v, want ErrUnknownApp", name, err)
		}
	}
	cases := []struct {
		app  string
		size float64
		want error
	}{
		{"sentiment-analysis", 0, workload.ErrBadSize},
		{"sentiment-analysis", -1, workload.ErrBadSize},
		{"sentiment-analysis", math.NaN(), workload.ErrBadSize},
		{"sentiment-analysis", math.Inf(1), workload.ErrBadSize},
		{"sentiment-analysis", 64<<10 + 1, ErrTooLarge},
		{"replay:audio-translation", 64<<10 + 1, ErrTooLarge},
		{"image-compression", 65, ErrTooLarge},
		{"image-compression", 20, ErrTooLarge}, // under MaxBody, past the pixel bound
	}
	for _, c := range cases {
		gen, err := Payload(c.app)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := gen(c.size, testRand()); !errors.Is(err, c.want) {
			t.Errorf("%s at %v: %v, want %v", c.app, c.size, err, c.want)
		}
	}
	// The bound itself is allowed.
	gen, _ := Payload("replay:sentiment-analysis")
	if _, _, err := gen(64<<10, testRand()); err != nil {
		t.Errorf("replay at exactly 64 MiB: %v", err)
	}
}

// The app's largest image is within the pixel bound with room to spare.
func TestLargestAppImageFitsThePixelBound(t *testing.T) {
	app, _ := workload.Lookup("image-compression")
	w, h := photoSize(int(app.MaxSize*(1<<20)), measurePhotoCost())
	if px := w * h; px > maxPixels*3/4 {
		t.Errorf("a %v MB photo is %dx%d = %d pixels, too near the %d bound", app.MaxSize, w, h, px, maxPixels)
	}
}
