package functions

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"

	"gantry.dev/gantry/pkg/workload"
)

// PayloadFunc makes one valid input for an app's first function. size is in
// the app's SizeUnit; the body is about that large, and the header carries
// X-Input-Size set to size exactly, so the gateway sees the intended size
// whatever the encoding rounded to. header also carries Content-Type.
type PayloadFunc func(size float64, rng *rand.Rand) (body []byte, header http.Header, err error)

// ErrTooLarge is returned by a PayloadFunc for a size past its bound:
// MaxBody bytes for every app, and for image-compression also the pixel
// bound of image-compress (about 13 MB of generated JPEG).
var ErrTooLarge = errors.New("payload size past the bound")

// replayPrefix names replay payloads: "replay:APP".
const replayPrefix = "replay:"

// generator makes a body of about n bytes and returns its Content-Type.
type generator func(n int, rng *rand.Rand) ([]byte, string, error)

// generators holds one generator per app, for its first function's input.
var generators = map[string]generator{
	"image-compression":    genImage,
	"sentiment-analysis":   genReview,
	"email-categorization": genEmail,
	"audio-translation":    genSpeech,
	"document-summary":     genPDF,
}

// Payload returns the input generator for an app of pkg/workload, or, for
// "replay:APP", one that sends a tiny body with X-Input-Size for replay.
func Payload(name string) (PayloadFunc, error) {
	appName, replay := strings.CutPrefix(name, replayPrefix)
	app, err := workload.Lookup(appName)
	if err != nil {
		return nil, fmt.Errorf("payload %q: %w (or %sAPP)", name, err, replayPrefix)
	}
	u, err := unitNamed(app.SizeUnit)
	if err != nil {
		return nil, fmt.Errorf("payload %q: %w", name, err)
	}
	gen := generators[appName]
	if replay {
		gen = replayGenerator(app.Name)
	}
	if gen == nil {
		return nil, fmt.Errorf("payload %q: no generator for app %s", name, appName)
	}
	return func(size float64, rng *rand.Rand) ([]byte, http.Header, error) {
		return makePayload(gen, u, size, rng)
	}, nil
}

func makePayload(gen generator, u unit, size float64, rng *rand.Rand) ([]byte, http.Header, error) {
	n, err := payloadBytes(size, u)
	if err != nil {
		return nil, nil, err
	}
	body, contentType, err := gen(n, rng)
	if err != nil {
		return nil, nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", contentType)
	h.Set(HeaderInputSize, strconv.FormatFloat(size, 'g', -1, 64))
	return body, h, nil
}

// payloadBytes converts a size to bytes within MaxBody.
func payloadBytes(size float64, u unit) (int, error) {
	if math.IsNaN(size) || math.IsInf(size, 0) || size <= 0 {
		return 0, fmt.Errorf("%w: %v", workload.ErrBadSize, size)
	}
	n := size * u.bytes
	if n > MaxBody {
		return 0, fmt.Errorf("%w: %v %s is more than %d bytes", ErrTooLarge, size, u.name, MaxBody)
	}
	return int(math.Round(n)), nil
}

// replayGenerator sends a small JSON note: replay reads only X-Input-Size.
func replayGenerator(app string) generator {
	return func(n int, _ *rand.Rand) ([]byte, string, error) {
		body, err := json.Marshal(map[string]any{"app": app, "bytes": n})
		return body, "application/json", err
	}
}
