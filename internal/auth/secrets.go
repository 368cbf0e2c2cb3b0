package auth

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Secrets are the keys a server needs. Any missing from the configuration is
// generated at first start and kept in the data directory (mode 0600), so no
// secret is ever hard-coded and restarts keep tokens valid.
type Secrets struct {
	TokenKey     string   `json:"token_key"`
	AppSecret    string   `json:"app_secret"`
	AdminAPIKeys []string `json:"admin_api_keys"`
	// WebhookSecret signs webhook requests (X-Parley-Signature).
	WebhookSecret string `json:"webhook_secret"`
	// VAPIDPublicKey and VAPIDPrivateKey identify this server to browsers'
	// push services (Web Push, RFC 8292): a P-256 key pair, base64url
	// (the 65-byte uncompressed public point, the 32-byte private scalar).
	VAPIDPublicKey  string `json:"vapid_public_key"`
	VAPIDPrivateKey string `json:"vapid_private_key"`
}

// SecretsFile is the file name of generated secrets inside the data directory.
const SecretsFile = "secrets.json"

// LoadOrCreateSecrets fills the empty fields of given from dir/secrets.json,
// generating and saving any that are still missing.
func LoadOrCreateSecrets(dir string, given Secrets) (Secrets, error) {
	path := filepath.Join(dir, SecretsFile)
	var saved Secrets
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &saved); err != nil {
			return Secrets{}, fmt.Errorf("auth: %s is not valid JSON: %w", path, err)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return Secrets{}, err
	}
	changed := false
	fill := func(v *string) {
		if *v == "" {
			*v = randomHex(32)
			changed = true
		}
	}
	fill(&saved.TokenKey)
	fill(&saved.AppSecret)
	fill(&saved.WebhookSecret)
	if saved.VAPIDPublicKey == "" || saved.VAPIDPrivateKey == "" {
		saved.VAPIDPublicKey, saved.VAPIDPrivateKey = NewVAPIDKeys()
		changed = true
	}
	if len(saved.AdminAPIKeys) == 0 {
		saved.AdminAPIKeys = []string{randomHex(24)}
		changed = true
	}
	if changed {
		out, _ := json.MarshalIndent(saved, "", "  ")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return Secrets{}, err
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, out, 0o600); err != nil {
			return Secrets{}, err
		}
		if err := os.Rename(tmp, path); err != nil {
			return Secrets{}, err
		}
	}
	res := given
	if res.TokenKey == "" {
		res.TokenKey = saved.TokenKey
	}
	if res.AppSecret == "" {
		res.AppSecret = saved.AppSecret
	}
	if len(res.AdminAPIKeys) == 0 {
		res.AdminAPIKeys = saved.AdminAPIKeys
	}
	if res.WebhookSecret == "" {
		res.WebhookSecret = saved.WebhookSecret
	}
	if res.VAPIDPublicKey == "" && res.VAPIDPrivateKey == "" {
		res.VAPIDPublicKey, res.VAPIDPrivateKey = saved.VAPIDPublicKey, saved.VAPIDPrivateKey
	}
	return res, nil
}

// NewVAPIDKeys makes a P-256 key pair in the form Web Push libraries and
// browsers use: base64url without padding.
func NewVAPIDKeys() (public, private string) {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		panic("auth: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(k.Bytes())
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("auth: no randomness: " + err.Error()) // the OS RNG failing is unrecoverable
	}
	return hex.EncodeToString(b)
}
