package standin

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Subscription is a browser's push subscription, as the page would send
// it to the server.
type Subscription struct {
	// Endpoint is https://127.0.0.1:port/push/<id>.
	Endpoint string
	// P256dh and Auth are base64url (no padding): the 65-byte public key
	// and the 16-byte authentication secret.
	P256dh, Auth string
}

// WebPushMessage is one push message the Web Push stand-in accepted.
type WebPushMessage struct {
	Endpoint string
	// The headers.
	TTL            int
	Urgency, Topic string
	// Plaintext is the decrypted payload.
	Plaintext []byte
}

type subscription struct {
	key  *ecdh.PrivateKey
	auth []byte
	gone bool
}

// WebPush stands in for a Web Push service (RFC 8030) and the browsers
// subscribed to it: it checks VAPID (RFC 8292) and decrypts every message
// (RFC 8291) with the subscription's keys.
type WebPush struct {
	base[WebPushMessage]
	vapid    []byte // the application server's public key, 65 bytes
	vapidKey *ecdsa.PublicKey

	smu  sync.Mutex
	subs map[string]*subscription // by endpoint
}

// NewWebPush starts a Web Push stand-in that accepts messages signed with
// the VAPID key pair whose public key is vapidPublicKey (base64url). Close
// it when done.
func NewWebPush(vapidPublicKey string) (*WebPush, error) {
	k, err := b64(vapidPublicKey)
	if err != nil {
		return nil, fmt.Errorf("standin: VAPID public key: %v", err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), k)
	if err != nil {
		return nil, fmt.Errorf("standin: VAPID public key: %v", err)
	}
	s := &WebPush{vapid: k, vapidKey: pub, subs: make(map[string]*subscription)}
	_ = s.init(http.HandlerFunc(s.serve), Listen{}) // cannot fail: the kernel picks the port
	return s, nil
}

// NewSubscription makes a subscription as a browser would: a fresh P-256
// key pair and authentication secret (kept by the stand-in to decrypt)
// and an endpoint on the stand-in.
func (s *WebPush) NewSubscription() (Subscription, error) {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return Subscription{}, err
	}
	auth := make([]byte, 16)
	id := make([]byte, 16)
	_, _ = rand.Read(auth)
	_, _ = rand.Read(id)
	sub := Subscription{
		Endpoint: s.URL() + "/push/" + hex.EncodeToString(id),
		P256dh:   base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()),
		Auth:     base64.RawURLEncoding.EncodeToString(auth),
	}
	s.smu.Lock()
	s.subs[sub.Endpoint] = &subscription{key: k, auth: auth}
	s.smu.Unlock()
	return sub, nil
}

// Unsubscribe ends a subscription: messages to it are answered 410 Gone.
func (s *WebPush) Unsubscribe(endpoint string) {
	s.smu.Lock()
	defer s.smu.Unlock()
	if sub := s.subs[endpoint]; sub != nil {
		sub.gone = true
	}
}

func (s *WebPush) serve(w http.ResponseWriter, r *http.Request) {
	body, bodyOK := readBody(r)
	status := http.StatusCreated
	defer func() { s.record(r, body, status) }()
	fail := func(st int, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		s.violation(r, "%s (answered %d)", msg, st)
		status = st
		http.Error(w, msg, st)
	}
	endpoint := s.URL() + r.URL.Path
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/push/") || r.URL.RawQuery != "" {
		fail(http.StatusNotFound, "not POST /push/<id>")
		return
	}
	s.smu.Lock()
	sub := s.subs[endpoint]
	gone := sub != nil && sub.gone
	s.smu.Unlock()
	switch {
	case sub == nil:
		status = http.StatusNotFound
		http.Error(w, "no such subscription", status)
		return
	case gone:
		status = http.StatusGone
		http.Error(w, "subscription expired", status)
		return
	}
	m := WebPushMessage{Endpoint: endpoint}
	if ce := r.Header.Values("Content-Encoding"); len(ce) != 1 || ce[0] != "aes128gcm" {
		fail(http.StatusBadRequest, "Content-Encoding %q, want aes128gcm", ce)
		return
	}
	ttl, err := strconv.ParseUint(r.Header.Get("TTL"), 10, 31)
	if err != nil || len(r.Header.Values("TTL")) != 1 {
		fail(http.StatusBadRequest, "TTL %q is not one non-negative integer", r.Header.Values("TTL"))
		return
	}
	m.TTL = int(ttl)
	if vs := r.Header.Values("Urgency"); len(vs) > 0 {
		if len(vs) != 1 || !validUrgency(vs[0]) {
			fail(http.StatusBadRequest, "Urgency %q", vs)
			return
		}
		m.Urgency = vs[0]
	}
	if vs := r.Header.Values("Topic"); len(vs) > 0 {
		if len(vs) != 1 || !topicRE.MatchString(vs[0]) {
			fail(http.StatusBadRequest, "Topic %q is not 1 to 32 base64url characters", vs)
			return
		}
		m.Topic = vs[0]
	}
	if err := s.checkVAPID(r.Header.Values("Authorization")); err != nil {
		fail(http.StatusUnauthorized, "VAPID: %v", err)
		return
	}
	if !bodyOK || len(body) > 4096 {
		fail(http.StatusRequestEntityTooLarge, "body of %d bytes, over 4096", len(body))
		return
	}
	if m.Plaintext, err = Decrypt(body, sub.key, sub.auth); err != nil {
		fail(http.StatusBadRequest, "decrypting: %v", err)
		return
	}
	if rep, ok := s.next(endpoint); ok {
		s.wait(r.Context(), rep.Delay)
		if rep.Status != 0 && rep.Status != http.StatusCreated {
			status = rep.Status
			if rep.RetryAfter != "" {
				w.Header().Set("Retry-After", rep.RetryAfter)
			}
			http.Error(w, rep.Reason, status)
			return
		}
	}
	if r.Context().Err() != nil {
		status = 0
		return
	}
	n := s.accepted(m)
	w.Header().Set("Location", s.URL()+"/message/"+strconv.FormatInt(n, 10))
	w.Header().Set("TTL", strconv.FormatUint(ttl, 10))
	w.WriteHeader(http.StatusCreated)
}

// checkVAPID checks "Authorization: vapid t=<JWT>, k=<key>" (RFC 8292).
func (s *WebPush) checkVAPID(vs []string) error {
	if len(vs) != 1 {
		return fmt.Errorf("%d Authorization headers, want 1", len(vs))
	}
	scheme, params, _ := strings.Cut(vs[0], " ")
	if !strings.EqualFold(scheme, "vapid") {
		return fmt.Errorf("scheme %q, want vapid", scheme)
	}
	got := map[string]string{}
	for _, p := range strings.Split(params, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(p), "=")
		name = strings.ToLower(name)
		if !ok || value == "" || got[name] != "" {
			return fmt.Errorf("parameters %q are not t=..., k=...", params)
		}
		got[name] = value
	}
	if len(got) != 2 || got["t"] == "" || got["k"] == "" {
		return fmt.Errorf("parameters %q are not t=..., k=...", params)
	}
	k, err := b64(got["k"])
	if err != nil {
		return fmt.Errorf("k is not base64url")
	}
	if !bytes.Equal(k, s.vapid) {
		return fmt.Errorf("k is not the application server's key")
	}
	h, cl, input, sig, err := jwtParts(got["t"])
	if err != nil {
		return err
	}
	if alg, _ := claimString(h, "alg"); alg != "ES256" {
		return fmt.Errorf("alg %v, want ES256", h["alg"])
	}
	if typ, ok := h["typ"]; ok && typ != "JWT" {
		return fmt.Errorf("typ %v", typ)
	}
	if !verifyES256(s.vapidKey, input, sig) {
		return fmt.Errorf("ES256 signature does not verify with k")
	}
	if aud, _ := claimString(cl, "aud"); aud != s.URL() {
		return fmt.Errorf("aud %v, want the push service's origin %s", cl["aud"], s.URL())
	}
	now := time.Now().Unix()
	exp, ok := claimInt(cl, "exp")
	switch {
	case !ok:
		return fmt.Errorf("exp %v is not an integer", cl["exp"])
	case exp <= now:
		return fmt.Errorf("exp %d is past", exp)
	case exp > now+24*3600:
		return fmt.Errorf("exp %d is over 24 hours ahead", exp)
	}
	sub, _ := claimString(cl, "sub")
	if !validSubject(sub) {
		return fmt.Errorf("sub %q is not a mailto: or https: URI", sub)
	}
	return nil
}

func validSubject(s string) bool {
	if addr, ok := strings.CutPrefix(s, "mailto:"); ok {
		a, err := mail.ParseAddress(addr)
		return err == nil && a.Address == addr
	}
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https" && u.Host != ""
}

// Decrypt decrypts an aes128gcm push message body (RFC 8188 framing, RFC
// 8291 keys) for the user agent whose key is ua and authentication secret
// auth, as a browser would.
func Decrypt(body []byte, ua *ecdh.PrivateKey, auth []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("body shorter than the aes128gcm header")
	}
	salt := body[:16]
	rs := int64(binary.BigEndian.Uint32(body[16:20]))
	idlen := int(body[20])
	if rs < 18 {
		return nil, fmt.Errorf("record size %d under 18", rs)
	}
	if idlen != 65 || len(body) < 21+idlen {
		return nil, fmt.Errorf("keyid of %d bytes, want the 65-byte sender key", idlen)
	}
	asPublic := body[21 : 21+idlen]
	records := body[21+idlen:]
	as, err := ecdh.P256().NewPublicKey(asPublic)
	if err != nil {
		return nil, fmt.Errorf("sender key: %v", err)
	}
	secret, err := ua.ECDH(as)
	if err != nil {
		return nil, err
	}
	// RFC 8291 §3.3-3.4: IKM from the ECDH secret and auth; then RFC 8188
	// §2.2-2.3: the content encryption key and nonce from IKM and salt.
	info := append(append([]byte("WebPush: info\x00"), ua.PublicKey().Bytes()...), asPublic...)
	prkKey, err := hkdf.Extract(sha256.New, secret, auth)
	if err != nil {
		return nil, err
	}
	ikm, err := hkdf.Expand(sha256.New, prkKey, string(info), 32)
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	if len(records) == 0 {
		return nil, errors.New("no records")
	}
	var out []byte
	n := make([]byte, 12)
	for seq := uint64(0); len(records) > 0; seq++ {
		size := int(min(rs, int64(len(records))))
		rec := records[:size]
		records = records[size:]
		last := len(records) == 0
		if len(rec) < 17 {
			return nil, fmt.Errorf("record %d of %d bytes", seq, len(rec))
		}
		copy(n, nonce)
		var s [8]byte
		binary.BigEndian.PutUint64(s[:], seq)
		for i := range 8 {
			n[4+i] ^= s[i]
		}
		pt, err := gcm.Open(nil, n, rec, nil)
		if err != nil {
			return nil, fmt.Errorf("record %d: %v", seq, err)
		}
		j := len(pt) - 1
		for j >= 0 && pt[j] == 0 {
			j--
		}
		switch {
		case j < 0:
			return nil, fmt.Errorf("record %d has no padding delimiter", seq)
		case last && pt[j] != 2:
			return nil, fmt.Errorf("last record's delimiter is %d, want 2", pt[j])
		case !last && pt[j] != 1:
			return nil, fmt.Errorf("record %d's delimiter is %d, want 1", seq, pt[j])
		}
		out = append(out, pt[:j]...)
	}
	return out, nil
}
