package blob

import (
	"context"
	"fmt"
	"strings"

	"github.com/tus/tusd/v2/pkg/handler"
	"github.com/tus/tusd/v2/pkg/memorylocker"
	"github.com/tus/tusd/v2/pkg/s3store"
)

const (
	// s3TusPartSize is the part size tusd's s3store aims for (its default,
	// 50 MiB, buffers a lot on disk per upload); it grows parts itself
	// for uploads too large for 10000 of them.
	s3TusPartSize = 8 << 20
	// s3TusParts is how many parts of one upload s3store may hold on disk
	// while one is being sent.
	s3TusParts = 4
)

// TusKey maps a tus upload id, "<object id>+<S3 multipart upload id>" as
// s3store makes them, to "uploads/<object id>".
func (s *S3) TusKey(uploadID string) (string, error) {
	obj, ok := s3TusObject(uploadID)
	if !ok {
		return "", fmt.Errorf("%w: tus upload id %q", ErrInvalidKey, clip(uploadID))
	}
	return tusPrefix + obj, nil
}

// s3TusObject returns the object part of a tus upload id, if it is one
// this store makes.
func s3TusObject(uploadID string) (string, bool) {
	i := strings.LastIndexByte(uploadID, '+')
	if i < 0 || i == len(uploadID)-1 || !validTusID(uploadID[:i]) {
		return "", false
	}
	return uploadID[:i], true
}

// UseInTus installs tusd's s3store on the same bucket under
// <Prefix>uploads/.
func (s *S3) UseInTus(composer *handler.StoreComposer) {
	st := s3store.New(s.cfg.Bucket, s.client)
	st.ObjectPrefix = s.cfg.Prefix + tusPrefix
	st.TemporaryDirectory = s.cfg.TusTempDir
	st.PreferredPartSize = s3TusPartSize
	st.MaxBufferedParts = s3TusParts
	w := s3TusStore{st}
	composer.UseCore(w)
	composer.UseTerminater(w)
	composer.UseLengthDeferrer(w)
	composer.UseContentServer(w)
	composer.UseConcater(nil)
	if !composer.UsesLocker {
		memorylocker.New().UseIn(composer)
	}
}

// s3TusStore is tusd's s3store accepting only upload ids this Store makes,
// so TusKey always names the upload's object.
type s3TusStore struct {
	s3store.S3Store
}

func (s s3TusStore) NewUpload(ctx context.Context, info handler.FileInfo) (handler.Upload, error) {
	if info.ID != "" && !validTusID(info.ID) || len(info.Storage) != 0 {
		return nil, errTusID
	}
	return s.S3Store.NewUpload(ctx, info)
}

func (s s3TusStore) GetUpload(ctx context.Context, id string) (handler.Upload, error) {
	if _, ok := s3TusObject(id); !ok {
		return nil, handler.ErrNotFound
	}
	return s.S3Store.GetUpload(ctx, id)
}

var (
	_ handler.DataStore               = s3TusStore{}
	_ handler.TerminaterDataStore     = s3TusStore{}
	_ handler.LengthDeferrerDataStore = s3TusStore{}
	_ handler.ContentServerDataStore  = s3TusStore{}
)
