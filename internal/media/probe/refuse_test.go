package probe

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"hash/crc32"
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

func TestTooLarge(t *testing.T) {
	wide := encodePNG(t, solid(400, 2, color.White))
	// A JPEG whose SOF claims 60000x60000.
	huge := encodeJPEG(t, solid(16, 16, color.White))
	sof := bytes.Index(huge, []byte{0xff, 0xc0})
	binary.BigEndian.PutUint16(huge[sof+5:], 60000)
	binary.BigEndian.PutUint16(huge[sof+7:], 60000)

	tests := []struct {
		name string
		file []byte
		lim  Limits
	}{
		{"pixels", encodePNG(t, solid(100, 100, color.White)), Limits{MaxPixels: 9999}},
		{"side", wide, Limits{MaxSide: 399}},
		{"bytes", wide, Limits{MaxBytes: int64(len(wide)) - 1}},
		{"jpeg declaring 60000x60000", huge, Limits{}},
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
	// The plain file's scan count is 1 and its EXIF-less orientation 1.
	o, scans, err := scanJPEG(bytes.NewReader(j))
	if o != 1 || scans != 1 || err != nil {
		t.Errorf("scanJPEG = %d, %d, %v; want 1, 1, nil", o, scans, err)
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
