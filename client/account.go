package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ExportJob is an account export (docs/accounts.md). State is "pending",
// "running", "ready" (the archive can be downloaded until ExpiresAt) or
// "failed".
type ExportJob struct {
	ID        string    `json:"id"`
	UserID    string    `json:"user_id"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	Size      int64     `json:"size"`
	Error     string    `json:"error"`
}

// AccountDeletion is the state of an account deletion: "running", then
// "done".
type AccountDeletion struct {
	UserID     string    `json:"user_id"`
	State      string    `json:"state"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

func bearerHeader(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// StartExport starts an export of the token's user's data (or returns the
// one running).
func (h HTTPClient) StartExport(ctx context.Context, token string) (*ExportJob, error) {
	var j ExportJob
	if err := h.doMethod(ctx, http.MethodPost, "/v1/account/exports", bearerHeader(token), nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Export returns the state of one of the token's user's exports.
func (h HTTPClient) Export(ctx context.Context, token, jobID string) (*ExportJob, error) {
	var j ExportJob
	if err := h.doMethod(ctx, http.MethodGet, "/v1/account/exports/"+url.PathEscape(jobID), bearerHeader(token), nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// DownloadExport streams a ready export's zip archive into w.
func (h HTTPClient) DownloadExport(ctx context.Context, token, jobID string, w io.Writer) (int64, error) {
	return h.download(ctx, "/v1/account/exports/"+url.PathEscape(jobID)+"/archive", bearerHeader(token), w)
}

// DeleteAccount deletes the token's user's account; password is the
// account's password (an account without one is deleted by the app
// through [Admin.DeleteUser]). The user is locked out when it returns;
// the rest of the deletion runs on the server.
func (h HTTPClient) DeleteAccount(ctx context.Context, token, password string) (*AccountDeletion, error) {
	var d AccountDeletion
	err := h.doMethod(ctx, http.MethodPost, "/v1/account/delete", bearerHeader(token), map[string]string{"password": password}, &d)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

func (h HTTPClient) download(ctx context.Context, path string, hdr http.Header, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(h.BaseURL, "/")+path, nil)
	if err != nil {
		return 0, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := h.client().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return 0, httpError(resp.StatusCode, b)
	}
	n, err := io.Copy(w, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("parley: export archive cut short at %d of %d bytes", n, resp.ContentLength)
	}
	return n, err
}

// StartExport starts an export of a user's data (audited).
func (a *Admin) StartExport(ctx context.Context, userID string) (*ExportJob, error) {
	var j ExportJob
	if err := a.do(ctx, http.MethodPost, "/v1/admin/users/"+url.PathEscape(userID)+"/exports", nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Export returns the state of any export.
func (a *Admin) Export(ctx context.Context, jobID string) (*ExportJob, error) {
	var j ExportJob
	if err := a.do(ctx, http.MethodGet, "/v1/admin/exports/"+url.PathEscape(jobID), nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// DownloadExport streams a ready export's archive into w.
func (a *Admin) DownloadExport(ctx context.Context, jobID string, w io.Writer) (int64, error) {
	return a.HTTP.download(ctx, "/v1/admin/exports/"+url.PathEscape(jobID)+"/archive", http.Header{"X-Api-Key": {a.Key}}, w)
}

// DeleteUser deletes a user's account (audited; idempotent: asking again
// resumes or reports it).
func (a *Admin) DeleteUser(ctx context.Context, userID string) (*AccountDeletion, error) {
	var d AccountDeletion
	if err := a.do(ctx, http.MethodDelete, "/v1/admin/users/"+url.PathEscape(userID), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Deletion returns the state of a user's account deletion.
func (a *Admin) Deletion(ctx context.Context, userID string) (*AccountDeletion, error) {
	var d AccountDeletion
	if err := a.do(ctx, http.MethodGet, "/v1/admin/users/"+url.PathEscape(userID)+"/deletion", nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}
