package probe

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
)

// maxJPEGScans bounds a progressive JPEG's scans. image/jpeg walks every
// block of the image once per scan, so a few KB of empty scans make a CPU
// bomb; encoders write about 10 (libjpeg's default script) and rarely more
// than 20.
const maxJPEGScans = 100

var errJPEGMarkers = errors.New("malformed JPEG marker stream")

// jpegLayout is what scanJPEG finds in a JPEG's markers.
type jpegLayout struct {
	orientation int  // EXIF orientation, 1 when there is none
	scans       int  // SOS markers, counted to maxJPEGScans+1
	progressive bool // SOF2: image/jpeg keeps every coefficient until the end
}

// scanJPEG walks a JPEG's markers to the end of the file, or until it has
// seen more than maxJPEGScans scans. On an error it returns what it found
// before it.
//
// EXIF is read by hand: only the orientation is wanted, and the Go EXIF
// libraries are either unmaintained since 2019 (rwcarlsen/goexif) or bring
// five dependencies and panic-based errors (dsoprea/go-exif). Reading one
// tag of IFD0 inside a segment of at most 64 KB needs no library.
func scanJPEG(r io.Reader) (l jpegLayout, err error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReader(r)
	}
	l.orientation = 1
	var soi [2]byte
	if _, err := io.ReadFull(br, soi[:]); err != nil {
		return l, err
	}
	if soi != [2]byte{0xff, 0xd8} {
		return l, errJPEGMarkers
	}
	sawExif := false
	var next byte // a marker already read at the end of a scan's data
	for {
		m := next
		if next = 0; m == 0 {
			if m, err = nextMarker(br); err != nil {
				return l, err
			}
		}
		switch {
		case m == 0xd9: // EOI
			return l, nil
		case m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7):
			continue // no length
		}
		var length [2]byte
		if _, err := io.ReadFull(br, length[:]); err != nil {
			return l, err
		}
		n := int(binary.BigEndian.Uint16(length[:])) - 2
		if n < 0 {
			return l, errJPEGMarkers
		}
		if m == 0xc2 {
			l.progressive = true
		}
		if m == 0xe1 && !sawExif && l.scans == 0 {
			seg := make([]byte, n) // at most 64 KB by the format
			if _, err := io.ReadFull(br, seg); err != nil {
				return l, err
			}
			if tiff, ok := bytes.CutPrefix(seg, []byte("Exif\x00\x00")); ok {
				sawExif = true
				l.orientation = exifOrientation(tiff)
			}
		} else if _, err := br.Discard(n); err != nil {
			return l, err
		}
		if m != 0xda { // not SOS
			continue
		}
		if l.scans++; l.scans > maxJPEGScans {
			return l, nil
		}
		if next, err = skipScan(br); err != nil {
			return l, err
		}
	}
}

// skipScan reads past a scan's entropy-coded data and returns the code of
// the marker that ends it: the first 0xFF not followed by 0x00 (a stuffed
// byte) or a restart marker.
func skipScan(br *bufio.Reader) (byte, error) {
	for {
		if _, err := br.ReadSlice(0xff); err != nil {
			if err == bufio.ErrBufferFull {
				continue
			}
			return 0, err
		}
		c, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		switch {
		case c == 0x00 || (c >= 0xd0 && c <= 0xd7):
			continue
		case c == 0xff:
			// A fill byte; the marker code is after it.
			if err := br.UnreadByte(); err != nil {
				return 0, err
			}
			continue
		}
		return c, nil
	}
}

// nextMarker returns the code of the next marker, skipping what lies
// before its 0xFF as image/jpeg does: a scan count that stopped at junk the
// decoder skips would let scans past the limit.
func nextMarker(br *bufio.Reader) (byte, error) {
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != 0xff {
			continue
		}
		for c == 0xff { // fill bytes
			if c, err = br.ReadByte(); err != nil {
				return 0, err
			}
		}
		if c != 0 { // 0xFF00 is no marker
			return c, nil
		}
	}
}

// exifOrientation returns the Orientation tag (0x0112) of IFD0 in a TIFF
// structure, or 1 (upright) if it has none or it is malformed.
func exifOrientation(t []byte) int {
	if len(t) < 8 {
		return 1
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 1
	}
	if bo.Uint16(t[2:]) != 42 {
		return 1
	}
	off := uint64(bo.Uint32(t[4:]))
	if off < 8 || off+2 > uint64(len(t)) {
		return 1
	}
	n := uint64(bo.Uint16(t[off:]))
	for i := range n {
		e := off + 2 + 12*i
		if e+12 > uint64(len(t)) {
			break
		}
		if bo.Uint16(t[e:]) != 0x0112 {
			continue
		}
		// SHORT (3), one value, held in the first two bytes of the value
		// field in either byte order.
		if bo.Uint16(t[e+2:]) != 3 || bo.Uint32(t[e+4:]) != 1 {
			return 1
		}
		if v := int(bo.Uint16(t[e+8:])); v >= 1 && v <= 8 {
			return v
		}
		return 1
	}
	return 1
}
