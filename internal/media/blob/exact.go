package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// errNegativeSize is Put's answer to a size below -1.
var errNegativeSize = errors.New("blob: size must be -1 (unknown) or at least 0")

// exactReader passes on the bytes of r and fails unless there are exactly
// size of them (any number when size is -1). It checks that r has nothing
// more before it hands over the last byte, so a backend that commits an
// object once it has received size bytes never gets them from a source
// that is too long. It also stops with ctx's error once ctx is done.
type exactReader struct {
	ctx   context.Context
	r     io.Reader
	size  int64 // as given to Put; -1 unknown
	left  int64 // bytes still expected when size >= 0
	done  bool  // all size bytes given and r seen to end
	given int64 // bytes given so far
	err   error // the first error returned other than io.EOF
}

// newExactReader wraps r; a nil r is empty.
func newExactReader(ctx context.Context, r io.Reader, size int64) *exactReader {
	if r == nil {
		r = eofReader{}
	}
	return &exactReader{ctx: ctx, r: r, size: size, left: size}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

func (e *exactReader) Read(p []byte) (int, error) {
	n, err := e.read1(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

func (e *exactReader) read1(p []byte) (int, error) {
	if err := e.ctx.Err(); err != nil {
		return 0, err
	}
	if e.size < 0 {
		n, err := e.r.Read(p)
		e.given += int64(n)
		return n, err
	}
	if e.done {
		return 0, io.EOF
	}
	if e.left == 0 { // size 0, or the last call handed over the rest with r's EOF unseen
		if err := e.probe(); err != nil {
			return 0, err
		}
		e.done = true
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	e.given += int64(n)
	switch {
	case err == io.EOF && e.left > 0:
		return n, fmt.Errorf("%w: reader ended after %d of %d bytes", ErrSizeMismatch, e.given, e.size)
	case err == io.EOF:
		e.done = true
		return n, nil
	case err != nil:
		return n, err
	case e.left == 0:
		// Withhold the last bytes until r is known to end here.
		if err := e.probe(); err != nil {
			return 0, err
		}
		e.done = true
	}
	return n, nil
}

// probe reads ahead once all size bytes were read: r must be at its end.
func (e *exactReader) probe() error {
	var b [1]byte
	for range 100 {
		n, err := e.r.Read(b[:])
		if n > 0 {
			return fmt.Errorf("%w: reader has more than %d bytes", ErrSizeMismatch, e.size)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}
