package standin

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FCMScope is the scope a token request must ask for.
const FCMScope = "https://www.googleapis.com/auth/firebase.messaging"

// FCMNotification is a message's notification.
type FCMNotification struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

// FCMAndroidNotification is android.notification.
type FCMAndroidNotification struct {
	Tag               string `json:"tag,omitempty"`
	NotificationCount *int   `json:"notification_count,omitempty"`
}

// FCMAndroid is a message's android block.
type FCMAndroid struct {
	Priority     string                  `json:"priority"`
	TTL          string                  `json:"ttl"`
	CollapseKey  string                  `json:"collapse_key,omitempty"`
	Notification *FCMAndroidNotification `json:"notification,omitempty"`
}

// FCMAps is apns.payload.aps.
type FCMAps struct {
	Badge    *int   `json:"badge,omitempty"`
	ThreadID string `json:"thread-id,omitempty"`
}

// FCMAPNSPayload is apns.payload.
type FCMAPNSPayload struct {
	Aps FCMAps `json:"aps"`
}

// FCMAPNS is a message's apns block.
type FCMAPNS struct {
	Headers map[string]string `json:"headers"`
	Payload *FCMAPNSPayload   `json:"payload,omitempty"`
}

// FCMWebpush is a message's webpush block.
type FCMWebpush struct {
	Headers map[string]string `json:"headers"`
}

// FCMMessage is one message the FCM stand-in accepted.
type FCMMessage struct {
	Token        string            `json:"token"`
	Notification *FCMNotification  `json:"notification"`
	Data         map[string]string `json:"data"`
	Android      *FCMAndroid       `json:"android,omitempty"`
	APNS         *FCMAPNS          `json:"apns,omitempty"`
	Webpush      *FCMWebpush       `json:"webpush,omitempty"`
	// Name is the message name answered.
	Name string `json:"-"`
}

// FCM stands in for FCM's HTTP v1 API and Google's OAuth 2 token endpoint
// (POST /token).
type FCM struct {
	base[FCMMessage]
	project, email, keyID string
	key                   *rsa.PrivateKey

	tmu        sync.Mutex
	tokens     map[string]time.Time // access token: its expiry
	ntok       atomic.Int64
	tokenDelay atomic.Int64
	ids        atomic.Uint64
}

// NewFCM starts an FCM stand-in for project, with a fresh service account
// (see CredentialsJSON). Close it when done.
func NewFCM(project string) (*FCM, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return NewFCMWith(FCMConfig{Project: project, Key: k})
}

// FCMConfig is an FCM stand-in whose service account and address outlive
// it: a server started earlier, in another process, can use it.
type FCMConfig struct {
	Project string
	// Key is the service account's key (CredentialsJSON holds it).
	Key *rsa.PrivateKey
	// Listen is where it listens and with which certificate.
	Listen Listen
}

// NewFCMWith starts an FCM stand-in as cfg says. Close it when done.
func NewFCMWith(cfg FCMConfig) (*FCM, error) {
	// The key id is the key's own hash, so the same key gives the same
	// credentials file.
	der, err := x509.MarshalPKIXPublicKey(&cfg.Key.PublicKey)
	if err != nil {
		return nil, err
	}
	id := sha1.Sum(der)
	s := &FCM{
		project: cfg.Project,
		email:   "parley-push@" + cfg.Project + ".iam.gserviceaccount.com",
		keyID:   hex.EncodeToString(id[:]),
		key:     cfg.Key,
		tokens:  make(map[string]time.Time),
	}
	if err := s.init(http.HandlerFunc(s.serve), cfg.Listen); err != nil {
		return nil, err
	}
	return s, nil
}

// TokenURL is the stand-in's OAuth 2 token endpoint.
func (s *FCM) TokenURL() string { return s.URL() + "/token" }

// CredentialsJSON is a service account JSON key the stand-in accepts: its
// RSA key and a token_uri pointing at the stand-in.
func (s *FCM) CredentialsJSON() []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(s.key)
	b, _ := json.MarshalIndent(map[string]string{
		"type":                        "service_account",
		"project_id":                  s.project,
		"private_key_id":              s.keyID,
		"private_key":                 string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":                s.email,
		"client_id":                   "100000000000000000001",
		"auth_uri":                    "https://accounts.google.com/o/oauth2/auth",
		"token_uri":                   s.TokenURL(),
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
	}, "", "  ")
	return b
}

// TokenRequests is how many access tokens the stand-in has issued.
func (s *FCM) TokenRequests() int64 { return s.ntok.Load() }

// StallTokens holds every token answer for d (0: no longer).
func (s *FCM) StallTokens(d time.Duration) { s.tokenDelay.Store(int64(d)) }

// RevokeTokens makes every access token issued so far answer 401, as if
// expired.
func (s *FCM) RevokeTokens() {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	clear(s.tokens)
}

func (s *FCM) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		s.serveToken(w, r)
		return
	}
	s.serveSend(w, r)
}

// serveToken is Google's token endpoint for the JWT bearer grant.
func (s *FCM) serveToken(w http.ResponseWriter, r *http.Request) {
	body, _ := readBody(r)
	status := http.StatusOK
	defer func() { s.record(r, body, status) }()
	fail := func(code, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		s.violation(r, "token request: %s", msg)
		status = http.StatusBadRequest
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": msg})
	}
	if r.Method != http.MethodPost {
		fail("invalid_request", "method %s, want POST", r.Method)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		fail("invalid_request", "content type %q, want a form", r.Header.Get("Content-Type"))
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		fail("invalid_request", "form: %v", err)
		return
	}
	if g := form.Get("grant_type"); g != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		fail("unsupported_grant_type", "grant_type %q", g)
		return
	}
	if err := s.checkAssertion(form.Get("assertion")); err != nil {
		fail("invalid_grant", "assertion: %v", err)
		return
	}
	if d := time.Duration(s.tokenDelay.Load()); d > 0 {
		s.wait(r.Context(), d)
		if r.Context().Err() != nil {
			status = 0
			return
		}
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	tok := "ya29.standin-" + hex.EncodeToString(b[:])
	s.tmu.Lock()
	if len(s.tokens) > 10000 {
		clear(s.tokens)
	}
	s.tokens[tok] = time.Now().Add(time.Hour)
	s.tmu.Unlock()
	s.ntok.Add(1)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
}

func (s *FCM) checkAssertion(a string) error {
	h, cl, input, sig, err := jwtParts(a)
	if err != nil {
		return err
	}
	if alg, _ := claimString(h, "alg"); alg != "RS256" {
		return fmt.Errorf("alg %v, want RS256", h["alg"])
	}
	if typ, ok := h["typ"]; ok && typ != "JWT" {
		return fmt.Errorf("typ %v", typ)
	}
	if kid, ok := h["kid"]; ok && kid != s.keyID {
		return fmt.Errorf("kid %v, want %s", kid, s.keyID)
	}
	if !verifyRS256(&s.key.PublicKey, input, sig) {
		return fmt.Errorf("RS256 signature does not verify with the service account's key")
	}
	if iss, _ := claimString(cl, "iss"); iss != s.email {
		return fmt.Errorf("iss %v, want %s", cl["iss"], s.email)
	}
	if aud, _ := claimString(cl, "aud"); aud != s.TokenURL() {
		return fmt.Errorf("aud %v, want %s", cl["aud"], s.TokenURL())
	}
	scope, _ := claimString(cl, "scope")
	found := false
	for _, sc := range strings.Fields(scope) {
		found = found || sc == FCMScope
	}
	if !found {
		return fmt.Errorf("scope %q lacks %s", scope, FCMScope)
	}
	now := time.Now().Unix()
	iat, ok1 := claimInt(cl, "iat")
	exp, ok2 := claimInt(cl, "exp")
	switch {
	case !ok1 || !ok2:
		return fmt.Errorf("iat %v or exp %v not an integer", cl["iat"], cl["exp"])
	case iat > now+60 || iat < now-3600:
		return fmt.Errorf("iat %d is not about now (%d)", iat, now)
	case exp <= now || exp-iat > 3600:
		return fmt.Errorf("exp %d is past or over an hour after iat %d", exp, iat)
	}
	return nil
}

var (
	ttlRE   = regexp.MustCompile(`^[0-9]{1,10}(\.[0-9]{1,9})?s$`)
	topicRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
)

func (s *FCM) serveSend(w http.ResponseWriter, r *http.Request) {
	body, bodyOK := readBody(r)
	status := http.StatusOK
	defer func() { s.record(r, body, status) }()
	answer := func(st int, reason, retryAfter string) {
		status = st
		fcmError(w, st, reason, retryAfter)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/projects/"+s.project+"/messages:send" {
		// Google's front end answers an unknown path with an HTML page.
		s.violation(r, "not POST /v1/projects/%s/messages:send", s.project)
		status = http.StatusNotFound
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("<!DOCTYPE html><title>Error 404 (Not Found)</title><p><b>404.</b> That’s an error.\n"))
		return
	}
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	s.tmu.Lock()
	exp, known := s.tokens[tok]
	s.tmu.Unlock()
	switch {
	case scheme != "Bearer" || tok == "":
		s.violation(r, "authorization is not \"Bearer <access token>\"")
		answer(http.StatusUnauthorized, "", "")
		return
	case !known:
		// An unknown token is a violation unless RevokeTokens forgot it.
		if !strings.HasPrefix(tok, "ya29.standin-") {
			s.violation(r, "access token %q was not issued here", tok)
		}
		answer(http.StatusUnauthorized, "", "")
		return
	case time.Now().After(exp):
		s.violation(r, "expired access token used")
		answer(http.StatusUnauthorized, "", "")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		s.violation(r, "content type %q, want application/json", r.Header.Get("Content-Type"))
		answer(http.StatusBadRequest, "INVALID_ARGUMENT", "")
		return
	}
	var req struct {
		Message *FCMMessage `json:"message"`
	}
	err := strictDecode(body, &req)
	if err == nil && !bodyOK {
		err = fmt.Errorf("body over %d bytes", maxBody)
	}
	if err == nil {
		err = checkFCMMessage(req.Message)
	}
	if err != nil {
		s.violation(r, "message: %v", err)
		answer(http.StatusBadRequest, "INVALID_ARGUMENT", "")
		return
	}
	m := req.Message
	if rep, ok := s.next(m.Token); ok {
		s.wait(r.Context(), rep.Delay)
		if rep.Status != 0 && rep.Status != http.StatusOK {
			answer(rep.Status, rep.Reason, rep.RetryAfter)
			return
		}
	}
	if r.Context().Err() != nil {
		status = 0
		return
	}
	m.Name = "projects/" + s.project + "/messages/0:" + strconv.FormatUint(s.ids.Add(1), 10) + "%standin"
	s.accepted(*m)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(map[string]string{"name": m.Name})
}

func checkFCMMessage(m *FCMMessage) error {
	if m == nil {
		return fmt.Errorf("no message")
	}
	if m.Token == "" {
		return fmt.Errorf("no token")
	}
	if n := m.Notification; n == nil {
		return fmt.Errorf("no notification")
	}
	if len(m.Data) != 3 || !decimal(m.Data["seq"]) || !decimal(m.Data["count"]) {
		return fmt.Errorf("data %v is not conversation_id, seq and count (decimal)", m.Data)
	}
	if _, ok := m.Data["conversation_id"]; !ok {
		return fmt.Errorf("data lacks conversation_id")
	}
	if a := m.Android; a != nil {
		if a.Priority != "HIGH" && a.Priority != "NORMAL" {
			return fmt.Errorf("android.priority %q", a.Priority)
		}
		if !ttlRE.MatchString(a.TTL) {
			return fmt.Errorf("android.ttl %q is not a duration like \"3.5s\"", a.TTL)
		}
		if an := a.Notification; an != nil && an.NotificationCount != nil && *an.NotificationCount < 0 {
			return fmt.Errorf("negative android.notification.notification_count")
		}
	}
	if a := m.APNS; a != nil {
		for k, v := range a.Headers {
			switch k {
			case "apns-priority":
				if v != "10" && v != "5" {
					return fmt.Errorf("apns-priority %q", v)
				}
			case "apns-expiration":
				if _, err := strconv.ParseUint(v, 10, 63); err != nil {
					return fmt.Errorf("apns-expiration %q", v)
				}
			case "apns-collapse-id":
				if v == "" || len(v) > 64 {
					return fmt.Errorf("apns-collapse-id %q", v)
				}
			default:
				return fmt.Errorf("apns header %q not expected", k)
			}
		}
		if p := a.Payload; p != nil && p.Aps.Badge != nil && *p.Aps.Badge < 0 {
			return fmt.Errorf("negative apns badge")
		}
	}
	if wp := m.Webpush; wp != nil {
		for k, v := range wp.Headers {
			switch k {
			case "TTL":
				if _, err := strconv.ParseUint(v, 10, 31); err != nil {
					return fmt.Errorf("webpush TTL %q", v)
				}
			case "Urgency":
				if !validUrgency(v) {
					return fmt.Errorf("webpush Urgency %q", v)
				}
			case "Topic":
				if !topicRE.MatchString(v) {
					return fmt.Errorf("webpush Topic %q", v)
				}
			default:
				return fmt.Errorf("webpush header %q not expected", k)
			}
		}
	}
	return nil
}

func validUrgency(v string) bool {
	return v == "very-low" || v == "low" || v == "normal" || v == "high"
}

// fcmErrorCodes are FCM's ErrorCode values (what goes in an FcmError).
var fcmErrorCodes = map[string]bool{
	"UNSPECIFIED_ERROR": true, "INVALID_ARGUMENT": true, "UNREGISTERED": true, "SENDER_ID_MISMATCH": true,
	"QUOTA_EXCEEDED": true, "UNAVAILABLE": true, "INTERNAL": true, "THIRD_PARTY_AUTH_ERROR": true,
}

// fcmError answers Google's error JSON. reason is an FCM errorCode (put in
// an FcmError detail), optionally followed by ":field" to add a BadRequest
// field violation on field ("INVALID_ARGUMENT:message.token"); anything
// else is taken as the message.
func fcmError(w http.ResponseWriter, status int, reason, retryAfter string) {
	code, field, _ := strings.Cut(reason, ":")
	statuses := map[int]string{
		400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
		429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
	}
	st := statuses[status]
	if st == "" {
		st = "UNKNOWN"
	}
	msg := http.StatusText(status)
	var details []map[string]any
	switch {
	case fcmErrorCodes[code]:
		details = append(details, map[string]any{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code})
		if field != "" {
			msg = "Invalid value at '" + field + "'"
			if field == "message.token" {
				msg = "The registration token is not a valid FCM registration token"
			}
			details = append(details, map[string]any{
				"@type":           "type.googleapis.com/google.rpc.BadRequest",
				"fieldViolations": []map[string]string{{"field": field, "description": msg}},
			})
		}
	case reason != "":
		msg = reason
	}
	if code == "UNREGISTERED" {
		msg = "Requested entity was not found."
	}
	e := map[string]any{"code": status, "message": msg, "status": st}
	if details != nil {
		e["details"] = details
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}
