package blob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tus/tusd/v2/pkg/filestore"
	"github.com/tus/tusd/v2/pkg/handler"
	"github.com/tus/tusd/v2/pkg/memorylocker"
)

// errTusID answers an upload whose id or storage a pre-create hook set to
// something this Store would not make.
var errTusID = handler.NewError("ERR_INVALID_UPLOAD_ID", "upload id or storage not accepted", http.StatusBadRequest)

// maxTusInfo bounds the .info file read to check an upload is complete.
const maxTusInfo = 1 << 20

// TusKey maps a tus upload id to "uploads/<id>".
func (l *Local) TusKey(uploadID string) (string, error) {
	if !validTusID(uploadID) {
		return "", fmt.Errorf("%w: tus upload id %q", ErrInvalidKey, clip(uploadID))
	}
	return tusPrefix + uploadID, nil
}

// UseInTus installs tusd's filestore on <root>/uploads.
func (l *Local) UseInTus(composer *handler.StoreComposer) {
	fs := filestore.New(filepath.Join(l.dir, filepath.FromSlash(tusPrefix)))
	fs.DirModePerm, fs.FileModePerm = localDirPerm, localFilePerm
	s := localTusStore{fs: fs}
	composer.UseCore(s)
	composer.UseTerminater(s)
	composer.UseLengthDeferrer(s)
	composer.UseContentServer(s)
	composer.UseConcater(nil)
	if !composer.UsesLocker {
		memorylocker.New().UseIn(composer)
	}
}

// tusComplete returns nil if the tus upload id is complete at size bytes,
// ErrNotFound if it is unknown or still being uploaded.
func (l *Local) tusComplete(id string, size int64) error {
	if !validTusID(id) {
		return ErrNotFound // "uploads/<id>.info" and the like are tusd's, not objects
	}
	f, err := l.root.Open(tusPrefix + id + ".info")
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTusInfo))
	if err != nil {
		return err
	}
	var info struct {
		Size           int64
		SizeIsDeferred bool
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return fmt.Errorf("tus upload %s: %w", id, err)
	}
	switch {
	case info.SizeIsDeferred || size < info.Size:
		return ErrNotFound // still uploading
	case size > info.Size:
		return fmt.Errorf("tus upload %s holds %d bytes of %d", id, size, info.Size)
	}
	return nil
}

// localTusStore is tusd's filestore that accepts only ids this Store
// makes (so no id or pre-create hook can name a file elsewhere), keeps the
// upload where TusKey says, and fsyncs an upload when it completes.
type localTusStore struct {
	fs filestore.FileStore
}

func (s localTusStore) NewUpload(ctx context.Context, info handler.FileInfo) (handler.Upload, error) {
	if info.ID != "" && !validTusID(info.ID) || len(info.Storage) != 0 {
		return nil, errTusID
	}
	u, err := s.fs.NewUpload(ctx, info)
	if err != nil {
		return nil, err
	}
	return s.wrap(ctx, u)
}

func (s localTusStore) GetUpload(ctx context.Context, id string) (handler.Upload, error) {
	if !validTusID(id) {
		return nil, handler.ErrNotFound
	}
	u, err := s.fs.GetUpload(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.wrap(ctx, u)
}

func (s localTusStore) wrap(ctx context.Context, u handler.Upload) (handler.Upload, error) {
	info, err := u.GetInfo(ctx)
	if err != nil {
		return nil, err
	}
	return &localTusUpload{Upload: u, path: filepath.Join(s.fs.Path, info.ID)}, nil
}

func (s localTusStore) AsTerminatableUpload(u handler.Upload) handler.TerminatableUpload {
	return s.fs.AsTerminatableUpload(unwrapTus(u))
}

func (s localTusStore) AsLengthDeclarableUpload(u handler.Upload) handler.LengthDeclarableUpload {
	return s.fs.AsLengthDeclarableUpload(unwrapTus(u))
}

func (s localTusStore) AsServableUpload(u handler.Upload) handler.ServableUpload {
	return s.fs.AsServableUpload(unwrapTus(u))
}

// unwrapTus gives the filestore back its own upload type, which its As*
// methods assert.
func unwrapTus(u handler.Upload) handler.Upload {
	if w, ok := u.(*localTusUpload); ok {
		return w.Upload
	}
	return u
}

// localTusUpload is a filestore upload whose completion fsyncs its file
// and directory (the filestore does neither), so a completed upload, once
// acknowledged, survives a crash as Put's objects do.
type localTusUpload struct {
	handler.Upload
	path string
}

func (u *localTusUpload) FinishUpload(ctx context.Context) error {
	if err := u.Upload.FinishUpload(ctx); err != nil {
		return err
	}
	for _, name := range []string{u.path, filepath.Dir(u.path)} {
		if err := syncPath(name); err != nil {
			return fmt.Errorf("blob: tus upload: %w", err)
		}
	}
	return nil
}

func syncPath(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

var (
	_ handler.DataStore               = localTusStore{}
	_ handler.TerminaterDataStore     = localTusStore{}
	_ handler.LengthDeferrerDataStore = localTusStore{}
	_ handler.ContentServerDataStore  = localTusStore{}
)

// UploadSweeper is a Store that can remove the resumable uploads that were
// started and never finished. (An S3 bucket does it with a lifecycle rule
// for incomplete multipart uploads instead.)
type UploadSweeper interface {
	// SweepUploads removes the unfinished uploads untouched since cutoff
	// and reports how many.
	SweepUploads(ctx context.Context, cutoff time.Time) (int, error)
}

var _ UploadSweeper = (*Local)(nil)

// SweepUploads removes each upload in <root>/uploads whose bytes are fewer
// than its length and whose files were last written before cutoff.
func (l *Local) SweepUploads(ctx context.Context, cutoff time.Time) (int, error) {
	d, err := l.root.Open(tusPrefix)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n := 0
	for ctx.Err() == nil {
		entries, err := d.ReadDir(256)
		for _, e := range entries {
			id, ok := strings.CutSuffix(e.Name(), ".info")
			if !ok || !validTusID(id) {
				continue
			}
			info, ierr := e.Info()
			data, derr := l.root.Stat(tusPrefix + id)
			size := int64(0)
			if derr == nil {
				size = data.Size()
				if data.ModTime().After(info.ModTime()) {
					info = data
				}
			}
			if ierr != nil || !info.ModTime().Before(cutoff) || l.tusComplete(id, size) == nil {
				continue // recent, or finished: a file's bytes
			}
			_ = l.root.Remove(tusPrefix + id)
			if rerr := l.root.Remove(tusPrefix + id + ".info"); rerr == nil {
				n++
			}
		}
		if err != nil {
			break
		}
	}
	return n, ctx.Err()
}
