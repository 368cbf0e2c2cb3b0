// Package blob is where the bytes of uploaded files live: one narrow Store
// interface with two implementations, Local (files under a directory,
// the default) and S3 (any S3-compatible object store, AWS's by default),
// checked by one conformance suite (package blobtest).
//
// # Keys
//
// Objects are named by keys the server makes up, such as "f/ab/<random id>".
// Every method validates its key anyway (CheckKey): slash-separated, no
// empty, "." or ".." elements, no element starting with "." or longer than
// MaxKeyElemLen, no leading slash, backslash, NUL or control bytes, valid
// UTF-8, at most MaxKeyLen bytes. Local also opens every path through an os.Root, so no key and no
// symbolic link can reach outside its directory.
//
// # Atomicity
//
// Put makes an object visible only once all of its bytes are stored, and a
// Put that fails (short or long reader, reader error, cancelled context,
// full disk) leaves no object and no partial bytes behind; an object that
// was already under the key stays. Local writes a temporary file, fsyncs
// it and renames it into place. S3 sends one PutObject: streamed over
// https with a trailing checksum, so a server refuses a body cut short;
// otherwise buffered, hashed and signed (over plain http a server may keep
// a cut-short unsigned body: versitygw does). A buffered body larger than
// one 8 MiB part goes as a multipart upload, aborted on failure.
//
// # Resumable uploads (tus)
//
// Every Store also backs a tusd handler (github.com/tus/tusd/v2): UseInTus
// puts the Store's tusd data store into a handler.StoreComposer, and
// TusKey maps a tus upload id to the key under which the upload's bytes
// can be read through the same Store. A tus upload is visible under its key
// only once it is complete (Local checks the upload's .info; S3 completes
// the multipart upload only at the end). The keys under "uploads/" belong
// to tusd: Put refuses them, Open, Stat and Delete accept them.
//
// Local keeps tus uploads in <root>/uploads (tusd's filestore); S3 keeps
// them under <Prefix>uploads/ in the same bucket (tusd's s3store, which
// buffers each part in a temporary file on local disk before sending it).
// Neither removes uploads that were started and abandoned; something must
// sweep them (an S3 lifecycle rule for incomplete multipart uploads, an age
// check for Local).
//
// UseInTus gives the composer tusd's in-memory locker unless it already has
// a locker. That lock lives in one process: with several nodes in front of
// one S3 bucket, every request of one tus upload must reach the same node
// (route by upload id), or the composer must be given a locker shared by
// the nodes before UseInTus; two nodes writing one upload at once without a
// shared lock can corrupt it. Local's files are on one node's disk anyway.
//
// # Serving
//
// An Object is an io.ReadSeeker and io.ReaderAt with its size and
// modification time, so net/http.ServeContent can answer range requests
// from it. S3 objects read through ranged GETs and hold at most a small
// block in memory, never the whole object. S3's PresignGet hands out a
// time-limited URL to the object itself; Local answers ErrNotSupported, as
// Parley serves local files itself under its own signed URLs.
package blob

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/tus/tusd/v2/pkg/handler"
)

// Errors a Store returns; compare with errors.Is, as they come wrapped.
var (
	// ErrNotFound: no complete object is stored under the key.
	ErrNotFound = errors.New("blob: not found")
	// ErrNotSupported: the backend does not offer the operation
	// (PresignGet on Local).
	ErrNotSupported = errors.New("blob: not supported")
	// ErrInvalidKey: the key fails CheckKey, or names tusd's space for Put,
	// or a tus upload id is not one this Store makes.
	ErrInvalidKey = errors.New("blob: invalid key")
	// ErrSizeMismatch: Put's reader gave more or fewer bytes than its size.
	ErrSizeMismatch = errors.New("blob: size mismatch")
	// ErrClosed: the Object or Store was closed.
	ErrClosed = errors.New("blob: closed")
)

// Store holds objects by key. All methods are safe for concurrent use.
type Store interface {
	// Put stores exactly size bytes read from r under key, replacing any
	// object there; size -1 means unknown (read r to EOF). The object
	// becomes visible only once complete. If r gives more or fewer bytes
	// than size, Put fails with ErrSizeMismatch; on any failure nothing new
	// is visible under key. contentType is kept where the backend can serve
	// it (S3's Content-Type); it is not returned by Stat or Open, as the
	// caller's records hold it. Keys under "uploads/" are refused.
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error

	// Open returns the object under key for reading, or ErrNotFound. The
	// Object reads under ctx: once ctx is done its reads fail. The caller
	// closes it.
	Open(ctx context.Context, key string) (Object, error)

	// Stat returns the size and modification time of the object under key,
	// or ErrNotFound.
	Stat(ctx context.Context, key string) (Info, error)

	// Delete removes the object under key. Deleting a missing object is not
	// an error. Deleting a tus upload's key also removes tusd's record of it.
	Delete(ctx context.Context, key string) error

	// PresignGet returns a URL that fetches the object under key with a
	// plain GET for ttl (1 s to 7 days), without credentials. A non-empty
	// downloadName makes the response an attachment with that file name;
	// a non-empty contentType overrides the response's Content-Type. The
	// object's existence is not checked. Local returns ErrNotSupported.
	PresignGet(ctx context.Context, key string, ttl time.Duration, downloadName, contentType string) (string, error)

	// UseInTus makes composer's tusd data store this Store's place for tus
	// uploads (core, termination, deferred length and download; not
	// concatenation), and adds tusd's in-memory locker unless composer
	// already has a locker (see the package doc).
	UseInTus(composer *handler.StoreComposer)

	// TusKey returns the key under which the bytes of the tus upload
	// uploadID can be read once the upload is complete, or ErrInvalidKey
	// for an id this Store's tus uploads cannot have.
	TusKey(uploadID string) (string, error)

	// Close releases the Store's resources. Objects opened before must be
	// closed by their owners; methods called after Close may fail.
	Close() error
}

// Info describes a stored object.
type Info struct {
	Size    int64     // bytes
	ModTime time.Time // when it was stored
}

// Object is an open stored object. Read and Seek share one offset and,
// like an *os.File's, are for one goroutine at a time; ReadAt may be called
// from several goroutines at once and does not move the offset.
type Object interface {
	io.ReadSeeker
	io.ReaderAt
	io.Closer
	// Size is the object's length in bytes.
	Size() int64
	// ModTime is when the object was stored.
	ModTime() time.Time
}
