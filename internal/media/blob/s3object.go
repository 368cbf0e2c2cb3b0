package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	// s3Block is the unit small ReadAt calls fetch and keep: one block per
	// open object, so a parser's many small reads near each other cost one
	// request. ReadAt of a block or more goes straight into the caller's
	// slice.
	s3Block = 64 << 10
	// s3Skip is how far forward Read reads through its open response
	// rather than starting a new one after a Seek.
	s3Skip = 256 << 10
)

var errNegativeOffset = errors.New("blob: negative offset")

// s3Object reads an S3 object through ranged GETs. Read streams one
// response from the offset to the end of the object, started when needed
// and dropped when a Seek moves away from it; ReadAt makes a request per
// call, or per block for small calls. Nothing holds more than one block.
type s3Object struct {
	ctx  context.Context
	s    *S3
	key  *string // S3 key
	name string  // blob key, for errors
	size int64
	mod  time.Time
	etag *string // every GET requires it: the object read is the object opened

	closed atomic.Bool

	mu      sync.Mutex    // guards pos, body and bodyPos: Read and Seek
	pos     int64         // offset of the next Read
	body    io.ReadCloser // response being read, or nil
	bodyPos int64         // offset of body's next byte

	bmu      sync.Mutex // guards block, blockOff and blockLen: ReadAt's cache
	block    []byte     // s3Block bytes once used
	blockOff int64      // offset of block[0]; -1 when it holds nothing
	blockLen int        // valid bytes in block
}

func (o *s3Object) Size() int64        { return o.size }
func (o *s3Object) ModTime() time.Time { return o.mod }

func (o *s3Object) Read(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed.Load() {
		return 0, ErrClosed
	}
	if err := o.ctx.Err(); err != nil {
		return 0, err
	}
	if o.pos >= o.size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if o.body != nil && o.bodyPos != o.pos {
		if d := o.pos - o.bodyPos; d > 0 && d <= s3Skip {
			if m, err := io.CopyN(io.Discard, o.body, d); err == nil {
				o.bodyPos += m
			}
		}
		if o.bodyPos != o.pos {
			o.dropBody()
		}
	}
	if o.body == nil {
		body, err := o.get(o.pos, o.size-1)
		if err != nil {
			return 0, err
		}
		o.body, o.bodyPos = body, o.pos
	}
	if rem := o.size - o.pos; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := o.body.Read(p)
	o.pos += int64(n)
	o.bodyPos += int64(n)
	switch {
	case err == io.EOF && o.pos < o.size:
		o.dropBody()
		return n, fmt.Errorf("blob: read %q: %w", o.name, io.ErrUnexpectedEOF)
	case err == io.EOF:
		o.dropBody()
		return n, nil
	case err != nil:
		o.dropBody()
		return n, fmt.Errorf("blob: read %q: %w", o.name, err)
	}
	return n, nil
}

func (o *s3Object) dropBody() {
	if o.body != nil {
		o.body.Close()
		o.body = nil
	}
}

func (o *s3Object) Seek(offset int64, whence int) (int64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed.Load() {
		return 0, ErrClosed
	}
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = o.pos + offset
	case io.SeekEnd:
		abs = o.size + offset
	default:
		return 0, fmt.Errorf("blob: seek: whence %d", whence)
	}
	if abs < 0 {
		return 0, errNegativeOffset
	}
	o.pos = abs // the response is kept or dropped at the next Read
	return abs, nil
}

func (o *s3Object) ReadAt(p []byte, off int64) (int, error) {
	if o.closed.Load() {
		return 0, ErrClosed
	}
	if err := o.ctx.Err(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errNegativeOffset
	}
	if off >= o.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), o.size-off)
	var n int
	var err error
	if want >= s3Block {
		n, err = o.readRange(p[:want], off)
	} else {
		n, err = o.readBlocks(p[:want], off)
	}
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// readBlocks fills p from the cached block, fetching the blocks it needs.
func (o *s3Object) readBlocks(p []byte, off int64) (int, error) {
	o.bmu.Lock()
	defer o.bmu.Unlock()
	n := 0
	for n < len(p) {
		at := off + int64(n)
		start := at - at%s3Block
		if o.blockOff != start {
			if o.block == nil {
				o.block = make([]byte, s3Block)
			}
			o.blockOff = -1
			m, err := o.readRange(o.block[:min(s3Block, o.size-start)], start)
			if err != nil {
				return n, err
			}
			o.blockOff, o.blockLen = start, m
		}
		n += copy(p[n:], o.block[at-start:o.blockLen])
	}
	return n, nil
}

// readRange fills p with the bytes at off with one GET.
func (o *s3Object) readRange(p []byte, off int64) (int, error) {
	body, err := o.get(off, off+int64(len(p))-1)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	n, err := io.ReadFull(body, p)
	if err != nil {
		return n, fmt.Errorf("blob: read %q: %w", o.name, err)
	}
	return n, nil
}

// get requests bytes first to last (inclusive) of the opened object.
func (o *s3Object) get(first, last int64) (io.ReadCloser, error) {
	out, err := o.s.client.GetObject(o.ctx, &s3.GetObjectInput{
		Bucket:  &o.s.cfg.Bucket,
		Key:     o.key,
		Range:   aws.String(fmt.Sprintf("bytes=%d-%d", first, last)),
		IfMatch: o.etag,
	})
	if err != nil {
		return nil, s3Err("read", o.name, err)
	}
	if got := aws.ToInt64(out.ContentLength); got != last-first+1 {
		out.Body.Close()
		return nil, fmt.Errorf("blob: read %q: asked for %d bytes at %d, got a response of %d", o.name, last-first+1, first, got)
	}
	return out.Body, nil
}

func (o *s3Object) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed.Swap(true) {
		return ErrClosed
	}
	o.dropBody()
	return nil
}
