package auth

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
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
}

type jwtClaims struct {
	jwt.RegisteredClaims
	Epoch uint64 `json:"ver,omitempty"`
}

// Tokens signs and verifies HS256 JWTs. Tokens it issues carry iss "parley";
// tokens an app mints with the app secret carry iss AppIssuer. Both must name
// Audience and carry an expiry.
type Tokens struct {
	key       []byte // signs and verifies iss=parley tokens
	appSecret []byte // verifies iss=AppIssuer tokens; nil disables app-minted tokens
	appIssuer string
	audience  string
	parser    *jwt.Parser
}

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
	return &Tokens{
		key: key, appSecret: appSecret, appIssuer: appIssuer, audience: audience,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithAudience(audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(30*time.Second),
		),
	}, nil
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
	var jc jwtClaims
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
	return Claims{UserID: jc.Subject, TokenID: jc.ID, Epoch: jc.Epoch, ExpiresAt: jc.ExpiresAt.Time}, nil
}
