package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/errcode"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Credentials is a token issued by the HTTP API.
type Credentials struct {
	UserID    string    `json:"user_id"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// HTTPError is a non-2xx answer of the HTTP API.
type HTTPError struct {
	Status int
	// Code is the body's code string, snake_case, e.g. "invalid_credentials";
	// empty if the body was not the API's error JSON. ErrorCode maps it to
	// the code a socket request would get.
	Code    string
	Message string
	// temporary is the body's "temporary" when the server sent it (said).
	temporary, said bool
}

// Temporary reports whether the same request may succeed later, as the
// server said in the error body; from a server that does not say, a 503
// (unavailable) or 429 (too many requests) is temporary.
func (e *HTTPError) Temporary() bool {
	if e.said {
		return e.temporary
	}
	return e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests
}

// ErrorCode is the wire code of the answer, the same a socket request
// would be refused with (the table is package errcode): "conflict" is
// ERROR_CODE_CONFLICT, "no_such_user" ERROR_CODE_NO_SUCH_USER, and the HTTP
// API's own codes the closest one ("invalid_credentials" is
// UNAUTHENTICATED). UNSPECIFIED when the body had no code this SDK knows.
func (e *HTTPError) ErrorCode() pb.ErrorCode {
	c, _ := errcode.FromAPICode(e.Code)
	return c
}

func (e *HTTPError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("parley: http %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("parley: http %d: %s: %s", e.Status, e.Code, e.Message)
}

// HTTPClient calls the Parley HTTP API at BaseURL (e.g.
// "http://127.0.0.1:8080"). Client nil means http.DefaultClient; load
// generators should give one with a large MaxIdleConnsPerHost.
type HTTPClient struct {
	BaseURL string
	Client  *http.Client
}

// Register creates an account and returns a token for it.
func (h HTTPClient) Register(ctx context.Context, username, password string) (*Credentials, error) {
	var c Credentials
	err := h.do(ctx, "/v1/register", nil, map[string]string{"username": username, "password": password}, &c)
	return ret(&c, err)
}

// Login returns a new token for an account.
func (h HTTPClient) Login(ctx context.Context, username, password string) (*Credentials, error) {
	var c Credentials
	err := h.do(ctx, "/v1/login", nil, map[string]string{"username": username, "password": password}, &c)
	return ret(&c, err)
}

// Logout revokes a token.
func (h HTTPClient) Logout(ctx context.Context, token string) error {
	return h.do(ctx, "/v1/logout", http.Header{"Authorization": {"Bearer " + token}}, nil, nil)
}

// ChangePassword changes the password of the token's user. The server
// revokes the user's tokens; the returned one replaces them.
func (h HTTPClient) ChangePassword(ctx context.Context, token, oldPassword, newPassword string) (*Credentials, error) {
	var c Credentials
	err := h.do(ctx, "/v1/password", http.Header{"Authorization": {"Bearer " + token}},
		map[string]string{"old_password": oldPassword, "new_password": newPassword}, &c)
	return ret(&c, err)
}

// MintToken issues a token for any user through the admin API (the app
// server's way to log its own users in). ttl 0 means the server's default.
func (h HTTPClient) MintToken(ctx context.Context, apiKey, userID string, ttl time.Duration) (*Credentials, error) {
	var c Credentials
	body := struct {
		UserID     string `json:"user_id"`
		TTLSeconds int64  `json:"ttl_seconds,omitempty"`
	}{userID, int64(ttl / time.Second)}
	err := h.do(ctx, "/v1/admin/tokens", http.Header{"X-Api-Key": {apiKey}}, body, &c)
	return ret(&c, err)
}

func ret(c *Credentials, err error) (*Credentials, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}

// do POSTs in as JSON and decodes a 2xx answer into out (if non-nil).
func (h HTTPClient) do(ctx context.Context, path string, hdr http.Header, in, out any) error {
	return h.doMethod(ctx, http.MethodPost, path, hdr, in, out)
}

// maxHTTPAnswer bounds an answer's body.
const maxHTTPAnswer = 16 << 20

// doMethod sends in as JSON ([]byte: as is; nil: no body) and decodes a 2xx answer into
// out: a proto.Message is read in the protocol's JSON mapping, anything
// else with encoding/json.
func (h HTTPClient) doMethod(ctx context.Context, method, path string, hdr http.Header, in, out any) error {
	var body io.Reader = http.NoBody
	contentType := "application/json"
	switch v := in.(type) {
	case nil:
	case []byte: // sent as is (a push body)
		body, contentType = bytes.NewReader(v), "application/octet-stream"
	case proto.Message: // in the protocol's JSON mapping
		b, err := protojson.Marshal(v)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	default:
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(h.BaseURL, "/")+path, body)
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if in != nil {
		req.Header.Set("Content-Type", contentType)
	}
	hc := h.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Bounded, so a misbehaving server cannot make the client allocate
	// without limit; pages of messages are bounded by the server's
	// page_bytes (at most half its send queue cap), and their JSON is
	// larger than that, so the bound is generous.
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPAnswer+1))
	if err != nil {
		return err
	}
	if len(b) > maxHTTPAnswer {
		return fmt.Errorf("parley: http %s: answer larger than %d bytes", path, maxHTTPAnswer)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return httpError(resp.StatusCode, b)
	}
	if out == nil || len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if m, ok := out.(proto.Message); ok {
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m); err != nil {
			return fmt.Errorf("parley: http %s: bad response: %w", path, err)
		}
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("parley: http %s: bad response: %w", path, err)
	}
	return nil
}

// Register creates an account at httpBase (see [HTTPClient.Register]).
func Register(ctx context.Context, httpBase, username, password string) (*Credentials, error) {
	return HTTPClient{BaseURL: httpBase}.Register(ctx, username, password)
}

// Login logs in at httpBase (see [HTTPClient.Login]).
func Login(ctx context.Context, httpBase, username, password string) (*Credentials, error) {
	return HTTPClient{BaseURL: httpBase}.Login(ctx, username, password)
}

// Logout revokes token at httpBase (see [HTTPClient.Logout]).
func Logout(ctx context.Context, httpBase, token string) error {
	return HTTPClient{BaseURL: httpBase}.Logout(ctx, token)
}

// ChangePassword changes a password at httpBase (see [HTTPClient.ChangePassword]).
func ChangePassword(ctx context.Context, httpBase, token, oldPassword, newPassword string) (*Credentials, error) {
	return HTTPClient{BaseURL: httpBase}.ChangePassword(ctx, token, oldPassword, newPassword)
}

// MintToken issues a token through the admin API at httpBase (see [HTTPClient.MintToken]).
func MintToken(ctx context.Context, httpBase, apiKey, userID string, ttl time.Duration) (*Credentials, error) {
	return HTTPClient{BaseURL: httpBase}.MintToken(ctx, apiKey, userID, ttl)
}

// httpError is a non-2xx answer with body b: the API's error JSON, or the
// start of whatever else it is.
func httpError(status int, b []byte) *HTTPError {
	var e struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Temporary *bool  `json:"temporary"`
		} `json:"error"`
	}
	he := &HTTPError{Status: status}
	if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
		he.Code, he.Message = e.Error.Code, e.Error.Message
		if e.Error.Temporary != nil {
			he.temporary, he.said = *e.Error.Temporary, true
		}
	} else {
		he.Message = strings.TrimSpace(string(b[:min(len(b), 200)]))
	}
	return he
}
