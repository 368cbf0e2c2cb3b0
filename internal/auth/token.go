package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issuer of the tokens Parley signs itself (login, register, admin API).
const Issuer = "parley"

// ErrInvalidToken covers every reason a token is refused. Clients are told no
// more than that; the reason is never echoed.
var ErrInvalidToken = errors.New("auth: invalid token")

// Claims are the claims Parley reads from a token.
type Claims struct {
	UserID    string
	TokenID   string // jti; empty for app-minted tokens without one
	Epoch     uint64 // the user's token epoch at issue time
	ExpiresAt time.Time
	// ShadowMuted is not the token's: the chat service sets it from the
	// user's record when it authenticates the token.
	ShadowMuted bool
}

type jwtClaims struct {
	jwt.RegisteredClaims
	Epoch uint64 `json:"ver,omitempty"`
}

// verifyClaims are the claims as Verify decodes them: the registered
// claims of jwt.RegisteredClaims, but exp, iat and nbf must be JSON numbers
// (RFC 7519 NumericDate). The jwt library also takes a numeric string
// ("exp":"1700000000"), which no conforming issuer sends.
type verifyClaims struct {
	Issuer    string           `json:"iss"`
	Subject   string           `json:"sub"`
	Audience  jwt.ClaimStrings `json:"aud"`
	ExpiresAt *numericDate     `json:"exp"`
	NotBefore *numericDate     `json:"nbf"`
	IssuedAt  *numericDate     `json:"iat"`
	ID        string           `json:"jti"`
	Epoch     uint64           `json:"ver"`
}

// numericDate is a jwt.NumericDate that only decodes from a JSON number.
type numericDate struct{ jwt.NumericDate }

var errNotNumericDate = errors.New("auth: a date claim is not a JSON number")

func (d *numericDate) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return errNotNumericDate
	}
	return d.NumericDate.UnmarshalJSON(b)
}

func (d *numericDate) date() *jwt.NumericDate {
	if d == nil {
		return nil
	}
	return &d.NumericDate
}

func (c *verifyClaims) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt.date(), nil }
func (c *verifyClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return c.IssuedAt.date(), nil }
func (c *verifyClaims) GetNotBefore() (*jwt.NumericDate, error)      { return c.NotBefore.date(), nil }
func (c *verifyClaims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c *verifyClaims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c *verifyClaims) GetAudience() (jwt.ClaimStrings, error)       { return c.Audience, nil }

// Tokens signs and verifies HS256 JWTs. Tokens it issues carry iss "parley";
// tokens an app mints with the app secret carry iss AppIssuer. Both must name
// Audience and carry an expiry.
type Tokens struct {
	key       []byte // signs and verifies iss=parley tokens
	appSecret []byte // verifies iss=AppIssuer tokens; nil disables app-minted tokens
	appIssuer string
	audience  string
	parser    *jwt.Parser
	now       func() time.Time

	// verified remembers tokens whose signature and claims passed, keyed by
	// the first 128 bits of the token's SHA-256 (finding another token with
	// the key of a valid one is a second preimage: 2^128 work), so a client reconnecting with the same token (the
	// common case, and all of a reconnect storm) skips the HMAC and the JSON
	// decoding. Only expiry can make such a token invalid later (the keys
	// never change; revocation is the caller's check on every use).
	mu       sync.Mutex
	verified map[tokenKey]Claims // guarded by mu; at most verifiedCap entries
}

type tokenKey [16]byte

// verifiedCap bounds Tokens.verified (~100 bytes an entry, ~1 MB in all):
// enough for the reconnects of a busy node, small beside its connections.
const verifiedCap = 8192

// leeway is the clock skew allowed on exp, iat and nbf.
const leeway = 30 * time.Second

// NewTokens builds a signer/verifier. key must be at least 32 bytes.
func NewTokens(key, appSecret []byte, appIssuer, audience string) (*Tokens, error) {
	if len(key) < 32 {
		return nil, errors.New("auth: token key shorter than 32 bytes")
	}
	if appSecret != nil && len(appSecret) < 32 {
		return nil, errors.New("auth: app secret shorter than 32 bytes")
	}
	if appIssuer == "" || appIssuer == Issuer {
		return nil, errors.New("auth: app issuer must be set and differ from \"parley\"")
	}
	if audience == "" {
		return nil, errors.New("auth: audience must be set")
	}
	t := &Tokens{
		key: key, appSecret: appSecret, appIssuer: appIssuer, audience: audience,
		now:      time.Now,
		verified: make(map[tokenKey]Claims),
	}
	t.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		// One spelling per token: unused trailing base64 bits must be zero.
		jwt.WithStrictDecoding(),
		jwt.WithAudience(audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(func() time.Time { return t.now() }),
	)
	return t, nil
}

// Issue signs a token for userID valid for ttl.
func (t *Tokens) Issue(userID string, epoch uint64, ttl time.Duration) (token string, c Claims, err error) {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", Claims{}, err
	}
	now := time.Now()
	c = Claims{UserID: userID, TokenID: hex.EncodeToString(id), Epoch: epoch, ExpiresAt: now.Add(ttl).Truncate(time.Second)}
	jc := jwtClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    Issuer,
			Subject:   userID,
			Audience:  jwt.ClaimStrings{t.audience},
			ExpiresAt: jwt.NewNumericDate(c.ExpiresAt),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        c.TokenID,
		},
		Epoch: epoch,
	}
	token, err = jwt.NewWithClaims(jwt.SigningMethodHS256, jc).SignedString(t.key)
	return token, c, err
}

// Verify checks signature, algorithm (HS256 only: alg=none and others are
// refused), issuer, audience and expiry. Revocation is the caller's check.
func (t *Tokens) Verify(token string) (Claims, error) {
	if len(token) == 0 || len(token) > 4096 {
		return Claims{}, ErrInvalidToken
	}
	full := sha256.Sum256([]byte(token))
	sum := tokenKey(full[:16])
	t.mu.Lock()
	c, ok := t.verified[sum]
	t.mu.Unlock()
	if ok {
		// As the parser judges exp: expired once now is past exp + leeway.
		if t.now().After(c.ExpiresAt.Add(leeway)) {
			t.mu.Lock()
			delete(t.verified, sum)
			t.mu.Unlock()
			return Claims{}, ErrInvalidToken
		}
		return c, nil
	}
	var jc verifyClaims
	_, err := t.parser.ParseWithClaims(token, &jc, func(tok *jwt.Token) (any, error) {
		// The issuer picks the key; an unknown issuer has none.
		switch jc.Issuer {
		case Issuer:
			return t.key, nil
		case t.appIssuer:
			if t.appSecret != nil {
				return t.appSecret, nil
			}
		}
		return nil, ErrInvalidToken
	})
	if err != nil || jc.Subject == "" || jc.ExpiresAt == nil {
		return Claims{}, ErrInvalidToken
	}
	c = Claims{UserID: jc.Subject, TokenID: jc.ID, Epoch: jc.Epoch, ExpiresAt: jc.ExpiresAt.Time}
	t.mu.Lock()
	if len(t.verified) >= verifiedCap {
		for k := range t.verified { // drop one, in the map's random order
			delete(t.verified, k)
			break
		}
	}
	t.verified[sum] = c
	t.mu.Unlock()
	return c, nil
}
