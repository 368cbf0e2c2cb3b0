package media

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/store"
)

// FilesPath is where files are served (GET FilesPath + id, signed).
const FilesPath = "/v1/files/"

// signedPath is the path of a signed download URL served by ServeFile:
// /v1/files/ID?v=VARIANT&e=EXPIRY&s=SIGNATURE.
func (s *Service) signedPath(id string, thumb bool, expires time.Time) string {
	v := variant(thumb)
	e := strconv.FormatInt(expires.Unix(), 10)
	return FilesPath + url.PathEscape(id) + "?v=" + v + "&e=" + e + "&s=" + s.sign(id, v, e)
}

func variant(thumb bool) string {
	if thumb {
		return "t"
	}
	return "f"
}

// sign is the URL signature of a file id, variant and expiry: HMAC-SHA256
// under the service's key, base64url.
func (s *Service) sign(id, v, e string) string {
	m := hmac.New(sha256.New, s.cfg.Key)
	m.Write([]byte("parley file url\x00" + id + "\x00" + v + "\x00" + e))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ServeFile answers GET /v1/files/{id} with a signed URL's bytes, with
// range requests and caching headers. A bad or expired signature is 403
// and a file gone since the URL was made is 404; nothing is said of files
// no URL was made for.
func (s *Service) ServeFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q := r.URL.Query()
	v, e, sig := q.Get("v"), q.Get("e"), q.Get("s")
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || (v != "f" && v != "t") || len(sig) > 64 ||
		!hmac.Equal([]byte(sig), []byte(s.sign(id, v, e))) {
		http.Error(w, "invalid signature", http.StatusForbidden)
		return
	}
	left := time.Until(time.Unix(exp, 0))
	if left <= 0 {
		http.Error(w, "link expired", http.StatusForbidden)
		return
	}
	f, err := s.store.GetFile(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && v == "t" && f.ThumbKey == "") {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	key, ct, name := f.BlobKey, f.ContentType, f.Name
	if v == "t" {
		key, ct, name = f.ThumbKey, "image/jpeg", "thumbnail.jpg"
	}
	obj, err := s.blobs.Open(r.Context(), key)
	if errors.Is(err, blob.ErrNotFound) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if err != nil {
		s.log.Warn("media: opening a file failed", "file", id, "err", err)
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	defer obj.Close()
	h := w.Header()
	typ, disposition := servedAs(ct)
	h.Set("Content-Type", typ)
	h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": name}))
	h.Set("X-Content-Type-Options", "nosniff")
	// A file is never a page of this origin: no scripts, no plugins, no
	// same-origin access, even if a browser is talked into rendering it.
	h.Set("Content-Security-Policy", "default-src 'none'; img-src 'self'; media-src 'self'; style-src 'unsafe-inline'; sandbox")
	h.Set("Cache-Control", "private, max-age="+strconv.FormatInt(int64(left/time.Second), 10)+", immutable")
	h.Set("ETag", `"`+id+"-"+v+`"`) // a file's bytes never change
	http.ServeContent(w, r, "", obj.ModTime(), obj)
}

// servedAs is the Content-Type and disposition a file of content type ct
// is served with: images, audio, video and PDF inline (what a chat shows in
// place); everything else, and anything a browser would run (HTML, SVG,
// XML), as a download of opaque bytes.
func servedAs(ct string) (typ, disposition string) {
	essence := ct
	if i := strings.IndexByte(essence, ';'); i >= 0 {
		essence = essence[:i]
	}
	switch {
	case essence == "image/svg+xml", strings.Contains(essence, "xml"), strings.Contains(essence, "html"),
		strings.Contains(essence, "javascript"):
		return "application/octet-stream", "attachment"
	case strings.HasPrefix(essence, "image/"), strings.HasPrefix(essence, "audio/"),
		strings.HasPrefix(essence, "video/"), essence == "application/pdf":
		return ct, "inline"
	case strings.HasPrefix(essence, "text/plain"):
		return ct, "attachment"
	}
	return ct, "attachment"
}

// servedType is the Content-Type a presigned object URL answers with.
func servedType(ct string) string {
	t, _ := servedAs(ct)
	return t
}
