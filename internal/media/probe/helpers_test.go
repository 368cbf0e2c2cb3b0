package probe

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"testing"
)

// The WebP files in testdata are from golang.org/x/image's testdata (BSD
// licence, The Go Authors): a lossy one, a lossless one with alpha, and a
// lossy one with an ALPH chunk in the extended (VP8X) format.

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// solid returns a w×h image of c.
func solid(w, h int, c color.Color) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, c)
		}
	}
	return m
}

func encodeJPEG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodePNG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// exifSegment builds an APP1 Exif segment whose IFD0 holds Orientation o
// and a GPS IFD with a latitude, in the byte order given.
func exifSegment(o int, bo binary.ByteOrder) []byte {
	var t bytes.Buffer
	if bo == binary.LittleEndian {
		t.WriteString("II")
	} else {
		t.WriteString("MM")
	}
	w16 := func(v uint16) { binary.Write(&t, bo, v) }
	w32 := func(v uint32) { binary.Write(&t, bo, v) }
	w16(42)
	w32(8) // IFD0 right after the header
	// IFD0: 2 entries, then the next-IFD offset.
	w16(2)
	w16(0x0112) // Orientation
	w16(3)      // SHORT
	w32(1)
	w16(uint16(o))
	w16(0)
	const gpsIFD = 8 + 2 + 2*12 + 4
	w16(0x8825) // GPSInfo IFD pointer
	w16(4)      // LONG
	w32(1)
	w32(gpsIFD)
	w32(0) // no IFD1
	// GPS IFD: GPSLatitudeRef "N"; enough to carry a location marker.
	w16(1)
	w16(0x0001)
	w16(2) // ASCII
	w32(2)
	t.WriteString("N\x00\x00\x00")
	w32(0)
	t.WriteString("GPS-SECRET-LOCATION")

	body := append([]byte("Exif\x00\x00"), t.Bytes()...)
	seg := []byte{0xff, 0xe1, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(len(body)+2))
	return append(seg, body...)
}

// withSegment inserts seg right after a JPEG's SOI, where cameras put EXIF.
func withSegment(j, seg []byte) []byte {
	out := append([]byte{}, j[:2]...)
	out = append(out, seg...)
	return append(out, j[2:]...)
}

// jpegSegments returns the markers of a JPEG's header segments, up to SOS.
func jpegSegments(t testing.TB, j []byte) []byte {
	t.Helper()
	if len(j) < 4 || j[0] != 0xff || j[1] != 0xd8 {
		t.Fatalf("not a JPEG: % x", j[:min(len(j), 4)])
	}
	var ms []byte
	for i := 2; i+4 <= len(j); {
		if j[i] != 0xff {
			t.Fatalf("no marker at %d", i)
		}
		m := j[i+1]
		ms = append(ms, m)
		if m == 0xda {
			break
		}
		i += 2 + int(binary.BigEndian.Uint16(j[i+2:]))
	}
	return ms
}

type failingReaderAt struct{ err error }

func (f failingReaderAt) ReadAt(p []byte, off int64) (int, error) { return 0, f.err }

// failAfter serves b but fails every read that reaches past n.
type failAfter struct {
	b   []byte
	n   int64
	err error
}

func (f failAfter) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.n {
		return 0, f.err
	}
	return bytes.NewReader(f.b).ReadAt(p, off)
}
