package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// FileURL asks for a short-lived URL of a file: one carried by message
// (conversationID, seq), or, with conversationID "", one this user
// uploaded. thumbnail asks for its thumbnail (Attachment.Thumbnail). A
// relative URL is on the server's HTTP address (HTTPClient.Open resolves
// it).
func (c *Client) FileURL(ctx context.Context, fileID, conversationID string, seq uint64, thumbnail bool) (*pb.FileUrlResult, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_FileUrl{FileUrl: &pb.FileUrl{
		FileId: fileID, ConversationId: conversationID, Seq: seq, Thumbnail: thumbnail}}})
	if err != nil {
		return nil, err
	}
	if u := r.GetFileUrl(); u != nil {
		return u, nil
	}
	return nil, ErrProtocol
}

// UploadFile uploads size bytes of r as one request (POST /v1/files) for
// the token's user and returns the attachment describing the file, to put
// in a Send. A dropped connection loses the upload: large files go
// through UploadResumable.
func (h HTTPClient) UploadFile(ctx context.Context, token, name string, r io.Reader, size int64) (*pb.Attachment, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url("/v1/files?name="+url.QueryEscape(name)), r)
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := h.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusCreated {
		return nil, httpError(resp.StatusCode, b)
	}
	var out struct {
		File json.RawMessage `json:"file"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("parley: upload: bad response: %w", err)
	}
	a := &pb.Attachment{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(out.File, a); err != nil {
		return nil, fmt.Errorf("parley: upload: bad response: %w", err)
	}
	return a, nil
}

// Resumable uploads speak tus 1.0.0 (tus.io) with the server at
// /v1/uploads/: create the upload, send bytes from the offset the server
// has, and after a failure ask for that offset again.
const (
	tusVersion   = "1.0.0"
	fileIDHeader = "Parley-File-Id"
)

// ResumableOptions tune UploadResumable. Zero values take the defaults.
type ResumableOptions struct {
	// ChunkBytes is the most sent in one PATCH request. Default 8 MiB.
	ChunkBytes int64
	// Attempts bounds the tries after failures that make no progress
	// (each resumes where the server's copy ends). Default 5.
	Attempts int
	// Location continues an upload created earlier (its URL, as
	// OnCreated reported it), e.g. after the program restarted.
	Location string
	// OnCreated, when set, is told the upload's URL once it exists, to
	// keep for Location.
	OnCreated func(location string)
	// OnProgress, when set, is told the bytes the server holds.
	OnProgress func(sent, size int64)
}

// UploadResumable uploads size bytes of src as a resumable upload for the
// token's user and returns the file's id, to put in a Send's attachments.
// A failed request (a dropped connection, a timeout, a temporary error) is
// resumed from the offset the server holds; an error the server says is
// final (too large, not allowed, over the quota) is returned at once.
func (h HTTPClient) UploadResumable(ctx context.Context, token, name string, src io.ReaderAt, size int64, opts ResumableOptions) (string, error) {
	if opts.ChunkBytes <= 0 {
		opts.ChunkBytes = 8 << 20
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	loc := opts.Location
	if loc == "" {
		var err error
		if loc, err = h.createUpload(ctx, token, name, size); err != nil {
			return "", err
		}
		if opts.OnCreated != nil {
			opts.OnCreated(loc)
		}
	}
	var offset int64
	known := false // whether offset is the server's
	failures := 0
	var lastErr error
	for {
		if !known {
			off, fileID, err := h.uploadOffset(ctx, token, loc)
			if err != nil {
				if final(err) || ctx.Err() != nil {
					return "", err
				}
				failures++
				if failures >= opts.Attempts {
					return "", err
				}
				if err := sleepCtx(ctx, backoffFor(failures)); err != nil {
					return "", err
				}
				continue
			}
			if fileID != "" {
				return fileID, nil
			}
			if off > offset {
				failures = 0 // progress
			}
			offset, known = off, true
		}
		n := min(opts.ChunkBytes, size-offset)
		next, fileID, err := h.patchUpload(ctx, token, loc, offset, io.NewSectionReader(src, offset, n), n)
		if err != nil {
			if final(err) || ctx.Err() != nil {
				return "", err
			}
			lastErr, known = err, false
			failures++
			if failures >= opts.Attempts {
				return "", lastErr
			}
			if err := sleepCtx(ctx, backoffFor(failures)); err != nil {
				return "", err
			}
			continue
		}
		offset, failures = next, 0
		if opts.OnProgress != nil {
			opts.OnProgress(offset, size)
		}
		if fileID != "" {
			return fileID, nil
		}
		if offset >= size {
			known = false // finished, but the answer named no file: ask
		}
	}
}

// createUpload starts a resumable upload and returns its URL.
func (h HTTPClient) createUpload(ctx context.Context, token, name string, size int64) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url("/v1/uploads/"), http.NoBody)
	if err != nil {
		return "", err
	}
	h.tusHeaders(req, token)
	req.Header.Set("Upload-Length", strconv.FormatInt(size, 10))
	req.Header.Set("Upload-Metadata", "filename "+base64.StdEncoding.EncodeToString([]byte(name)))
	resp, err := h.tusDo(req)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusCreated {
		return "", tusError(resp)
	}
	loc, err := resp.Location()
	if err != nil {
		return "", fmt.Errorf("parley: upload: no location: %w", err)
	}
	return loc.String(), nil
}

// uploadOffset asks how many bytes of the upload the server holds, and the
// file's id once it is finished.
func (h HTTPClient) uploadOffset(ctx context.Context, token, loc string) (int64, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, loc, http.NoBody)
	if err != nil {
		return 0, "", err
	}
	h.tusHeaders(req, token)
	resp, err := h.tusDo(req)
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, "", tusError(resp)
	}
	off, err := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("parley: upload: bad Upload-Offset %q", resp.Header.Get("Upload-Offset"))
	}
	return off, resp.Header.Get(fileIDHeader), nil
}

// patchUpload sends n bytes of r at offset; it returns the new offset, and
// the file's id when they were the last.
func (h HTTPClient) patchUpload(ctx context.Context, token, loc string, offset int64, r io.Reader, n int64) (int64, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, loc, r)
	if err != nil {
		return 0, "", err
	}
	req.ContentLength = n
	h.tusHeaders(req, token)
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Upload-Offset", strconv.FormatInt(offset, 10))
	resp, err := h.tusDo(req)
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode != http.StatusNoContent {
		return 0, "", tusError(resp)
	}
	next, err := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("parley: upload: bad Upload-Offset %q", resp.Header.Get("Upload-Offset"))
	}
	return next, resp.Header.Get(fileIDHeader), nil
}

func (h HTTPClient) tusHeaders(req *http.Request, token string) {
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Tus-Resumable", tusVersion)
}

// tusDo sends req and reads the (small) answer, so the connection is reused.
func (h HTTPClient) tusDo(req *http.Request) (*http.Response, error) {
	resp, err := h.client().Do(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	return resp, nil
}

// tusError is a refused tus request: the server writes "code: message".
func tusError(resp *http.Response) error {
	b, _ := io.ReadAll(resp.Body)
	code, msg, ok := strings.Cut(strings.TrimSpace(string(b)), ": ")
	if !ok || strings.ContainsAny(code, " \n") {
		code, msg = "", strings.TrimSpace(string(b))
	}
	return &HTTPError{Status: resp.StatusCode, Code: code, Message: msg}
}

// final reports whether a failed upload request is not worth repeating: an
// answer other than a temporary error or a conflict of offsets.
func final(err error) bool {
	var he *HTTPError
	if !errors.As(err, &he) {
		return false // a transport failure: resume
	}
	return !he.Temporary() && he.Status != http.StatusConflict && he.Status < 500
}

func backoffFor(failures int) time.Duration {
	return min(time.Duration(failures)*250*time.Millisecond, 2*time.Second)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Open fetches a file from a URL FileURL gave (a relative one on BaseURL).
// The caller closes the body; rangeHeader, when set, asks for a part
// ("bytes=0-1023").
func (h HTTPClient) Open(ctx context.Context, fileURL, rangeHeader string) (*http.Response, error) {
	u := fileURL
	if strings.HasPrefix(u, "/") {
		u = h.url(u)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, http.NoBody)
	if err != nil {
		return nil, err
	}
	if rangeHeader != "" {
		req.Header.Set("Range", rangeHeader)
	}
	resp, err := h.client().Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, &HTTPError{Status: resp.StatusCode, Message: strings.TrimSpace(string(b))}
	}
	return resp, nil
}

func (h HTTPClient) url(path string) string { return strings.TrimRight(h.BaseURL, "/") + path }

func (h HTTPClient) client() *http.Client {
	if h.Client == nil {
		return http.DefaultClient
	}
	return h.Client
}
