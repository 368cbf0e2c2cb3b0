package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// mp4Box is an ISO BMFF box of typ around body.
func mp4Box(typ string, body ...[]byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = append(b, typ...)
	for _, p := range body {
		b = append(b, p...)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	return b
}

func mvhd0(timescale, duration uint32) []byte {
	b := make([]byte, 100) // version 0 is 100 bytes of body
	binary.BigEndian.PutUint32(b[12:], timescale)
	binary.BigEndian.PutUint32(b[16:], duration)
	return mp4Box("mvhd", b)
}

func mvhd1(timescale uint32, duration uint64) []byte {
	b := make([]byte, 112)
	b[0] = 1
	binary.BigEndian.PutUint32(b[20:], timescale)
	binary.BigEndian.PutUint64(b[24:], duration)
	return mp4Box("mvhd", b)
}

// tkhd0 is a version 0 track header of w×h; rotate sets the matrix that
// phones write for video held upright (90°).
func tkhd0(w, h int, rotate bool) []byte {
	b := make([]byte, 84)
	m := b[40:76]
	if rotate {
		binary.BigEndian.PutUint32(m[4:], 0x00010000)  // b = 1
		binary.BigEndian.PutUint32(m[12:], 0xffff0000) // c = -1
	} else {
		binary.BigEndian.PutUint32(m[0:], 0x00010000)  // a = 1
		binary.BigEndian.PutUint32(m[16:], 0x00010000) // d = 1
	}
	binary.BigEndian.PutUint32(m[32:], 0x40000000) // w = 1.0 in 2.30
	binary.BigEndian.PutUint32(b[76:], uint32(w)<<16)
	binary.BigEndian.PutUint32(b[80:], uint32(h)<<16)
	return mp4Box("tkhd", b)
}

// movie is an MP4-family file with its moov after the media data, as
// cameras write it: an audio track, then a video track of w×h if w > 0.
func movie(brand string, timescale, duration uint32, w, h int, rotate bool) []byte {
	ftyp := mp4Box("ftyp", []byte(brand), []byte{0, 0, 0, 0}, []byte(brand), []byte("isom"))
	mdat := mp4Box("mdat", bytes.Repeat([]byte{0xaa}, 1000))
	traks := [][]byte{mvhd0(timescale, duration), mp4Box("trak", tkhd0(0, 0, false), mp4Box("mdia"))}
	if w > 0 {
		traks = append(traks, mp4Box("trak", tkhd0(w, h, rotate), mp4Box("mdia")))
	}
	return bytes.Join([][]byte{ftyp, mdat, mp4Box("moov", traks...)}, nil)
}

func TestProbeMovie(t *testing.T) {
	tests := []struct {
		name   string
		file   []byte
		ct     string
		w, h   int
		length time.Duration
	}{
		{"mp4", movie("isom", 1000, 12345, 1920, 1080, false), "video/mp4", 1920, 1080, 12345 * time.Millisecond},
		{"portrait", movie("isom", 90000, 90000*61, 1920, 1080, true), "video/mp4", 1080, 1920, 61 * time.Second},
		{"mov", movie("qt  ", 600, 300, 640, 480, false), "video/quicktime", 640, 480, 500 * time.Millisecond},
		{"m4a", movie("M4A ", 44100, 44100*3+22050, 0, 0, false), "audio/mp4", 0, 0, 3500 * time.Millisecond},
		{"unknown duration", movie("isom", 1000, 0xffffffff, 640, 480, false), "video/mp4", 640, 480, 0},
		{"zero timescale", movie("isom", 0, 100, 640, 480, false), "video/mp4", 640, 480, 0},
		{"mvhd v1, moov first, 64-bit mdat", bytes.Join([][]byte{
			mp4Box("ftyp", []byte("isom\x00\x00\x00\x00isom")),
			mp4Box("moov", mvhd1(1000, 3_600_000_000), mp4Box("trak", tkhd0(320, 240, false))),
			// A box with size 1 and its size in 64 bits.
			append(append([]byte{0, 0, 0, 1}, "mdat"...), binary.BigEndian.AppendUint64(nil, 16+4)...),
			{1, 2, 3, 4},
		}, nil), "video/mp4", 320, 240, 1000 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := Probe(bytes.NewReader(tt.file), int64(len(tt.file)), tt.ct, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			want := Info{ContentType: tt.ct, Width: tt.w, Height: tt.h, Duration: tt.length}
			if info != want {
				t.Errorf("Probe = %+v, want %+v", info, want)
			}
			// A movie has no thumbnail here: its frames are not decoded.
			if _, err := Thumbnail(bytes.NewReader(tt.file), int64(len(tt.file)), "", Limits{}); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Thumbnail: %v, want ErrUnsupported", err)
			}
		})
	}
}

func TestProbeMovieBroken(t *testing.T) {
	good := movie("isom", 1000, 5000, 640, 480, false)
	ftyp := mp4Box("ftyp", []byte("isom\x00\x00\x00\x00isom"))
	many := append([]byte{}, ftyp...)
	for range maxBoxes + 1 {
		many = append(many, mp4Box("free")...)
	}
	tests := []struct {
		name string
		file []byte
		size int64
	}{
		// An upload cut short: mdat says more than is there, moov is lost.
		{"truncated", good[:len(good)-200], int64(len(good) - 200)},
		// The caller's size is larger than the file.
		{"lying size", good[:len(good)-200], int64(len(good))},
		{"no moov", bytes.Join([][]byte{ftyp, mp4Box("mdat", []byte("data"))}, nil), -1},
		{"box smaller than its header", append(append([]byte{}, ftyp...), 0, 0, 0, 4, 'f', 'r', 'e', 'e'), -1},
		{"short mvhd", bytes.Join([][]byte{ftyp, mp4Box("moov", mp4Box("mvhd", []byte{0, 0, 0, 0, 1}))}, nil), -1},
		{"a flood of boxes", many, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size := tt.size
			if size < 0 {
				size = int64(len(tt.file))
			}
			_, err := Probe(bytes.NewReader(tt.file), size, "", Limits{})
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("Probe: %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestMediaDuration(t *testing.T) {
	if d := mediaDuration(1<<64-2, 1); d != 0 {
		t.Errorf("overflowing duration = %v, want 0 (unknown)", d)
	}
	if d := mediaDuration(1<<64-2, 1<<32-1); d <= 0 {
		t.Errorf("large duration = %v", d)
	}
	if d := mediaDuration(1, 3); d != 333333333 {
		t.Errorf("1/3 s = %v", d)
	}
}
