package functions

import (
	"bytes"
	"context"
	"image"
	"image/jpeg"
	_ "image/png" // image-compress accepts PNG as well as JPEG
	"strconv"
)

var imageCompressSpec = spec{
	name: "image-compress",
	summary: "decode a JPEG or PNG and re-encode it as JPEG at ?quality=1..100 (default 75); " +
		"cost follows the pixel count",
	serves: []string{"image-compression/image-compress"},
	inUnit: mb, outUnit: mb,
	build: stateless(runImageCompress),
}

// defaultQuality is the usual web setting, which shrinks camera JPEGs
// (quality 90 and up) to about a third.
const defaultQuality = 75

// maxPixels bounds the decoded image: 2^24 pixels (4096x4096) is twice the
// largest image the app sends, and the check runs on the header, before a
// small file can claim a huge canvas and exhaust memory.
const maxPixels = 1 << 24

func runImageCompress(_ context.Context, req request) (result, error) {
	quality, err := qualityParam(req.query.Get("quality"))
	if err != nil {
		return result{}, err
	}
	img, err := decodeImage(req.body)
	if err != nil {
		return result{}, err
	}
	var out bytes.Buffer
	if err := jpeg.Encode(&out, img, &jpeg.Options{Quality: quality}); err != nil {
		return result{}, err
	}
	b := img.Bounds()
	return result{
		body: out.Bytes(), contentType: "image/jpeg",
		work: int64(b.Dx()) * int64(b.Dy()),
	}, nil
}

func qualityParam(v string) (int, error) {
	if v == "" {
		return defaultQuality, nil
	}
	q, err := strconv.Atoi(v)
	if err != nil || q < 1 || q > 100 {
		return 0, badInput("quality must be an integer from 1 to 100, got %q", v)
	}
	return q, nil
}

// decodeImage decodes a JPEG or PNG after checking its header's size.
func decodeImage(b []byte) (image.Image, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, badInput("not a JPEG or PNG image: %v", err)
	}
	// Other formats may be registered by whatever else links this package;
	// the function promises JPEG and PNG only.
	if format != "jpeg" && format != "png" {
		return nil, badInput("image format %s is not JPEG or PNG", format)
	}
	if px := int64(cfg.Width) * int64(cfg.Height); px > maxPixels || px <= 0 {
		return nil, badInput("image is %dx%d, want 1 to %d pixels", cfg.Width, cfg.Height, maxPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, badInput("decode %s: %v", format, err)
	}
	return img, nil
}
