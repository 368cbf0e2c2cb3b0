package probe

import (
	"bytes"
	"image"
	"image/draw"
	"image/jpeg"
	"math"
	"sync"
	"testing"

	xdraw "golang.org/x/image/draw"
)

// zonePlate is a w×h test photo: concentric grey rings whose frequency
// rises from the centre to half the sampling rate at the corners, over a
// colour gradient. A thumbnail of it should be flat wherever the rings are
// finer than its pixels; a filter that aliases draws false rings there.
func zonePlate(w, h int) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	cx, cy := float64(w)/2, float64(h)/2
	k := math.Pi / 2 / math.Hypot(cx, cy) // 0.5 cycles/pixel at the corners
	for y := range h {
		for x := range w {
			dx, dy := float64(x)-cx, float64(y)-cy
			v := 75 * math.Cos(k*(dx*dx+dy*dy))
			i := m.PixOffset(x, y)
			m.Pix[i] = uint8(80 + 95*x/w + int(v))
			m.Pix[i+1] = uint8(80 + 95*y/h + int(v))
			m.Pix[i+2] = uint8(175 - 95*x/w + int(v))
			m.Pix[i+3] = 0xff
		}
	}
	return m
}

// photo12MP is a 4000×3000 JPEG (quality 90, 4:2:0) of a zone plate, and
// the image it decodes to.
var photo12MP = sync.OnceValues(func() (*image.YCbCr, []byte) {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, zonePlate(4000, 3000), &jpeg.Options{Quality: 90}); err != nil {
		panic(err)
	}
	m, err := jpeg.Decode(bytes.NewReader(b.Bytes()))
	if err != nil {
		panic(err)
	}
	return m.(*image.YCbCr), b.Bytes()
})

// BenchmarkInspect12MP is the cost of one 12-megapixel photo (4000×3000
// baseline JPEG, 4:2:0, 5 MB): decode, render, blurhash, thumbnail.
//
// Measured on the shared 2-core development machine (go1.26, amd64, load
// about 3): 530-650 ms/op, of which image/jpeg's decode alone is 400-490;
// 29.6 MB allocated per op, which bounds the peak heap. Of that the
// decoded image is 18.1 MB and the rest, 11.5 MB, is render's buffers,
// bounded by the thumbnail's size and not the photo's: one decoded
// full-size image is held, and no copy of it.
func BenchmarkInspect12MP(b *testing.B) {
	_, file := photo12MP()
	b.SetBytes(int64(len(file)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Inspect(bytes.NewReader(file), int64(len(file)), "image/jpeg", Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRender compares ways of taking a decoded 12 MP photo to a
// 320×240 thumbnail; psnr is against Catmull-Rom straight from full size
// (a full-support filter that does not alias), in dB.
//
// Measured as BenchmarkInspect12MP (render's comment says why the first):
//
//	box+catmullrom   140 ms   11.2 MB/op   psnr 48
//	catmullrom       710 ms   31.5 MB/op   (reference)
//	bilinear         420 ms   31.3 MB/op   psnr 47
//	approxbilinear     6 ms    0.3 MB/op   psnr 16 (false rings)
func BenchmarkRender(b *testing.B) {
	src, _ := photo12MP()
	const tw, th = 320, 240
	scaler := func(s xdraw.Scaler) func() *image.RGBA {
		return func() *image.RGBA {
			dst := image.NewRGBA(image.Rect(0, 0, tw, th))
			s.Scale(dst, dst.Rect, src, src.Bounds(), draw.Over, nil)
			return dst
		}
	}
	ref := scaler(xdraw.CatmullRom)()
	for _, s := range []struct {
		name string
		f    func() *image.RGBA
	}{
		{"box+catmullrom", func() *image.RGBA { return render(src, tw, th) }},
		{"catmullrom", scaler(xdraw.CatmullRom)},
		{"bilinear", scaler(xdraw.BiLinear)},
		{"approxbilinear", scaler(xdraw.ApproxBiLinear)},
	} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			var out *image.RGBA
			for b.Loop() {
				out = s.f()
			}
			b.ReportMetric(psnr(out, ref), "psnr")
		})
	}
}

// psnr is the peak signal-to-noise ratio of a against b in dB; identical
// images give +Inf.
func psnr(a, b *image.RGBA) float64 {
	var se float64
	for i := range a.Pix {
		if i%4 == 3 {
			continue
		}
		d := float64(a.Pix[i]) - float64(b.Pix[i])
		se += d * d
	}
	mse := se / float64(len(a.Pix)/4*3)
	return 10 * math.Log10(255*255/mse)
}
