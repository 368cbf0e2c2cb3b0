package probe

import (
	"image"
	"image/color"
	"image/draw"

	xdraw "golang.org/x/image/draw"
)

// renderGap is how much larger than the target the box filter leaves an
// image for Catmull-Rom: the box filter's sidelobes alias a little, and
// the more of the reduction Catmull-Rom does the less of it shows (2 left
// faint false rings on a zone plate, 3 almost none).
const renderGap = 3

// render returns img scaled to tw×th over white (JPEG has no alpha).
//
// Big reductions go in two steps, as libvips does: a box filter by a whole
// factor k, which averages every source pixel once and reads the image one
// row at a time, to between 3 and 6 times the target; then Catmull-Rom for
// the rest. Catmull-Rom straight from full size looks a little cleaner but
// takes 6 times as long and a float buffer of 32 bytes × target width ×
// source height (31 MB for 12 MP to 320 px, more than the decoded image);
// here that buffer is at most 32 × 320 × 1280 bytes whatever the source.
// ApproxBiLinear straight from full size is fastest but reads 4 source
// pixels per output pixel and aliases badly. Figures in BenchmarkRender.
func render(img image.Image, tw, th int) *image.RGBA {
	dst := image.NewRGBA(image.Rect(0, 0, tw, th))
	for i := range dst.Pix {
		dst.Pix[i] = 0xff
	}
	b := img.Bounds()
	src := img
	if k := min(b.Dx()/tw, b.Dy()/th) / renderGap; k >= 2 {
		src = boxShrink(img, k)
	}
	if sb := src.Bounds(); sb.Dx() == tw && sb.Dy() == th {
		draw.Draw(dst, dst.Rect, src, sb.Min, draw.Over)
	} else {
		xdraw.CatmullRom.Scale(dst, dst.Rect, src, sb, draw.Over, nil)
	}
	return dst
}

// scaleInto scales a small src into dst; for placeholders.
func scaleInto(dst *image.RGBA, src image.Image) {
	xdraw.BiLinear.Scale(dst, dst.Rect, src, src.Bounds(), draw.Src, nil)
}

// boxShrink averages each k×k block of img into one pixel (the blocks on
// the right and bottom edges may be smaller). Pixels are averaged
// premultiplied, so transparent pixels do not darken their neighbours. It
// holds one row of img as RGBA at a time, never a full-size copy.
func boxShrink(img image.Image, k int) *image.RGBA {
	if m, ok := img.(*image.YCbCr); ok && m.Rect.Min == (image.Point{}) {
		if hs, vs, ok := chromaShifts(m.SubsampleRatio); ok {
			return boxShrinkYCbCr(m, k, hs, vs)
		}
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	ow, oh := (w+k-1)/k, (h+k-1)/k
	out := image.NewRGBA(image.Rect(0, 0, ow, oh))
	row := image.NewRGBA(image.Rect(0, 0, w, 1))
	sums := make([]uint64, ow*4)
	for oy := range oh {
		y0, y1 := oy*k, min(oy*k+k, h)
		clear(sums)
		for y := y0; y < y1; y++ {
			// image/draw converts each source type with its own fast path.
			draw.Draw(row, row.Rect, img, image.Pt(b.Min.X, b.Min.Y+y), draw.Src)
			p := row.Pix
			for ox := range ow {
				var r, g, bl, a uint32 // at most k ≤ 16384 pixels of 255: fits
				for i, end := ox*k*4, min(ox*k+k, w)*4; i < end; i += 4 {
					r += uint32(p[i])
					g += uint32(p[i+1])
					bl += uint32(p[i+2])
					a += uint32(p[i+3])
				}
				s := sums[ox*4 : ox*4+4 : ox*4+4]
				s[0] += uint64(r)
				s[1] += uint64(g)
				s[2] += uint64(bl)
				s[3] += uint64(a)
			}
		}
		o := out.Pix[oy*out.Stride:]
		for ox := range ow {
			n := uint64((min(ox*k+k, w) - ox*k) * (y1 - y0))
			for c := range 4 {
				o[ox*4+c] = uint8((sums[ox*4+c] + n/2) / n)
			}
		}
	}
	return out
}

// orient turns m as EXIF orientation o (1-8) says, so it shows upright.
// Orientation o means the stored row 0 is the displayed: 1 top, 2 top
// (mirrored), 3 bottom, 4 bottom (mirrored), 5 left (mirrored), 6 right,
// 7 right (mirrored), 8 left.
func orient(m *image.RGBA, o int) *image.RGBA {
	if o < 2 || o > 8 {
		return m
	}
	w, h := m.Rect.Dx(), m.Rect.Dy()
	dw, dh := w, h
	if o >= 5 {
		dw, dh = h, w
	}
	out := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for y := range h {
		for x := range w {
			var dx, dy int
			switch o {
			case 2:
				dx, dy = w-1-x, y
			case 3:
				dx, dy = w-1-x, h-1-y
			case 4:
				dx, dy = x, h-1-y
			case 5:
				dx, dy = y, x
			case 6:
				dx, dy = h-1-y, x
			case 7:
				dx, dy = h-1-y, w-1-x
			case 8:
				dx, dy = y, w-1-x
			}
			si := m.PixOffset(m.Rect.Min.X+x, m.Rect.Min.Y+y)
			di := out.PixOffset(dx, dy)
			copy(out.Pix[di:di+4], m.Pix[si:si+4])
		}
	}
	return out
}

// chromaShifts returns how many bits a luma coordinate is shifted right to
// index the chroma planes, across and down.
func chromaShifts(r image.YCbCrSubsampleRatio) (hs, vs uint, ok bool) {
	switch r {
	case image.YCbCrSubsampleRatio444:
		return 0, 0, true
	case image.YCbCrSubsampleRatio422:
		return 1, 0, true
	case image.YCbCrSubsampleRatio420:
		return 1, 1, true
	case image.YCbCrSubsampleRatio440:
		return 0, 1, true
	case image.YCbCrSubsampleRatio411:
		return 2, 0, true
	case image.YCbCrSubsampleRatio410:
		return 2, 1, true
	}
	return 0, 0, false
}

// boxShrinkYCbCr is boxShrink for the decoded JPEGs and lossy WebPs that
// are most uploads: it averages the planes as they are and converts only
// the averages to RGB (the conversion is linear), which makes it several
// times faster than converting every pixel first.
func boxShrinkYCbCr(m *image.YCbCr, k int, hs, vs uint) *image.RGBA {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	ow, oh := (w+k-1)/k, (h+k-1)/k
	out := image.NewRGBA(image.Rect(0, 0, ow, oh))
	sums := make([]uint64, ow*3)
	for oy := range oh {
		y0, y1 := oy*k, min(oy*k+k, h)
		clear(sums)
		for y := y0; y < y1; y++ {
			yr := m.Y[y*m.YStride : y*m.YStride+w]
			cy := (y >> vs) * m.CStride
			cb, cr := m.Cb[cy:], m.Cr[cy:]
			for ox := range ow {
				var sy, sb, sr uint32 // at most k ≤ 16384 samples of 255: fits
				for x, end := ox*k, min(ox*k+k, w); x < end; x++ {
					sy += uint32(yr[x])
					sb += uint32(cb[x>>hs])
					sr += uint32(cr[x>>hs])
				}
				s := sums[ox*3 : ox*3+3 : ox*3+3]
				s[0] += uint64(sy)
				s[1] += uint64(sb)
				s[2] += uint64(sr)
			}
		}
		o := out.Pix[oy*out.Stride:]
		for ox := range ow {
			n := uint64((min(ox*k+k, w) - ox*k) * (y1 - y0))
			s := sums[ox*3 : ox*3+3 : ox*3+3]
			r, g, b := color.YCbCrToRGB(uint8((s[0]+n/2)/n), uint8((s[1]+n/2)/n), uint8((s[2]+n/2)/n))
			o[ox*4], o[ox*4+1], o[ox*4+2], o[ox*4+3] = r, g, b, 0xff
		}
	}
	return out
}
