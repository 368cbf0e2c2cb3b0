package media

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/tus/tusd/v2/pkg/handler"
	expslog "golang.org/x/exp/slog"

	"github.com/parleyim/parley/errcode"
	"github.com/parleyim/parley/internal/reqerr"
)

// UploadsPath is where resumable uploads are served (the tus protocol).
const UploadsPath = "/v1/uploads/"

// FileIDHeader names the file a finished upload became, on the answer to
// its last PATCH and on a HEAD of it once finished.
const FileIDHeader = "Parley-File-Id"

// Authenticator tells the user a request is made for (its bearer token).
type Authenticator func(r *http.Request) (uid string, err error)

type uidKey struct{}

// TusHandler serves resumable uploads at UploadsPath with tusd, for the
// users authenticate accepts: a user sees and continues only their own
// uploads (anyone else's, and none, are 404). When an upload's last byte
// is stored it is inspected like a one-request upload; the answer carries
// FileIDHeader, or the error that refused the file (whose bytes are then
// removed).
func (s *Service) TusHandler(authenticate Authenticator) (http.Handler, error) {
	composer := handler.NewStoreComposer()
	s.blobs.UseInTus(composer)
	cors := handler.DefaultCorsConfig
	cors.ExposeHeaders += ", " + FileIDHeader
	h, err := handler.NewHandler(handler.Config{
		BasePath:                  UploadsPath,
		StoreComposer:             composer,
		MaxSize:                   s.cfg.MaxFileBytes,
		DisableDownload:           true,
		DisableConcatenation:      true,
		Cors:                      &cors,
		Logger:                    expslog.New(expslog.NewTextHandler(io.Discard, nil)), // tusd logs each request
		PreUploadCreateCallback:   s.tusCreate,
		PreFinishResponseCallback: s.tusFinish,
	})
	if err != nil {
		return nil, err
	}
	inner := http.StripPrefix(UploadsPath, h)
	core := composer.Core
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			inner.ServeHTTP(w, r) // CORS preflight: no credentials
			return
		}
		uid, err := authenticate(r)
		if err != nil {
			writeTusError(w, err)
			return
		}
		ctx := context.WithValue(r.Context(), uidKey{}, uid)
		if id := strings.TrimPrefix(r.URL.Path, UploadsPath); id != "" && r.Method != http.MethodPost {
			info, err := uploadInfo(ctx, core, id)
			if err != nil || info.MetaData[metaOwner] != uid {
				http.Error(w, "not found", http.StatusNotFound) // another user's, or none
				return
			}
			finished := !info.SizeIsDeferred && info.Offset == info.Size
			if r.Method == http.MethodDelete && finished {
				// A finished upload is a file, which messages may carry: its
				// bytes go with the file, never on their own.
				writeTusError(w, reqerr.Conflict)
				return
			}
			if r.Method == http.MethodHead && finished {
				// Finished: the answer to its last PATCH may have been
				// lost, or its inspection failed for a while. Make sure of
				// the record now.
				f, err := s.finish(ctx, info)
				if err != nil {
					writeTusError(w, err)
					return
				}
				w.Header().Set(FileIDHeader, f)
			}
		}
		r = r.WithContext(ctx)
		if r.Body != nil {
			r.Body = readCloser{s.limitReader(ctx, uid, r.Body), r.Body}
		}
		inner.ServeHTTP(w, r)
	}), nil
}

// Metadata keys the server keeps on an upload (the client's are dropped).
const (
	metaOwner = "parley-owner"
	metaName  = "filename"
)

func uploadInfo(ctx context.Context, core handler.DataStore, id string) (handler.FileInfo, error) {
	u, err := core.GetUpload(ctx, id)
	if err != nil {
		return handler.FileInfo{}, err
	}
	return u.GetInfo(ctx)
}

// tusCreate checks a new upload: its length given and within the limits
// and the quota; it records who makes it.
func (s *Service) tusCreate(hook handler.HookEvent) (handler.HTTPResponse, handler.FileInfoChanges, error) {
	uid, _ := hook.Context.Value(uidKey{}).(string)
	if uid == "" {
		return handler.HTTPResponse{}, handler.FileInfoChanges{}, tusError(reqerr.Unauth)
	}
	up := hook.Upload
	switch {
	case up.SizeIsDeferred || up.Size <= 0:
		return handler.HTTPResponse{}, handler.FileInfoChanges{}, tusError(reqerr.BadRequest)
	case up.Size > s.cfg.MaxFileBytes:
		return handler.HTTPResponse{}, handler.FileInfoChanges{}, tusError(reqerr.TooLarge)
	}
	if err := s.checkQuota(hook.Context, uid, up.Size); err != nil {
		return handler.HTTPResponse{}, handler.FileInfoChanges{}, tusError(err)
	}
	name := up.MetaData[metaName]
	if name == "" {
		name = up.MetaData["name"] // what tus-js-client's examples send
	}
	meta := handler.MetaData{metaOwner: uid, metaName: cleanName(name)}
	return handler.HTTPResponse{}, handler.FileInfoChanges{MetaData: meta}, nil
}

// tusFinish makes the record of an upload whose last byte is stored.
func (s *Service) tusFinish(hook handler.HookEvent) (handler.HTTPResponse, error) {
	id, err := s.finish(hook.Context, hook.Upload)
	if err != nil {
		return handler.HTTPResponse{}, tusError(err)
	}
	return handler.HTTPResponse{Header: handler.HTTPHeader{FileIDHeader: id}}, nil
}

// finish makes (or finds) the record of a finished upload and returns its
// file id. A file refused for good has its upload removed; a temporary
// failure keeps it, for a HEAD to try again.
func (s *Service) finish(ctx context.Context, info handler.FileInfo) (string, error) {
	key, err := s.blobs.TusKey(info.ID)
	if err != nil {
		return "", reqerr.BadRequest
	}
	id := s.fileIDOf(info.ID)
	_, err = s.ingest(ctx, info.MetaData[metaOwner], id, key, cleanName(info.MetaData[metaName]), info.Size)
	if err != nil {
		if err != reqerr.Unavail {
			s.deleteQuietly(key)
		}
		return "", err
	}
	return id, nil
}

// tusError is err as tusd answers it: the status and API code of the
// error table.
func tusError(err error) error {
	var e *reqerr.Error
	if !errors.As(err, &e) {
		e = reqerr.Internal
	}
	i := errcode.Of(e.Code)
	return handler.NewError(i.APICode, i.Text, i.HTTPStatus)
}

func writeTusError(w http.ResponseWriter, err error) {
	var e *reqerr.Error
	if !errors.As(err, &e) {
		e = reqerr.Unauth
	}
	i := errcode.Of(e.Code)
	w.Header().Set("Tus-Resumable", "1.0.0")
	http.Error(w, i.APICode+": "+i.Text, i.HTTPStatus)
}

type readCloser struct {
	io.Reader
	io.Closer
}
