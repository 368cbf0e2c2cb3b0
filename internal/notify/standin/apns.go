package standin

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// APNsConfig is what the APNs stand-in accepts.
type APNsConfig struct {
	// KeyID and TeamID are the provider token's kid and iss.
	KeyID, TeamID string
	// PublicKey verifies the provider tokens' ES256 signatures.
	PublicKey *ecdsa.PublicKey
	// Topic, if set, is the only apns-topic accepted (others: 400
	// TopicDisallowed and a violation).
	Topic string
}

// APNsAlert is a payload's aps.alert.
type APNsAlert struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

// APNsAps is a payload's aps dictionary.
type APNsAps struct {
	Alert          APNsAlert `json:"alert"`
	Badge          *int      `json:"badge,omitempty"`
	Sound          string    `json:"sound"`
	ThreadID       string    `json:"thread-id,omitempty"`
	MutableContent int       `json:"mutable-content"`
}

// APNsPayload is the payload Parley sends.
type APNsPayload struct {
	Aps            APNsAps `json:"aps"`
	ConversationID string  `json:"conversation_id"`
	Seq            string  `json:"seq"`
	Count          int     `json:"count"`
}

// APNsNotification is one notification the APNs stand-in accepted.
type APNsNotification struct {
	// Token is the device token from the path (lower case).
	Token string
	// The headers.
	Topic, PushType, CollapseID string
	Priority                    int
	Expiration                  int64
	// ApnsID is the apns-id answered.
	ApnsID  string
	Payload APNsPayload
}

// APNs stands in for Apple's push service (POST /3/device/{token}).
type APNs struct {
	base[APNsNotification]
	cfg APNsConfig

	jmu  sync.Mutex
	jwts map[string]int64 // verified provider tokens: their iat
	njwt atomic.Int64     // distinct provider tokens verified
	ids  atomic.Uint64
}

// NewAPNs starts an APNs stand-in. Close it when done.
func NewAPNs(cfg APNsConfig) *APNs {
	s := &APNs{cfg: cfg, jwts: make(map[string]int64)}
	_ = s.init(http.HandlerFunc(s.serve), Listen{}) // cannot fail: the kernel picks the port
	return s
}

// NewP8 makes a fresh APNs auth key: the .p8 file's contents (PKCS#8 PEM,
// ECDSA P-256) and its public key.
func NewP8() (p8 []byte, pub *ecdsa.PublicKey, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), &k.PublicKey, nil
}

// JWTs is how many distinct provider tokens the stand-in has verified.
func (s *APNs) JWTs() int64 { return s.njwt.Load() }

// apnsCheck gathers what is wrong with one request; the first problem
// decides the answer.
type apnsCheck struct {
	s      *APNs
	r      *http.Request
	status int
	reason string
}

func (c *apnsCheck) fail(status int, reason, format string, args ...any) {
	c.s.violation(c.r, "%s (answered %d %s)", fmt.Sprintf(format, args...), status, reason)
	if c.status == 0 {
		c.status, c.reason = status, reason
	}
}

func (s *APNs) serve(w http.ResponseWriter, r *http.Request) {
	body, bodyOK := readBody(r)
	c := &apnsCheck{s: s, r: r}
	if r.ProtoMajor != 2 {
		c.fail(http.StatusBadRequest, "BadProtocol", "APNs speaks HTTP/2 only, got %s", r.Proto)
	}
	if r.Method != http.MethodPost {
		c.fail(http.StatusMethodNotAllowed, "MethodNotAllowed", "method %s, want POST", r.Method)
	}
	token, ok := strings.CutPrefix(r.URL.Path, "/3/device/")
	if !ok || r.URL.RawQuery != "" {
		c.fail(http.StatusNotFound, "BadPath", "path is not /3/device/{token}")
	} else if _, err := hex.DecodeString(token); err != nil || len(token) < 16 || len(token) > 200 {
		c.fail(http.StatusBadRequest, "BadDeviceToken", "device token %q is not 16 to 200 hex digits", token)
	}
	token = strings.ToLower(token)
	s.checkAuth(c, r.Header.Values("Authorization"))

	n := APNsNotification{Token: token}
	n.Topic = one(c, r, "apns-topic")
	switch {
	case n.Topic == "":
		c.fail(http.StatusBadRequest, "MissingTopic", "no apns-topic")
	case s.cfg.Topic != "" && n.Topic != s.cfg.Topic:
		c.fail(http.StatusBadRequest, "TopicDisallowed", "apns-topic %q, want %q", n.Topic, s.cfg.Topic)
	}
	n.PushType = one(c, r, "apns-push-type")
	if n.PushType != "alert" {
		c.fail(http.StatusBadRequest, "InvalidPushType", "apns-push-type %q, want alert", n.PushType)
	}
	p := one(c, r, "apns-priority")
	if p != "10" && p != "5" {
		c.fail(http.StatusBadRequest, "BadPriority", "apns-priority %q, want 10 or 5", p)
	}
	n.Priority, _ = strconv.Atoi(p)
	e := one(c, r, "apns-expiration")
	exp, err := strconv.ParseInt(e, 10, 64)
	now := time.Now()
	switch {
	case err != nil || exp < 0:
		c.fail(http.StatusBadRequest, "BadExpirationDate", "apns-expiration %q is not unix seconds", e)
	case exp != 0 && (exp < now.Add(-time.Minute).Unix() || exp > now.Add(31*24*time.Hour).Unix()):
		c.fail(http.StatusBadRequest, "BadExpirationDate", "apns-expiration %d is neither 0 nor within the next month", exp)
	}
	n.Expiration = exp
	if vs := r.Header.Values("apns-collapse-id"); len(vs) > 0 {
		n.CollapseID = one(c, r, "apns-collapse-id")
		if n.CollapseID == "" || len(n.CollapseID) > 64 {
			c.fail(http.StatusBadRequest, "BadCollapseId", "apns-collapse-id %q is empty or over 64 bytes", n.CollapseID)
		}
	}
	n.ApnsID = r.Header.Get("apns-id")
	if n.ApnsID == "" {
		n.ApnsID = s.newID()
	}
	switch {
	case !bodyOK || len(body) > 4096:
		c.fail(http.StatusRequestEntityTooLarge, "PayloadTooLarge", "payload of %d bytes, over 4096", len(body))
	case len(body) == 0:
		c.fail(http.StatusBadRequest, "PayloadEmpty", "empty payload")
	default:
		if err := checkAPNsPayload(body, &n.Payload); err != nil {
			c.fail(http.StatusBadRequest, "BadPayload", "payload: %v", err)
		}
	}

	status := http.StatusOK
	w.Header().Set("apns-id", n.ApnsID)
	defer func() { s.record(r, body, status) }()
	if c.status != 0 {
		status = c.status
		apnsError(w, status, c.reason, "")
		return
	}
	if rep, ok := s.next(token); ok {
		s.wait(r.Context(), rep.Delay)
		if rep.Status != 0 && rep.Status != http.StatusOK {
			status = rep.Status
			apnsError(w, status, rep.Reason, rep.RetryAfter)
			return
		}
	}
	if r.Context().Err() != nil {
		status = 0 // abandoned
		return
	}
	s.accepted(n)
	w.WriteHeader(http.StatusOK)
}

// one returns the single value of header name ("" if absent); two or more
// are a violation (Apple: DuplicateHeaders).
func one(c *apnsCheck, r *http.Request, name string) string {
	vs := r.Header.Values(name)
	if len(vs) > 1 {
		c.fail(http.StatusBadRequest, "DuplicateHeaders", "%d %s headers", len(vs), name)
	}
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

func apnsError(w http.ResponseWriter, status int, reason, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	m := map[string]any{"reason": reason}
	if status == http.StatusGone {
		m["timestamp"] = time.Now().UnixMilli()
	}
	_ = json.NewEncoder(w).Encode(m)
}

func (s *APNs) newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := strings.ToUpper(hex.EncodeToString(b[:]))
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// checkAuth verifies the provider token: "bearer <JWT>", ES256 with the
// configured key, kid, iss, iat within the last hour.
func (s *APNs) checkAuth(c *apnsCheck, vs []string) {
	if len(vs) != 1 {
		c.fail(http.StatusForbidden, "MissingProviderToken", "%d authorization headers, want 1", len(vs))
		return
	}
	scheme, tok, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || tok == "" {
		c.fail(http.StatusForbidden, "MissingProviderToken", "authorization is not \"bearer <JWT>\"")
		return
	}
	now := time.Now().Unix()
	s.jmu.Lock()
	iat, known := s.jwts[tok]
	s.jmu.Unlock()
	if !known {
		var err error
		if iat, err = s.verify(tok, now); err != nil {
			c.fail(http.StatusForbidden, "InvalidProviderToken", "provider token: %v", err)
			return
		}
		s.jmu.Lock()
		if len(s.jwts) >= 256 {
			clear(s.jwts)
		}
		if _, dup := s.jwts[tok]; !dup {
			s.jwts[tok] = iat
			s.njwt.Add(1)
		}
		s.jmu.Unlock()
	}
	switch {
	case iat < now-3600:
		c.fail(http.StatusForbidden, "ExpiredProviderToken", "provider token issued %d s ago, over an hour", now-iat)
	case iat > now+60:
		c.fail(http.StatusForbidden, "InvalidProviderToken", "provider token issued %d s in the future", iat-now)
	}
}

func (s *APNs) verify(tok string, now int64) (int64, error) {
	h, cl, input, sig, err := jwtParts(tok)
	if err != nil {
		return 0, err
	}
	if alg, _ := claimString(h, "alg"); alg != "ES256" {
		return 0, fmt.Errorf("alg %v, want ES256", h["alg"])
	}
	if kid, _ := claimString(h, "kid"); kid != s.cfg.KeyID {
		return 0, fmt.Errorf("kid %v, want %q", h["kid"], s.cfg.KeyID)
	}
	if iss, _ := claimString(cl, "iss"); iss != s.cfg.TeamID {
		return 0, fmt.Errorf("iss %v, want %q", cl["iss"], s.cfg.TeamID)
	}
	iat, ok := claimInt(cl, "iat")
	if !ok {
		return 0, fmt.Errorf("iat %v is not an integer", cl["iat"])
	}
	if !verifyES256(s.cfg.PublicKey, input, sig) {
		return 0, fmt.Errorf("ES256 signature does not verify with the configured key")
	}
	return iat, nil
}

// checkAPNsPayload decodes the payload strictly into p.
func checkAPNsPayload(b []byte, p *APNsPayload) error {
	var w struct {
		Aps *struct {
			Alert *struct {
				Title *string `json:"title"`
				Body  *string `json:"body"`
			} `json:"alert"`
			Badge          *int    `json:"badge"`
			Sound          *string `json:"sound"`
			ThreadID       *string `json:"thread-id"`
			MutableContent *int    `json:"mutable-content"`
		} `json:"aps"`
		ConversationID *string `json:"conversation_id"`
		Seq            *string `json:"seq"`
		Count          *int    `json:"count"`
	}
	if err := strictDecode(b, &w); err != nil {
		return err
	}
	switch {
	case w.Aps == nil:
		return fmt.Errorf("no aps")
	case w.Aps.Alert == nil || w.Aps.Alert.Title == nil || w.Aps.Alert.Body == nil:
		return fmt.Errorf("aps.alert lacks title or body")
	case w.Aps.Badge != nil && *w.Aps.Badge < 0:
		return fmt.Errorf("negative aps.badge")
	case w.Aps.Sound == nil || *w.Aps.Sound != "default":
		return fmt.Errorf("aps.sound is not \"default\"")
	case w.Aps.MutableContent == nil || *w.Aps.MutableContent != 1:
		return fmt.Errorf("aps.mutable-content is not 1")
	case w.ConversationID == nil:
		return fmt.Errorf("no conversation_id")
	case w.Seq == nil || !decimal(*w.Seq):
		return fmt.Errorf("seq is not a decimal string")
	case w.Count == nil || *w.Count < 0:
		return fmt.Errorf("count missing or negative")
	}
	p.Aps.Alert = APNsAlert{Title: *w.Aps.Alert.Title, Body: *w.Aps.Alert.Body}
	p.Aps.Badge = w.Aps.Badge
	p.Aps.Sound = *w.Aps.Sound
	if w.Aps.ThreadID != nil {
		p.Aps.ThreadID = *w.Aps.ThreadID
	}
	p.Aps.MutableContent = 1
	p.ConversationID, p.Seq, p.Count = *w.ConversationID, *w.Seq, *w.Count
	return nil
}

// decimal: a uint64 in decimal, no sign or leading zeros.
func decimal(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}
