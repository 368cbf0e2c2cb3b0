// Package probe finds out what an uploaded file is from its bytes, and makes
// the thumbnail and placeholder a chat shows for it.
//
// It is a library for the media pipeline, called off the request path:
// no HTTP, no storage, no goroutines, no package state. Files are read
// through an io.ReaderAt so a caller can hand in a blob store's reader
// without copying the file into memory first.
//
//   - Sniff and Allowed decide the type from the bytes, never from the
//     client, and check it against an allow-list.
//   - Inspect reads a file once and returns its Info (type, displayed size,
//     duration, blurhash) and, for images, a JPEG thumbnail. Probe and
//     Thumbnail are the halves of it; each costs one decode, so a caller
//     that wants both calls Inspect.
//
// Images (JPEG, PNG, GIF's first frame, WebP) are decoded; audio and video
// are not: MP4-family files (MP4, MOV, M4A, 3GP) give their duration and
// video size from the moov box headers, which are read without reading the
// media data. WebM, Ogg and MP3 report their type only: their durations
// need a walk of the stream (and WebMs recorded by browsers carry none).
//
// Untrusted input is bounded before it is decoded: an image's declared
// size is checked against Limits before any pixel is allocated
// (ErrTooLarge), progressive JPEGs with absurd scan counts are refused, and
// a panic in a decoder becomes ErrCorrupt. An I/O error from the reader is
// returned as itself, so a storage fault is not mistaken for a bad file.
//
// Thumbnails are re-encoded from pixels, so no metadata (EXIF, GPS, ICC,
// comments) of the original survives into them; EXIF orientation is
// applied first, so thumbnails and Width/Height are as a viewer shows them.
//
// Cost: a 12-megapixel baseline JPEG takes about half a second, most of
// it in image/jpeg's decode, and allocates 30 MB: 18 MB is the decoded
// image, the rest is bounded by the thumbnail's size (BenchmarkInspect12MP).
// A progressive JPEG also makes image/jpeg hold every DCT coefficient until
// its last scan, 6 bytes a pixel at 4:2:0 (72 MB at 12 MP); MaxDecodeBytes
// counts them.
package probe

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Errors, to be checked with errors.Is; the error text adds the detail.
var (
	// ErrTooLarge: the file or the image it declares exceeds Limits.
	ErrTooLarge = errors.New("probe: too large")
	// ErrUnsupported: no thumbnail can be made of this type.
	ErrUnsupported = errors.New("probe: unsupported type")
	// ErrCorrupt: the bytes start like a known type but do not decode,
	// or end before their own structure says (a truncated upload or a
	// size larger than the file).
	ErrCorrupt = errors.New("probe: corrupt or truncated")
	// ErrMismatch: the caller declared a type the bytes are not.
	ErrMismatch = errors.New("probe: content does not match declared type")
)

// Limits bounds the work done for one file. The zero value is the defaults.
type Limits struct {
	// MaxPixels is the most pixels (width × height) an image may declare
	// and still be decoded. Zero or less: 50,000,000.
	MaxPixels int64
	// MaxSide is the longest side, in pixels, an image may declare.
	// Zero or less: 16384.
	MaxSide int
	// MaxDecodeBytes is the most memory, in bytes, decoding one image may
	// take, estimated from its header before it is decoded: its pixels at
	// the decoded bytes per pixel (1 grey or paletted, 3 YCbCr, 4 RGBA,
	// 8 at 16 bits), plus 4 bytes per pixel and component for a
	// progressive JPEG's coefficients. A 12 MP progressive JPEG is at most
	// 180 MB, a 50 MP baseline one 150 MB. Zero or less: 256 MiB.
	MaxDecodeBytes int64
	// MaxBytes is the largest image file, in bytes, that is decoded.
	// Audio and video are read only at their headers and are not bounded
	// by it. Zero or less: 64 MiB.
	MaxBytes int64
	// ThumbSide is the longest side of a thumbnail, in pixels; smaller
	// images are not enlarged. Zero or less: 320.
	ThumbSide int
}

// Defaults for the zero Limits.
const (
	DefaultMaxPixels = 50_000_000
	DefaultMaxSide   = 16384
	DefaultMaxDecode = 256 << 20
	DefaultMaxBytes  = 64 << 20
	DefaultThumbSide = 320
)

func (l Limits) withDefaults() Limits {
	if l.MaxPixels <= 0 {
		l.MaxPixels = DefaultMaxPixels
	}
	if l.MaxSide <= 0 {
		l.MaxSide = DefaultMaxSide
	}
	if l.MaxDecodeBytes <= 0 {
		l.MaxDecodeBytes = DefaultMaxDecode
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.ThumbSide <= 0 {
		l.ThumbSide = DefaultThumbSide
	}
	return l
}

// Info is what is known about a file. Fields not known for its type are
// zero.
type Info struct {
	// ContentType is the type sniffed from the bytes (see Sniff).
	ContentType string
	// Width and Height are in pixels as displayed: after EXIF orientation
	// for JPEG, after the track matrix's rotation for MP4-family video.
	Width, Height int
	// Duration of MP4-family audio and video, from the movie header.
	Duration time.Duration
	// Blurhash is a placeholder for images (blurha.sh), about 28
	// characters.
	Blurhash string
}

// Thumb is a JPEG thumbnail.
type Thumb struct {
	// JPEG is the encoded image: quality 80, no metadata.
	JPEG []byte
	// Width and Height are in pixels, the longer at most Limits.ThumbSide.
	Width, Height int
}

// Probe returns what is known about the file: r's first size bytes.
// contentType is the type the caller recorded for it (Sniff's answer at
// upload), or "" to have it sniffed here; the bytes are sniffed in any case,
// and a recorded type they contradict is ErrMismatch, since checks made on
// that type (an allow-list, how it is served) were made on the wrong one.
// Types it knows nothing more of are returned with only ContentType set.
func Probe(r io.ReaderAt, size int64, contentType string, lim Limits) (Info, error) {
	info, _, err := inspect(r, size, contentType, lim, false)
	return info, err
}

// Thumbnail makes a JPEG thumbnail of an image, as Inspect does. Other
// types are ErrUnsupported.
func Thumbnail(r io.ReaderAt, size int64, contentType string, lim Limits) (Thumb, error) {
	info, th, err := inspect(r, size, contentType, lim, true)
	if err == nil && th.JPEG == nil {
		return Thumb{}, fmt.Errorf("%w: %s", ErrUnsupported, info.ContentType)
	}
	return th, err
}

// Inspect is Probe and Thumbnail with one read and one decode of the file.
// The Thumb is zero for types that have none (anything but an image).
func Inspect(r io.ReaderAt, size int64, contentType string, lim Limits) (Info, Thumb, error) {
	return inspect(r, size, contentType, lim, true)
}

func inspect(r io.ReaderAt, size int64, declared string, lim Limits, wantThumb bool) (Info, Thumb, error) {
	lim = lim.withDefaults()
	if size < 0 {
		return Info{}, Thumb{}, fmt.Errorf("%w: negative size %d", ErrCorrupt, size)
	}
	src := &reader{r: r}
	head := make([]byte, min(size, SniffBytes))
	if err := src.readFull(head, 0); err != nil {
		return Info{}, Thumb{}, err
	}
	info := Info{ContentType: Sniff(head)}
	if declared != "" && !sameType(declared, info.ContentType) {
		return Info{}, Thumb{}, fmt.Errorf("%w: declared %s, bytes are %s", ErrMismatch, declared, info.ContentType)
	}
	switch essence(info.ContentType) {
	case "image/jpeg", "image/png", "image/gif", "image/webp":
		return inspectImage(src, size, info, lim, wantThumb)
	case "video/mp4", "video/quicktime", "video/x-m4v", "video/3gpp", "video/3gpp2", "audio/mp4":
		w, h, d, err := readMovie(src, size)
		if err != nil {
			return Info{}, Thumb{}, err
		}
		info.Width, info.Height, info.Duration = w, h, d
	}
	return info, Thumb{}, nil
}

// reader is the caller's ReaderAt with its errors sorted: running out of
// bytes is the file's fault (ErrCorrupt), anything else is the reader's and
// is kept, so that a decoder's failure after a read error can be reported
// as that I/O error rather than as a corrupt file.
type reader struct {
	r     io.ReaderAt
	ioErr error // first error from r other than running out of bytes
}

func (s *reader) ReadAt(p []byte, off int64) (int, error) {
	n, err := s.r.ReadAt(p, off)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF && s.ioErr == nil {
		s.ioErr = err
	}
	return n, err
}

// readFull reads len(p) bytes at off; a short file is ErrCorrupt.
func (s *reader) readFull(p []byte, off int64) error {
	n, err := s.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if s.ioErr != nil {
		return s.ioErr
	}
	if err == nil || err == io.EOF {
		return fmt.Errorf("%w: file ends at %d, before byte %d", ErrCorrupt, off+int64(n), off+int64(len(p)))
	}
	return err
}

// failure is the error to report for a decoder's err: the reader's I/O
// error if there was one, else ErrCorrupt with the decoder's words.
func (s *reader) failure(what string, err error) error {
	if s.ioErr != nil {
		return s.ioErr
	}
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
}
