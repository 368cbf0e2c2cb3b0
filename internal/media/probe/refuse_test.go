package probe

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// pngChunk appends a PNG chunk of typ and data to b.
func pngChunk(b []byte, typ string, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	start := len(b)
	b = append(b, typ...)
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}

// pngBomb is a valid w×h 1-bit greyscale PNG, all black, written chunk by
// chunk so that neither the test nor the file holds the pixels: a decoder
// would allocate w×h bytes for it. Deflate cannot compress more than about
// 1:1000, so 30000×30000 at one bit a pixel is ~130 KB of IDAT.
func pngBomb(t testing.TB, w, h int) []byte {
	t.Helper()
	b := []byte("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 1, 0, 0, 0, 0) // depth 1, greyscale, deflate, no filter, not interlaced
	b = pngChunk(b, "IHDR", ihdr)
	var idat bytes.Buffer
	z, _ := zlib.NewWriterLevel(&idat, zlib.BestSpeed)
	row := make([]byte, 1+(w+7)/8) // filter byte 0, then the bits
	for range h {
		z.Write(row)
	}
	z.Close()
	b = pngChunk(b, "IDAT", idat.Bytes())
	return pngChunk(b, "IEND", nil)
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestDecompressionBomb(t *testing.T) {
	bomb := pngBomb(t, 30000, 30000)
	if len(bomb) > 200<<10 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	var err error
	n := allocated(func() {
		_, _, err = Inspect(bytes.NewReader(bomb), int64(len(bomb)), "image/png", Limits{})
	})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Inspect: %v, want ErrTooLarge", err)
	}
	// Refused from the header: nothing near the 900 MB of pixels, nor
	// even the file, was allocated.
	if n > 256<<10 {
		t.Errorf("refusing the bomb allocated %d bytes", n)
	}
	t.Logf("%d-byte file declaring 30000x30000: %v; %d bytes allocated", len(bomb), err, n)
}

// pngHeader is a PNG of w×h at the given bit depth and colour type whose
// pixel data is missing: enough for DecodeConfig, which is all a refusal
// may read.
func pngHeader(w, h int, depth, colorType byte) []byte {
	b := []byte("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, depth, colorType, 0, 0, 0)
	b = pngChunk(b, "IHDR", ihdr)
	return pngChunk(b, "IEND", nil)
}

// sofJPEG is a small JPEG whose SOF is changed to the given marker and
// w×h: enough for DecodeConfig and the marker walk.
func sofJPEG(t *testing.T, marker byte, w, h int) []byte {
	j := encodeJPEG(t, solid(16, 16, color.White))
	sof := bytes.Index(j, []byte{0xff, 0xc0})
	j[sof+1] = marker
	binary.BigEndian.PutUint16(j[sof+5:], uint16(h))
	binary.BigEndian.PutUint16(j[sof+7:], uint16(w))
	return j
}

func TestTooLarge(t *testing.T) {
	wide := encodePNG(t, solid(400, 2, color.White))

	tests := []struct {
		name string
		file []byte
		lim  Limits
	}{
		{"pixels", encodePNG(t, solid(100, 100, color.White)), Limits{MaxPixels: 9999}},
		{"side", wide, Limits{MaxSide: 399}},
		{"bytes", wide, Limits{MaxBytes: int64(len(wide)) - 1}},
		{"jpeg declaring 60000x60000", sofJPEG(t, 0xc0, 60000, 60000), Limits{}},
		// Within 50 MP, but decoding would take 450 MB (coefficients).
		{"progressive jpeg of 30 MP", sofJPEG(t, 0xc2, 6000, 5000), Limits{}},
		// Within 50 MP, but 8 bytes a pixel: 320 MB from a few bytes.
		{"16-bit RGBA png of 40 MP", pngHeader(8000, 5000, 16, 6), Limits{}},
		{"png bomb under small limits", pngBomb(t, 2000, 2000), Limits{MaxPixels: 1 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Inspect(bytes.NewReader(tt.file), int64(len(tt.file)), "", tt.lim)
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("Inspect: %v, want ErrTooLarge", err)
			}
		})
	}
	// What a phone sends gets through the default budget.
	for _, tt := range []struct {
		name        string
		cfg         image.Config
		progressive bool
		want        int64
	}{
		{"12 MP progressive JPEG", image.Config{ColorModel: color.YCbCrModel, Width: 4000, Height: 3000}, true, 180e6},
		{"50 MP JPEG", image.Config{ColorModel: color.YCbCrModel, Width: 10000, Height: 5000}, false, 150e6},
		{"50 MP RGBA PNG", image.Config{ColorModel: color.NRGBAModel, Width: 10000, Height: 5000}, false, 200e6},
	} {
		c := decodeCost(tt.cfg, tt.progressive)
		if c != tt.want || c > DefaultMaxDecode {
			t.Errorf("%s: cost %d, want %d within %d", tt.name, c, tt.want, DefaultMaxDecode)
		}
	}
	// At the limits exactly, it is fine.
	if _, _, err := Inspect(bytes.NewReader(wide), int64(len(wide)), "", Limits{MaxSide: 400, MaxPixels: 800, MaxBytes: int64(len(wide))}); err != nil {
		t.Errorf("at the limits: %v", err)
	}
}

// A progressive JPEG makes image/jpeg walk the whole image once per scan;
// thousands of empty scans cost nothing to send. They are refused before
// any decoding.
func TestJPEGScanBomb(t *testing.T) {
	j := encodeJPEG(t, solid(16, 16, color.White))
	sos := bytes.Index(j, []byte{0xff, 0xda})
	bomb := append([]byte{}, j[:sos]...)
	for range maxJPEGScans + 1 {
		bomb = append(bomb, 0xff, 0xda, 0, 8, 1, 1, 0, 0, 0x3f, 0, 0x12, 0x34)
	}
	bomb = append(bomb, 0xff, 0xd9)
	_, _, err := Inspect(bytes.NewReader(bomb), int64(len(bomb)), "", Limits{})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "scans") {
		t.Errorf("Inspect: %v, want ErrTooLarge for scans", err)
	}
	// The plain file: one scan, baseline, no EXIF.
	l, err := scanJPEG(bytes.NewReader(j))
	if l != (jpegLayout{orientation: 1, scans: 1}) || err != nil {
		t.Errorf("scanJPEG = %+v, %v", l, err)
	}
}

func TestCorrupt(t *testing.T) {
	j := encodeJPEG(t, solid(300, 200, color.RGBA{1, 2, 3, 255}))
	p := encodePNG(t, solid(300, 200, color.RGBA{1, 2, 3, 255}))
	w := readTestdata(t, "blue-purple-pink.lossy.webp")
	tests := []struct {
		name string
		file []byte
		size int64
	}{
		{"truncated jpeg", j[:len(j)/2], -1},
		{"jpeg header only", j[:200], -1},
		{"truncated png", p[:len(p)-30], -1},
		{"truncated webp", w[:len(w)/2], -1},
		{"png with bad crc", func() []byte { b := append([]byte{}, p...); b[len(b)-20] ^= 0xff; return b }(), -1},
		{"size larger than the file", j, int64(len(j)) + 1000},
		{"png zero width", func() []byte { b := append([]byte{}, p...); copy(b[16:20], []byte{0, 0, 0, 0}); return b }(), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size := tt.size
			if size < 0 {
				size = int64(len(tt.file))
			}
			_, _, err := Inspect(bytes.NewReader(tt.file), size, "", Limits{})
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("Inspect: %v, want ErrCorrupt", err)
			}
		})
	}
	if _, err := Probe(bytes.NewReader(nil), -1, "", Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("negative size: %v, want ErrCorrupt", err)
	}
}

// Files that are not images are probed for their type, and have no
// thumbnail.
func TestNotAnImage(t *testing.T) {
	random := make([]byte, 10000)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	f, _ := zw.Create("photo.jpg")
	f.Write(encodeJPEG(t, solid(8, 8, color.White)))
	zw.Close()

	for _, tt := range []struct {
		name, ct string
		file     []byte
	}{
		{"random", "application/octet-stream", random},
		{"zip of a jpeg", "application/zip", zipped.Bytes()},
		{"empty", "text/plain", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			info, th, err := Inspect(bytes.NewReader(tt.file), int64(len(tt.file)), "", Limits{})
			if err != nil || info != (Info{ContentType: tt.ct}) || th.JPEG != nil {
				t.Errorf("Inspect = %+v, %d thumbnail bytes, %v; want only ContentType %q", info, len(th.JPEG), err, tt.ct)
			}
			if _, err := Thumbnail(bytes.NewReader(tt.file), int64(len(tt.file)), "", Limits{}); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Thumbnail: %v, want ErrUnsupported", err)
			}
		})
	}
}

// The type recorded for a file must be what its bytes are: checks made on
// a client's "image/jpeg" do not hold for the PNG (or HTML) it sent.
func TestDeclaredTypeMismatch(t *testing.T) {
	p := encodePNG(t, solid(10, 10, color.White))
	for _, declared := range []string{"image/jpeg", "application/pdf", "text/html"} {
		if _, _, err := Inspect(bytes.NewReader(p), int64(len(p)), declared, Limits{}); !errors.Is(err, ErrMismatch) {
			t.Errorf("declared %s: %v, want ErrMismatch", declared, err)
		}
	}
	for _, declared := range []string{"", "image/png", "IMAGE/PNG; foo=bar"} {
		if info, _, err := Inspect(bytes.NewReader(p), int64(len(p)), declared, Limits{}); err != nil || info.ContentType != "image/png" {
			t.Errorf("declared %q: %+v, %v", declared, info, err)
		}
	}
}

// A storage fault is reported as itself, not as a corrupt file: the caller
// retries the one, and gives up on the other.
func TestReadError(t *testing.T) {
	fault := errors.New("disk on fire")
	j := encodeJPEG(t, solid(300, 200, color.White))
	mov := movie("isom", 1000, 5000, 640, 480, false)
	for _, tt := range []struct {
		name string
		r    io.ReaderAt
		size int64
	}{
		{"head", failingReaderAt{fault}, 100},
		{"jpeg body", failAfter{j, SniffBytes / 8, fault}, int64(len(j))},
		{"moov", failAfter{mov, int64(len(mov)) - 100, fault}, int64(len(mov))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Inspect(tt.r, tt.size, "", Limits{})
			if !errors.Is(err, fault) || errors.Is(err, ErrCorrupt) {
				t.Errorf("Inspect: %v, want the read error", err)
			}
		})
	}
}

// panicReader panics when read, as a decoder with a bug does on input.
type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("index out of range [7] with length 3") }

func TestDecoderPanicRecovered(t *testing.T) {
	for _, format := range []string{"jpeg", "png", "gif", "webp"} {
		for _, configOnly := range []bool{true, false} {
			_, _, err := decodeImage(format, panicReader{}, configOnly)
			if err == nil || !strings.Contains(err.Error(), "panicked") {
				t.Errorf("%s: %v, want the panic as an error", format, err)
			}
			if err := (&reader{}).failure(format, err); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: reported as %v, want ErrCorrupt", format, err)
			}
		}
	}
}

// image/jpeg skips junk between segments, so the marker walk must too:
// else junk would hide an orientation, or scans past the limit.
func TestJPEGJunkBetweenSegments(t *testing.T) {
	j := encodeJPEG(t, solid(64, 32, color.White))
	seg := append(exifSegment(6, binary.BigEndian), "junk\xff\x00junk"...)
	file := withSegment(j, seg)
	info, _ := inspectBytes(t, file, Limits{})
	if info.Width != 32 || info.Height != 64 {
		t.Errorf("size %dx%d, want 32x64 (orientation 6)", info.Width, info.Height)
	}

	sos := bytes.Index(j, []byte{0xff, 0xda})
	bomb := append([]byte{}, j[:sos]...)
	for range maxJPEGScans + 1 {
		bomb = append(bomb, "junk"...)
		bomb = append(bomb, 0xff, 0xda, 0, 8, 1, 1, 0, 0, 0x3f, 0, 0x12, 0x34)
	}
	bomb = append(bomb, 0xff, 0xd9)
	if _, _, err := Inspect(bytes.NewReader(bomb), int64(len(bomb)), "", Limits{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("scans behind junk: %v, want ErrTooLarge", err)
	}
}
