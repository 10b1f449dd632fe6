package functions

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"sync"
)

// Generated photos are JPEGs at quality 90, as cameras and phones save
// them, so that image-compress has something to shrink. Their content is a
// colour gradient under heavy per-pixel grain: grain keeps the encoded size
// proportional to the pixel count, which lets genImage aim at a byte size
// by choosing the dimensions, and full-range grain packs the most bytes into
// a pixel (about 0.83), so the app's 8 MB stays under maxPixels.
const (
	photoQuality = 90
	photoGrain   = 255 // peak-to-peak grain per channel: the full range
	photoMinSide = 8
)

// jpegCost is the encoded size of a generated photo: overhead + perPixel·px.
type jpegCost struct{ overhead, perPixel float64 }

var (
	photoCostOnce sync.Once
	photoCost     jpegCost
)

// measurePhotoCost encodes two probe photos with a fixed seed and fits the
// line through them; measuring, rather than hard-coding, keeps the sizes
// right if the encoder changes.
func measurePhotoCost() jpegCost {
	photoCostOnce.Do(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		small, large := 64*48, 512*384
		a := len(encodePhoto(64, 48, rng))
		b := len(encodePhoto(512, 384, rng))
		per := float64(b-a) / float64(large-small)
		photoCost = jpegCost{overhead: float64(a) - per*float64(small), perPixel: per}
	})
	return photoCost
}

// genImage makes a 4:3 photo whose JPEG is about n bytes.
func genImage(n int, rng *rand.Rand) ([]byte, string, error) {
	w, h := photoSize(n, measurePhotoCost())
	if int64(w)*int64(h) > maxPixels {
		return nil, "", fmt.Errorf("%w: a %d-byte photo needs %dx%d pixels, past image-compress's %d",
			ErrTooLarge, n, w, h, maxPixels)
	}
	return encodePhoto(w, h, rng), "image/jpeg", nil
}

// photoSize picks 4:3 dimensions whose photo encodes to about n bytes.
func photoSize(n int, c jpegCost) (int, int) {
	px := max((float64(n)-c.overhead)/c.perPixel, photoMinSide*photoMinSide)
	w := max(int(math.Round(math.Sqrt(px*4/3))), photoMinSide)
	h := max(int(math.Round(px/float64(w))), photoMinSide)
	return w, h
}

func encodePhoto(w, h int, rng *rand.Rand) []byte {
	var buf bytes.Buffer
	// Encoding into memory only fails on a bad image, which this is not.
	_ = jpeg.Encode(&buf, drawPhoto(w, h, rng), &jpeg.Options{Quality: photoQuality})
	return buf.Bytes()
}

// drawPhoto paints a gradient with grain; one random draw per pixel gives
// the three channels' grain.
func drawPhoto(w, h int, rng *rand.Rand) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		row := img.Pix[y*img.Stride:]
		for x := range w {
			r := rng.Uint64()
			p := row[4*x : 4*x+4]
			p[0] = grain(uint8(255*x/w), r)
			p[1] = grain(uint8(255*y/h), r>>8)
			p[2] = grain(uint8(128+127*(x+y)/(w+h)), r>>16)
			p[3] = 255
		}
	}
	return img
}

// grain adds noise from the low byte of r to v, saturating at 0 and 255.
func grain(v uint8, r uint64) uint8 {
	d := int(r&0xFF)*photoGrain/256 - photoGrain/2
	return uint8(min(max(int(v)+d, 0), 255))
}
