package probe

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"testing"
)

func inspectBytes(t testing.TB, b []byte, lim Limits) (Info, Thumb) {
	t.Helper()
	info, th, err := Inspect(bytes.NewReader(b), int64(len(b)), "", lim)
	if err != nil {
		t.Fatal(err)
	}
	return info, th
}

func decodeThumb(t testing.TB, th Thumb) image.Image {
	t.Helper()
	m, err := jpeg.Decode(bytes.NewReader(th.JPEG))
	if err != nil {
		t.Fatalf("thumbnail is not a JPEG: %v", err)
	}
	if b := m.Bounds(); b.Dx() != th.Width || b.Dy() != th.Height {
		t.Fatalf("thumbnail is %v, Thumb says %dx%d", b, th.Width, th.Height)
	}
	return m
}

// near reports whether c is within tol of want in each of R, G and B.
func near(c color.Color, want color.RGBA, tol int) bool {
	r, g, b, _ := c.RGBA()
	d := func(a uint32, w uint8) bool { x := int(a>>8) - int(w); return x >= -tol && x <= tol }
	return d(r, want.R) && d(g, want.G) && d(b, want.B)
}

func TestInspectFormats(t *testing.T) {
	var gifBytes bytes.Buffer
	if err := gif.Encode(&gifBytes, solid(400, 200, color.RGBA{0, 0, 255, 255}), nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		file         []byte
		ct           string
		w, h, tw, th int
	}{
		{"jpeg", encodeJPEG(t, solid(1000, 500, color.RGBA{200, 30, 30, 255})), "image/jpeg", 1000, 500, 320, 160},
		{"png", encodePNG(t, solid(300, 900, color.RGBA{30, 200, 30, 255})), "image/png", 300, 900, 107, 320},
		{"gif", gifBytes.Bytes(), "image/gif", 400, 200, 320, 160},
		{"small png is not enlarged", encodePNG(t, solid(40, 30, color.White)), "image/png", 40, 30, 40, 30},
		{"webp lossy", readTestdata(t, "blue-purple-pink.lossy.webp"), "image/webp", 150, 100, 150, 100},
		{"webp lossless alpha", readTestdata(t, "gopher-doc.with-alpha.lossless.webp"), "image/webp", 0, 0, 0, 0},
		{"webp VP8X alpha", readTestdata(t, "yellow_rose.lossy-with-alpha.webp"), "image/webp", 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, th := inspectBytes(t, tt.file, Limits{})
			if info.ContentType != tt.ct {
				t.Errorf("ContentType = %q, want %q", info.ContentType, tt.ct)
			}
			if tt.w != 0 && (info.Width != tt.w || info.Height != tt.h) {
				t.Errorf("size %dx%d, want %dx%d", info.Width, info.Height, tt.w, tt.h)
			}
			if tt.tw != 0 && (th.Width != tt.tw || th.Height != tt.th) {
				t.Errorf("thumbnail %dx%d, want %dx%d", th.Width, th.Height, tt.tw, tt.th)
			}
			if max(th.Width, th.Height) > DefaultThumbSide || th.Width < 1 || th.Height < 1 {
				t.Errorf("thumbnail %dx%d", th.Width, th.Height)
			}
			if len(info.Blurhash) != 4+2*4*3 {
				t.Errorf("blurhash %q", info.Blurhash)
			}
			decodeThumb(t, th)

			// Probe and Thumbnail are the halves of Inspect.
			p, err := Probe(bytes.NewReader(tt.file), int64(len(tt.file)), tt.ct, Limits{})
			if err != nil || p != info {
				t.Errorf("Probe = %+v, %v; Inspect said %+v", p, err, info)
			}
			th2, err := Thumbnail(bytes.NewReader(tt.file), int64(len(tt.file)), tt.ct, Limits{})
			if err != nil || !bytes.Equal(th2.JPEG, th.JPEG) {
				t.Errorf("Thumbnail differs from Inspect's: %v", err)
			}
		})
	}
}

func TestThumbSide(t *testing.T) {
	_, th := inspectBytes(t, encodePNG(t, solid(1000, 10, color.White)), Limits{ThumbSide: 100})
	if th.Width != 100 || th.Height != 1 {
		t.Errorf("thumbnail %dx%d, want 100x1", th.Width, th.Height)
	}
}

// A JPEG thumbnail has no alpha: transparency is shown over white, as a
// chat shows a sticker on a light background.
func TestTransparentOverWhite(t *testing.T) {
	m := image.NewNRGBA(image.Rect(0, 0, 600, 600)) // all transparent
	for y := range 300 {
		for x := range 600 {
			m.Set(x, y, color.NRGBA{0, 0, 255, 255}) // top half opaque blue
		}
	}
	_, th := inspectBytes(t, encodePNG(t, m), Limits{})
	out := decodeThumb(t, th)
	if c := out.At(160, 40); !near(c, color.RGBA{0, 0, 255, 255}, 8) {
		t.Errorf("opaque half is %v, want blue", c)
	}
	if c := out.At(160, 280); !near(c, color.RGBA{255, 255, 255, 255}, 8) {
		t.Errorf("transparent half is %v, want white", c)
	}
}

// A GIF's thumbnail is its first frame, placed on its screen.
func TestGIFFirstFrame(t *testing.T) {
	pal := color.Palette{color.RGBA{255, 0, 0, 255}, color.RGBA{0, 255, 0, 255}, color.Transparent}
	first := image.NewPaletted(image.Rect(0, 0, 100, 50), pal) // left half of the screen, red
	second := image.NewPaletted(image.Rect(0, 0, 200, 50), pal)
	for i := range second.Pix {
		second.Pix[i] = 1 // green
	}
	var b bytes.Buffer
	err := gif.EncodeAll(&b, &gif.GIF{
		Image:  []*image.Paletted{first, second},
		Delay:  []int{10, 10},
		Config: image.Config{ColorModel: pal, Width: 200, Height: 50},
	})
	if err != nil {
		t.Fatal(err)
	}
	info, th := inspectBytes(t, b.Bytes(), Limits{})
	if info.Width != 200 || info.Height != 50 {
		t.Errorf("size %dx%d, want the screen's 200x50", info.Width, info.Height)
	}
	out := decodeThumb(t, th)
	if c := out.At(20, 25); !near(c, color.RGBA{255, 0, 0, 255}, 16) {
		t.Errorf("first frame's area is %v, want red", c)
	}
	if c := out.At(th.Width-20, 25); !near(c, color.RGBA{255, 255, 255, 255}, 16) {
		t.Errorf("area the first frame leaves is %v, want white (transparent)", c)
	}
}

// Each orientation must put the stored image's corners where a viewer
// shows them. The stored image is 64x32 with a red top-left corner and a
// green top-right corner; the expected places are from the EXIF 2.3 table
// (row 0 / column 0 of the stored image as displayed).
func TestOrientation(t *testing.T) {
	const w, h = 64, 32
	stored := solid(w, h, color.RGBA{128, 128, 128, 255})
	for y := range 12 {
		for x := range 12 {
			stored.Set(x, y, color.RGBA{255, 0, 0, 255})
			stored.Set(w-1-x, y, color.RGBA{0, 255, 0, 255})
		}
	}
	plain := encodeJPEG(t, stored)
	type corner int
	const (
		topLeft corner = iota
		topRight
		bottomRight
		bottomLeft
	)
	tests := []struct {
		o          int
		red, green corner
	}{
		{1, topLeft, topRight},
		{2, topRight, topLeft},       // mirrored
		{3, bottomRight, bottomLeft}, // 180°
		{4, bottomLeft, bottomRight}, // flipped
		{5, topLeft, bottomLeft},     // transposed
		{6, topRight, bottomRight},   // 90° clockwise to show
		{7, bottomRight, topRight},   // transversed
		{8, bottomLeft, topLeft},     // 90° counter-clockwise to show
		{0, topLeft, topRight},       // invalid: shown as stored
		{9, topLeft, topRight},       // invalid
	}
	for _, bo := range []binary.ByteOrder{binary.BigEndian, binary.LittleEndian} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%v/%d", bo, tt.o), func(t *testing.T) {
				file := withSegment(plain, exifSegment(tt.o, bo))
				info, th := inspectBytes(t, file, Limits{})
				dw, dh := w, h
				if tt.o >= 5 && tt.o <= 8 {
					dw, dh = h, w
				}
				if info.Width != dw || info.Height != dh {
					t.Errorf("size %dx%d, want %dx%d", info.Width, info.Height, dw, dh)
				}
				out := decodeThumb(t, th)
				if b := out.Bounds(); b.Dx() != dw || b.Dy() != dh {
					t.Fatalf("thumbnail %v, want %dx%d", b, dw, dh)
				}
				at := func(c corner) color.Color {
					switch c {
					case topLeft:
						return out.At(2, 2)
					case topRight:
						return out.At(dw-3, 2)
					case bottomRight:
						return out.At(dw-3, dh-3)
					}
					return out.At(2, dh-3)
				}
				if c := at(tt.red); !near(c, color.RGBA{255, 0, 0, 255}, 40) {
					t.Errorf("red corner %d is %v", tt.red, c)
				}
				if c := at(tt.green); !near(c, color.RGBA{0, 255, 0, 255}, 40) {
					t.Errorf("green corner %d is %v", tt.green, c)
				}
			})
		}
	}
}

// The thumbnail is re-encoded from pixels: the original's EXIF, with its
// GPS position, is not in it.
func TestThumbnailHasNoMetadata(t *testing.T) {
	file := withSegment(encodeJPEG(t, solid(500, 400, color.White)), exifSegment(6, binary.BigEndian))
	if !bytes.Contains(file, []byte("GPS-SECRET-LOCATION")) {
		t.Fatal("test input carries no GPS marker")
	}
	th, err := Thumbnail(bytes.NewReader(file), int64(len(file)), "image/jpeg", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range jpegSegments(t, th.JPEG) {
		if m >= 0xe0 && m <= 0xef || m == 0xfe {
			t.Errorf("thumbnail has an APP%d/COM segment (%#x)", m-0xe0, m)
		}
	}
	for _, s := range []string{"Exif", "GPS-SECRET-LOCATION", "MM\x00*"} {
		if bytes.Contains(th.JPEG, []byte(s)) {
			t.Errorf("thumbnail contains %q", s)
		}
	}
}

// The box filter averages: a one-pixel checkerboard becomes mid-grey,
// where point sampling would give black or white (aliasing).
func TestBoxShrinkAverages(t *testing.T) {
	m := image.NewGray(image.Rect(0, 0, 64, 48))
	for y := range 48 {
		for x := range 64 {
			if (x+y)%2 == 0 {
				m.SetGray(x, y, color.Gray{255})
			}
		}
	}
	out := boxShrink(m, 4)
	if b := out.Bounds(); b.Dx() != 16 || b.Dy() != 12 {
		t.Fatalf("shrunk to %v", b)
	}
	for i := 0; i < len(out.Pix); i += 4 {
		if v := out.Pix[i]; v < 127 || v > 128 || out.Pix[i+3] != 255 {
			t.Fatalf("pixel %d is %v, want 127-128 grey", i/4, out.Pix[i:i+4])
		}
	}
	// Uneven edges: 10 = 4+4+2 columns, 7 = 4+3 rows; each block averages
	// only its own pixels.
	edge := boxShrink(solid(10, 7, color.RGBA{10, 20, 30, 255}), 4)
	if b := edge.Bounds(); b.Dx() != 3 || b.Dy() != 2 {
		t.Fatalf("shrunk to %v", b)
	}
	for i := 0; i < len(edge.Pix); i += 4 {
		if got := edge.Pix[i : i+4]; !bytes.Equal(got, []byte{10, 20, 30, 255}) {
			t.Fatalf("pixel %d is %v", i/4, got)
		}
	}
}

func TestExifOrientationMalformed(t *testing.T) {
	good := exifSegment(6, binary.LittleEndian)[10:] // the TIFF part
	if o := exifOrientation(good); o != 6 {
		t.Fatalf("orientation %d, want 6", o)
	}
	for _, tt := range []struct {
		name string
		t    []byte
	}{
		{"empty", nil},
		{"short", good[:7]},
		{"bad byte order", append([]byte("XX"), good[2:]...)},
		{"bad magic", append([]byte("II\x2b\x00"), good[4:]...)},
		{"IFD past end", append(append([]byte{}, good[:4]...), 0xff, 0xff, 0, 0)},
		{"entries cut", good[:8+2+6]},
		{"wrong type", func() []byte { b := append([]byte{}, good...); b[8+2+2] = 4; return b }()},
	} {
		if o := exifOrientation(tt.t); o != 1 {
			t.Errorf("%s: orientation %d, want 1", tt.name, o)
		}
	}
}
