package functions

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"net/http"
	"testing"
)

func testImage(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 5), uint8(x ^ y), 255})
		}
	}
	return img
}

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestImageCompressReencodesPNGAndJPEG(t *testing.T) {
	h := mustHandler(t, "image-compress")
	src := testImage(40, 30)
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, src, &jpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][]byte{"png": encodePNG(t, src), "jpeg": jpg.Bytes()} {
		rec, out := postOK(t, h, in, nil)
		img, format, err := image.Decode(bytes.NewReader(rec.Body.Bytes()))
		if err != nil || format != "jpeg" {
			t.Fatalf("%s: output is %s, %v; want a JPEG", name, format, err)
		}
		if b := img.Bounds(); b.Dx() != 40 || b.Dy() != 30 {
			t.Errorf("%s: output is %v, want 40x30", name, b)
		}
		if want := float64(rec.Body.Len()) / (1 << 20); out != want {
			t.Errorf("%s: X-Output-Size %v MB, want %v", name, out, want)
		}
		if rec.Header().Get("Content-Type") != "image/jpeg" {
			t.Errorf("%s: Content-Type %q", name, rec.Header().Get("Content-Type"))
		}
	}
}

// A lower quality gives a smaller file: the quality parameter is used.
func TestImageCompressHonoursQuality(t *testing.T) {
	h := mustHandler(t, "image-compress")
	in := encodePNG(t, testImage(64, 64))
	low := postQuery(h, "/?quality=10", in, nil)
	high := postQuery(h, "/?quality=95", in, nil)
	if low.Code != http.StatusOK || high.Code != http.StatusOK {
		t.Fatalf("status %d and %d", low.Code, high.Code)
	}
	if low.Body.Len() >= high.Body.Len() {
		t.Errorf("quality 10 gave %d bytes, quality 95 %d", low.Body.Len(), high.Body.Len())
	}
	for _, q := range []string{"0", "101", "high"} {
		rec := postQuery(h, "/?quality="+q, in, nil)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("quality=%s: status %d, want 400", q, rec.Code)
		}
	}
}

func TestImageCompressRejectsOtherInput(t *testing.T) {
	var gifBody bytes.Buffer
	if err := gif.Encode(&gifBody, testImage(4, 4), nil); err != nil {
		t.Fatal(err)
	}
	h := mustHandler(t, "image-compress")
	for name, body := range map[string][]byte{
		"empty":       nil,
		"text":        []byte("not an image"),
		"gif":         gifBody.Bytes(),
		"pixel bomb":  pngClaiming(t, 1<<16, 1<<16),
		"cut-off png": encodePNG(t, testImage(40, 30))[:80],
	} {
		rec := post(h, body, nil)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d (%s), want 400", name, rec.Code, rec.Body)
		}
		assertOneLine(t, rec)
	}
}

// pngClaiming returns a tiny PNG whose header claims w x h pixels, the way
// a decompression bomb does.
func pngClaiming(t testing.TB, w, h uint32) []byte {
	b := encodePNG(t, testImage(1, 1))
	// IHDR's data starts after the 8-byte signature and the chunk's length and type.
	ihdr := b[16:29]
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}
