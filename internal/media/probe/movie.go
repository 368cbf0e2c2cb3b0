package probe

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// maxBoxes bounds the boxes walked in one MP4-family file: real files have
// a handful at the top and a few dozen in moov, while a crafted one could
// be millions of 8-byte boxes.
const maxBoxes = 4096

// box is an ISO BMFF box: its type and where its body lies in the file.
type box struct {
	typ       string
	body, end int64
}

// readBox reads the header of the box at off, which must end by end.
func readBox(src *reader, off, end int64) (box, error) {
	var h [16]byte
	if end-off < 8 {
		return box{}, fmt.Errorf("%w: box header at %d overruns its container", ErrCorrupt, off)
	}
	if err := src.readFull(h[:8], off); err != nil {
		return box{}, err
	}
	size, hdr := int64(binary.BigEndian.Uint32(h[:4])), int64(8)
	switch size {
	case 0: // to the end of the file
		size = end - off
	case 1: // 64-bit size after the type
		if end-off < 16 {
			return box{}, fmt.Errorf("%w: box header at %d overruns its container", ErrCorrupt, off)
		}
		if err := src.readFull(h[8:16], off+8); err != nil {
			return box{}, err
		}
		large := binary.BigEndian.Uint64(h[8:16])
		if large > math.MaxInt64 {
			return box{}, fmt.Errorf("%w: box at %d of %d bytes", ErrCorrupt, off, large)
		}
		size, hdr = int64(large), 16
	}
	if size < hdr || size > end-off {
		return box{}, fmt.Errorf("%w: %q box at %d of %d bytes overruns its container (%d bytes left)",
			ErrCorrupt, h[4:8], off, size, end-off)
	}
	return box{typ: string(h[4:8]), body: off + hdr, end: off + size}, nil
}

// readMovie returns the displayed video size (0×0 for audio) and the
// duration of an MP4-family file from its moov box, reading box headers
// and the mvhd and tkhd boxes only, wherever moov is in the file.
func readMovie(src *reader, size int64) (w, h int, d time.Duration, err error) {
	walked := 0
	for off := int64(0); off < size; {
		b, err := readBox(src, off, size)
		if err != nil {
			return 0, 0, 0, err
		}
		if walked++; walked > maxBoxes {
			return 0, 0, 0, fmt.Errorf("%w: more than %d boxes", ErrCorrupt, maxBoxes)
		}
		if b.typ == "moov" {
			return readMoov(src, b, &walked)
		}
		off = b.end
	}
	return 0, 0, 0, fmt.Errorf("%w: no moov box", ErrCorrupt)
}

func readMoov(src *reader, moov box, walked *int) (w, h int, d time.Duration, err error) {
	for off := moov.body; off < moov.end; {
		b, err := readBox(src, off, moov.end)
		if err != nil {
			return 0, 0, 0, err
		}
		if *walked++; *walked > maxBoxes {
			return 0, 0, 0, fmt.Errorf("%w: more than %d boxes", ErrCorrupt, maxBoxes)
		}
		switch b.typ {
		case "mvhd":
			if d, err = readMvhd(src, b); err != nil {
				return 0, 0, 0, err
			}
		case "trak":
			if w == 0 {
				if w, h, err = readTrak(src, b, walked); err != nil {
					return 0, 0, 0, err
				}
			}
		}
		off = b.end
	}
	return w, h, d, nil
}

// readMvhd returns the movie's duration; 0 when it says it is unknown.
func readMvhd(src *reader, b box) (time.Duration, error) {
	var p [32]byte
	n := min(b.end-b.body, int64(len(p)))
	if err := src.readFull(p[:n], b.body); err != nil {
		return 0, err
	}
	// version(1) flags(3), then times: 32-bit in version 0, 64-bit in 1.
	var scale uint32
	var units uint64
	switch {
	case n >= 20 && p[0] == 0:
		scale, units = binary.BigEndian.Uint32(p[12:]), uint64(binary.BigEndian.Uint32(p[16:]))
		if units == math.MaxUint32 {
			return 0, nil
		}
	case n >= 32 && p[0] == 1:
		scale, units = binary.BigEndian.Uint32(p[20:]), binary.BigEndian.Uint64(p[24:])
		if units == math.MaxUint64 {
			return 0, nil
		}
	default:
		return 0, fmt.Errorf("%w: mvhd version %d of %d bytes", ErrCorrupt, p[0], n)
	}
	return mediaDuration(units, scale), nil
}

// mediaDuration converts units of 1/scale s without overflow; a duration
// past time.Duration's 292 years is taken as unknown.
func mediaDuration(units uint64, scale uint32) time.Duration {
	if scale == 0 {
		return 0
	}
	sec := units / uint64(scale)
	if sec > math.MaxInt64/uint64(time.Second)-1 {
		return 0
	}
	frac := units % uint64(scale) * uint64(time.Second) / uint64(scale)
	return time.Duration(sec)*time.Second + time.Duration(frac)
}

// readTrak returns the size of a track from its tkhd: zero for audio.
func readTrak(src *reader, trak box, walked *int) (w, h int, err error) {
	for off := trak.body; off < trak.end; {
		b, err := readBox(src, off, trak.end)
		if err != nil {
			return 0, 0, err
		}
		if *walked++; *walked > maxBoxes {
			return 0, 0, fmt.Errorf("%w: more than %d boxes", ErrCorrupt, maxBoxes)
		}
		if b.typ == "tkhd" {
			return readTkhd(src, b)
		}
		off = b.end
	}
	return 0, 0, nil
}

// readTkhd returns a track's presentation size, turned a quarter when its
// matrix rotates by 90° or 270° (how phones record portrait video).
func readTkhd(src *reader, b box) (w, h int, err error) {
	var p [96]byte
	n := min(b.end-b.body, int64(len(p)))
	if err := src.readFull(p[:n], b.body); err != nil {
		return 0, 0, err
	}
	// After version/flags and the times, track ID and duration (24 bytes
	// in version 0, 36 in 1): reserved(8) layer(2) group(2) volume(2)
	// reserved(2) matrix(36) width(4) height(4), the sizes in 16.16.
	var m int64
	switch {
	case p[0] == 0 && n >= 84:
		m = 40
	case p[0] == 1 && n >= 96:
		m = 52
	default:
		return 0, 0, fmt.Errorf("%w: tkhd version %d of %d bytes", ErrCorrupt, p[0], n)
	}
	a := int32(binary.BigEndian.Uint32(p[m:]))
	bb := int32(binary.BigEndian.Uint32(p[m+4:]))
	c := int32(binary.BigEndian.Uint32(p[m+12:]))
	d := int32(binary.BigEndian.Uint32(p[m+16:]))
	w = int(binary.BigEndian.Uint32(p[m+36:]) >> 16)
	h = int(binary.BigEndian.Uint32(p[m+40:]) >> 16)
	if a == 0 && d == 0 && bb != 0 && c != 0 {
		w, h = h, w
	}
	return w, h, nil
}
