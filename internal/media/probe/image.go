package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"strings"

	"github.com/buckket/go-blurhash"
	"golang.org/x/image/webp"
)

// thumbQuality is the JPEG quality of thumbnails: small files without
// visible blocking at thumbnail size.
const thumbQuality = 80

// inspectImage checks an image's declared size against lim, decodes it once,
// and derives the blurhash and (if wanted) the thumbnail from one small
// rendering of it.
func inspectImage(src *reader, size int64, info Info, lim Limits, wantThumb bool) (Info, Thumb, error) {
	if size > lim.MaxBytes {
		return Info{}, Thumb{}, fmt.Errorf("%w: image of %d bytes, limit %d", ErrTooLarge, size, lim.MaxBytes)
	}
	format := strings.TrimPrefix(essence(info.ContentType), "image/")
	section := func() io.Reader { return bufio.NewReaderSize(io.NewSectionReader(src, 0, size), 32<<10) }

	layout := jpegLayout{orientation: 1}
	if format == "jpeg" {
		// A malformed marker stream is left for the decoder to report; what
		// was read before it still holds.
		layout, _ = scanJPEG(section())
		if src.ioErr != nil {
			return Info{}, Thumb{}, src.ioErr
		}
		if layout.scans > maxJPEGScans {
			return Info{}, Thumb{}, fmt.Errorf("%w: JPEG with more than %d scans", ErrTooLarge, maxJPEGScans)
		}
	}
	orientation := layout.orientation

	_, cfg, err := decodeImage(format, section(), true)
	if err != nil {
		return Info{}, Thumb{}, src.failure(format+" header", err)
	}
	w, h := cfg.Width, cfg.Height
	if w <= 0 || h <= 0 {
		return Info{}, Thumb{}, fmt.Errorf("%w: %s declares %dx%d pixels", ErrCorrupt, format, w, h)
	}
	// Checked before decoding: the decoder allocates by these numbers.
	if w > lim.MaxSide || h > lim.MaxSide || int64(w)*int64(h) > lim.MaxPixels {
		return Info{}, Thumb{}, fmt.Errorf("%w: %s of %dx%d pixels, limits %d pixels and %d a side",
			ErrTooLarge, format, w, h, lim.MaxPixels, lim.MaxSide)
	}
	if c := decodeCost(cfg, layout.progressive); c > lim.MaxDecodeBytes {
		return Info{}, Thumb{}, fmt.Errorf("%w: decoding %s of %dx%d pixels takes about %d bytes, limit %d",
			ErrTooLarge, format, w, h, c, lim.MaxDecodeBytes)
	}

	img, _, err := decodeImage(format, section(), false)
	if err != nil {
		return Info{}, Thumb{}, src.failure(format, err)
	}
	canvas := image.Rect(0, 0, w, h)
	if b := img.Bounds(); b != canvas {
		// Only a GIF's first frame may cover part of its screen; the rest
		// of the screen is transparent.
		if format != "gif" || !b.In(canvas) {
			return Info{}, Thumb{}, fmt.Errorf("%w: %s decoded to %v, declared %v", ErrCorrupt, format, b, canvas)
		}
		full := image.NewRGBA(canvas)
		draw.Draw(full, b, img, b.Min, draw.Src)
		img = full
	}

	// Displayed size: orientations 5-8 turn the picture a quarter.
	dw, dh := w, h
	if orientation >= 5 {
		dw, dh = h, w
	}
	info.Width, info.Height = dw, dh
	tw, th := fit(dw, dh, lim.ThumbSide)
	if orientation >= 5 {
		tw, th = th, tw // rendered before it is turned
	}
	small := orient(render(img, tw, th), orientation)

	info.Blurhash = placeholder(small)
	if !wantThumb {
		return info, Thumb{}, nil
	}
	var out bytes.Buffer
	if err := jpeg.Encode(&out, small, &jpeg.Options{Quality: thumbQuality}); err != nil {
		return Info{}, Thumb{}, fmt.Errorf("probe: encoding thumbnail: %w", err)
	}
	b := small.Bounds()
	return info, Thumb{JPEG: out.Bytes(), Width: b.Dx(), Height: b.Dy()}, nil
}

// decodeImage runs the standard decoder for format on r. A panic in it
// is returned as an error: decoders of untrusted bytes have panicked on
// crafted input before, and one file must not take the process down.
func decodeImage(format string, r io.Reader, configOnly bool) (img image.Image, cfg image.Config, err error) {
	defer func() {
		if p := recover(); p != nil {
			img, cfg, err = nil, image.Config{}, fmt.Errorf("decoder panicked: %v", p)
		}
	}()
	var (
		decode       func(io.Reader) (image.Image, error)
		decodeConfig func(io.Reader) (image.Config, error)
	)
	switch format {
	case "jpeg":
		decode, decodeConfig = jpeg.Decode, jpeg.DecodeConfig
	case "png":
		decode, decodeConfig = png.Decode, png.DecodeConfig
	case "gif":
		decode, decodeConfig = gif.Decode, gif.DecodeConfig // first frame
	case "webp":
		decode, decodeConfig = webp.Decode, webp.DecodeConfig
	default:
		return nil, image.Config{}, fmt.Errorf("no decoder for %s", format)
	}
	if configOnly {
		cfg, err = decodeConfig(r)
		return nil, cfg, err
	}
	img, err = decode(r)
	return img, image.Config{}, err
}

// decodeCost estimates the bytes the standard decoders allocate for an
// image of cfg: its pixels at the bytes per pixel of the image type they
// return (YCbCr taken as 4:4:4, the largest), plus, for a progressive
// JPEG, image/jpeg's coefficients: 4 bytes a sample of every component.
func decodeCost(cfg image.Config, progressive bool) int64 {
	var perPixel, components int64
	if _, ok := cfg.ColorModel.(color.Palette); ok {
		perPixel = 1
	} else {
		switch cfg.ColorModel {
		case color.GrayModel:
			perPixel, components = 1, 1
		case color.Gray16Model:
			perPixel = 2
		case color.YCbCrModel:
			perPixel, components = 3, 3
		case color.RGBAModel, color.NRGBAModel: // RGB JPEG (Adobe), PNG
			perPixel, components = 4, 3
		case color.NYCbCrAModel:
			perPixel = 4
		case color.CMYKModel:
			perPixel, components = 4, 4
		default: // 16-bit colour, or a model not known here
			perPixel = 8
		}
	}
	if progressive {
		if components == 0 {
			components = 4
		}
		perPixel += 4 * components
	}
	return int64(cfg.Width) * int64(cfg.Height) * perPixel
}

// fit scales w×h down so its longer side is at most side, keeping the
// aspect ratio and at least one pixel a side; it never enlarges.
func fit(w, h, side int) (int, int) {
	if w <= side && h <= side {
		return w, h
	}
	if w >= h {
		return side, max(1, int((int64(h)*int64(side)+int64(w)/2)/int64(w)))
	}
	return max(1, int((int64(w)*int64(side)+int64(h)/2)/int64(h))), side
}

// placeholderSide is the size the blurhash is computed from: it keeps only
// a few cosine components, so more pixels change nothing but the cost.
const placeholderSide = 32

// placeholder returns the blurhash of m: 4 components along the longer
// side and 3 along the shorter, as blurhash's authors suggest for photos.
func placeholder(m *image.RGBA) string {
	b := m.Bounds()
	tw, th := fit(b.Dx(), b.Dy(), placeholderSide)
	tiny := m
	if tw != b.Dx() || th != b.Dy() {
		tiny = image.NewRGBA(image.Rect(0, 0, tw, th))
		scaleInto(tiny, m)
	}
	xc, yc := 4, 3
	if th > tw {
		xc, yc = 3, 4
	}
	hash, err := blurhash.Encode(xc, yc, tiny)
	if err != nil {
		return "" // only for component counts out of range, which these are not
	}
	return hash
}
