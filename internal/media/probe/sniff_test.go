package probe

import (
	"archive/zip"
	"bytes"
	"image/color"
	"image/gif"
	"math/rand/v2"
	"testing"
)

func TestSniff(t *testing.T) {
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	f, _ := zw.Create("a.txt")
	f.Write([]byte("hello"))
	zw.Close()

	var gifBytes bytes.Buffer
	gif.Encode(&gifBytes, solid(4, 4, color.White), nil)

	random := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}

	// An EBML header with DocType "webm", as a browser's MediaRecorder writes.
	webm := []byte{0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 0x01, 0x42, 0xf7, 0x81, 0x01,
		0x42, 0xf2, 0x81, 0x04, 0x42, 0xf3, 0x81, 0x08, 0x42, 0x82, 0x84, 'w', 'e', 'b', 'm',
		0x42, 0x87, 0x81, 0x04, 0x42, 0x85, 0x81, 0x02}
	// MPEG-1 Layer III frames, 128 kbit/s at 44.1 kHz: 417 bytes each.
	var mp3 []byte
	for range 4 {
		mp3 = append(mp3, 0xff, 0xfb, 0x90, 0x00)
		mp3 = append(mp3, make([]byte, 413)...)
	}
	// An Ogg page whose first packet is an Opus header.
	ogg := append([]byte("OggS\x00\x02"), make([]byte, 20)...)
	ogg = append(ogg, 1, 19)
	ogg = append(ogg, "OpusHead\x01\x02\x38\x01\x80\xbb\x00\x00\x00\x00\x00"...)

	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"jpeg", encodeJPEG(t, solid(8, 8, color.White)), "image/jpeg"},
		{"png", encodePNG(t, solid(8, 8, color.White)), "image/png"},
		{"gif", gifBytes.Bytes(), "image/gif"},
		{"webp", readTestdata(t, "blue-purple-pink.lossy.webp"), "image/webp"},
		{"mp4", movie("isom", 1000, 5000, 640, 480, false), "video/mp4"},
		{"m4a", movie("M4A ", 44100, 44100*3, 0, 0, false), "audio/mp4"},
		{"mov", movie("qt  ", 600, 600, 640, 480, false), "video/quicktime"},
		{"webm", webm, "video/webm"},
		{"mp3", mp3, "audio/mpeg"},
		{"ogg", ogg, "audio/ogg"},
		{"pdf", []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n"), "application/pdf"},
		{"zip", zipped.Bytes(), "application/zip"},
		{"text", []byte("hello, world\nsecond line\n"), "text/plain; charset=utf-8"},
		{"random", random, "application/octet-stream"},
		{"svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), "image/svg+xml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sniff(tt.b); got != tt.want {
				t.Errorf("Sniff = %q, want %q", got, tt.want)
			}
		})
	}
}

// A head longer than SniffBytes is cut: what lies past it cannot change the
// answer, so callers need read no more.
func TestSniffReadsOnlySniffBytes(t *testing.T) {
	text := bytes.Repeat([]byte("a"), SniffBytes)
	if got := Sniff(append(text, 0xff, 0x00, 0xfe)); got != "text/plain; charset=utf-8" {
		t.Errorf("Sniff = %q", got)
	}
}

func TestAllowed(t *testing.T) {
	tests := []struct {
		ct       string
		patterns []string
		want     bool
	}{
		{"image/png", []string{"image/*"}, true},
		{"image/png", []string{"video/mp4", "image/png"}, true},
		{"IMAGE/PNG", []string{"image/png"}, true},
		{"text/plain; charset=utf-8", []string{"text/plain"}, true},
		{"text/plain", []string{"text/plain; charset=utf-8"}, true},
		{"video/mp4", []string{"*/*"}, true},
		{"video/webm", []string{"video/mp4"}, false},
		{"application/zip", []string{"image/*", "video/*"}, false},
		{"image/png", nil, false},
		{"image/png", []string{"*"}, false},
		{"image/png", []string{"image"}, false},
		{"image/png", []string{"*/png"}, false},
		{"", []string{"*/*"}, false},
		{"garbage", []string{"*/*"}, false},
		{"image/", []string{"image/*"}, false},
	}
	for _, tt := range tests {
		if got := Allowed(tt.ct, tt.patterns); got != tt.want {
			t.Errorf("Allowed(%q, %q) = %v, want %v", tt.ct, tt.patterns, got, tt.want)
		}
	}
}

func TestSameType(t *testing.T) {
	tests := []struct {
		declared, sniffed string
		want              bool
	}{
		{"image/png", "image/png", true},
		{"Image/PNG; q=1", "image/png", true},
		{"audio/x-m4a", "audio/mp4", true},
		{"audio/x-mp4a", "audio/mp4", true}, // mimetype's alias
		{"text/plain", "text/plain; charset=utf-8", true},
		{"image/jpeg", "image/png", false},
		{"application/octet-stream", "image/png", false},
	}
	for _, tt := range tests {
		if got := sameType(tt.declared, tt.sniffed); got != tt.want {
			t.Errorf("sameType(%q, %q) = %v, want %v", tt.declared, tt.sniffed, got, tt.want)
		}
	}
}
