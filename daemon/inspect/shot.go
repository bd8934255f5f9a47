package inspect

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"math"

	"golang.org/x/image/draw"
)

// ShotOptions bound a screenshot. Zero values mean the defaults.
type ShotOptions struct {
	MaxWidth int // pixels (default 540: half a phone's width)
	MaxBytes int // of PNG (default 256 KiB)
}

// Shot is a screenshot as given to an agent.
type Shot struct {
	PNG                   []byte
	Width, Height         int // as given
	FullWidth, FullHeight int // as the app drew it
}

// maxPixels bounds the image decoded from an app: 16 megapixels (64 MB
// decoded), above a 5K display's 14.7. A small PNG can claim a huge
// image: the bound is checked before decoding.
const maxPixels = 16 << 20

// Scale decodes a PNG and scales it down to opt.MaxWidth, and further
// until its encoding fits opt.MaxBytes.
func Scale(data []byte, opt ShotOptions) (Shot, error) {
	if opt.MaxWidth <= 0 {
		opt.MaxWidth = 540
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = 256 << 10
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return Shot{}, fmt.Errorf("the screenshot is not a PNG: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width*cfg.Height > maxPixels {
		return Shot{}, fmt.Errorf("the screenshot is %d×%d pixels: too large to read", cfg.Width, cfg.Height)
	}
	src, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return Shot{}, fmt.Errorf("the screenshot is not a PNG: %w", err)
	}
	shot := Shot{FullWidth: cfg.Width, FullHeight: cfg.Height}
	w := min(cfg.Width, opt.MaxWidth)
	for w >= 16 {
		h := max(1, cfg.Height*w/cfg.Width)
		var out []byte
		if w == cfg.Width && len(data) <= opt.MaxBytes {
			out = data // as it came: it fits
		} else {
			dst := image.NewRGBA(image.Rect(0, 0, w, h)) // draw's fast paths write RGBA
			draw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
			var b bytes.Buffer
			if err := (&png.Encoder{CompressionLevel: png.DefaultCompression}).Encode(&b, dst); err != nil {
				return Shot{}, err
			}
			out = b.Bytes()
		}
		if len(out) <= opt.MaxBytes {
			shot.PNG, shot.Width, shot.Height = out, w, h
			return shot, nil
		}
		// The bytes go with the pixels: aim at the budget, a little under.
		w = min(w-1, int(float64(w)*math.Sqrt(float64(opt.MaxBytes)/float64(len(out)))*0.95))
	}
	return Shot{}, errors.New("the screenshot does not fit the byte budget even at 16 pixels wide")
}
