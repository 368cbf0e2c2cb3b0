package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"testing"
)

// fuzzLimits keep one fuzz input to a few MB: an image that passes them
// decodes into at most 1 MP and 8 MB.
var fuzzLimits = Limits{MaxPixels: 1 << 20, MaxSide: 2048, MaxDecodeBytes: 8 << 20, MaxBytes: 1 << 20, ThumbSide: 48}

func fuzzSeeds(f *testing.F) {
	j := encodeJPEG(f, solid(40, 30, color.RGBA{200, 10, 10, 255}))
	f.Add(j)
	f.Add(withSegment(j, exifSegment(6, binary.LittleEndian)))
	f.Add(j[:len(j)/2])
	f.Add(encodePNG(f, solid(30, 40, color.NRGBA{0, 0, 255, 128})))
	var g bytes.Buffer
	gif.Encode(&g, solid(20, 10, color.White), nil)
	f.Add(g.Bytes())
	f.Add(readTestdata(f, "blue-purple-pink.lossy.webp"))
	f.Add(readTestdata(f, "gopher-doc.with-alpha.lossless.webp"))
	f.Add(movie("isom", 1000, 5000, 640, 480, true))
	f.Add(movie("M4A ", 44100, 44100, 0, 0, false))
	f.Add([]byte("%PDF-1.7\n"))
	f.Add([]byte{})
}

// checkResult fails on anything but a sentinel error, or a result that
// breaks the limits.
func checkResult(t *testing.T, info Info, th Thumb, err error) {
	t.Helper()
	if err != nil {
		// Inputs come from a bytes.Reader: every failure is the file's.
		if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("error is none of the sentinels: %v", err)
		}
		return
	}
	if info.ContentType == "" {
		t.Fatal("no content type")
	}
	if th.JPEG != nil {
		if th.Width < 1 || th.Height < 1 || max(th.Width, th.Height) > fuzzLimits.ThumbSide {
			t.Fatalf("thumbnail %dx%d", th.Width, th.Height)
		}
		if info.Blurhash == "" {
			t.Fatal("image without blurhash")
		}
	}
	if info.Width < 0 || info.Height < 0 || info.Duration < 0 {
		t.Fatalf("info %+v", info)
	}
}

func FuzzInspect(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		info, th, err := Inspect(bytes.NewReader(b), int64(len(b)), "", fuzzLimits)
		checkResult(t, info, th, err)
		if th.JPEG != nil {
			m, _, err := image.Decode(bytes.NewReader(th.JPEG))
			if err != nil {
				t.Fatalf("thumbnail does not decode: %v", err)
			}
			if bb := m.Bounds(); bb.Dx() != th.Width || bb.Dy() != th.Height {
				t.Fatalf("thumbnail is %v, says %dx%d", bb, th.Width, th.Height)
			}
		}
	})
}

// FuzzProbe also varies the declared type and lets the size lie.
func FuzzProbe(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		declared, size := "", int64(len(b))
		if len(b) > 0 {
			switch b[0] % 4 {
			case 1:
				declared = Sniff(b)
			case 2:
				declared = "image/jpeg"
			case 3:
				size += int64(b[len(b)-1]) // a size larger than the file
			}
		}
		info, err := Probe(bytes.NewReader(b), size, declared, fuzzLimits)
		if errors.Is(err, ErrMismatch) {
			if declared == "" || sameType(declared, Sniff(b)) {
				t.Fatalf("mismatch for %q: %v", declared, err)
			}
			return
		}
		checkResult(t, info, Thumb{}, err)
		if err == nil && info.ContentType != Sniff(b) {
			t.Fatalf("ContentType %q, Sniff says %q", info.ContentType, Sniff(b))
		}
	})
}
