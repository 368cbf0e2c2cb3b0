package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/parleyim/parley/internal/notify/standin"
)

// PushProvider is the push platform push-offline's server sends to: a
// local stand-in for FCM's HTTP v1 API (and its OAuth 2 token endpoint)
// that checks each request as FCM would and counts what it accepts. The
// server must be configured for it (ServerYAML, or Configure for an
// embedded server); its keys live in a directory so a server started
// before the bench, in another process, can use them.
type PushProvider struct {
	FCM *standin.FCM
	// Dir holds ca.pem (the stand-in's certificate, for push_ca_file),
	// fcm.json (its service account, for fcm_credentials_file), the two
	// private keys and server.yaml (the server's settings for it).
	Dir string
}

// The stand-in's files in Dir.
const (
	providerCA      = "ca.pem"
	providerTLSKey  = "tls-key.pem"
	providerSAKey   = "service-account-key.pem"
	providerFCMJSON = "fcm.json"
	providerYAML    = "server.yaml"
	providerProject = "parley-bench"
)

// StartPushProvider starts the stand-in on addr with the keys in dir (made
// there, with the directory, when missing) and (re)writes dir's fcm.json
// and server.yaml for the address it listens on. Close it when done.
func StartPushProvider(dir, addr string) (*PushProvider, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cert, err := loadOrMakeCert(dir)
	if err != nil {
		return nil, fmt.Errorf("push stand-in certificate: %w", err)
	}
	key, err := loadOrMakeRSA(filepath.Join(dir, providerSAKey))
	if err != nil {
		return nil, fmt.Errorf("push stand-in service account key: %w", err)
	}
	f, err := standin.NewFCMWith(standin.FCMConfig{Project: providerProject, Key: key,
		Listen: standin.Listen{Addr: addr, Cert: &cert}})
	if err != nil {
		return nil, fmt.Errorf("push stand-in on %s: %w", addr, err)
	}
	f.SetKeep(0) // counted, not kept: a run makes too many to keep
	p := &PushProvider{FCM: f, Dir: dir}
	if err := p.writeConfig(); err != nil {
		f.Close()
		return nil, err
	}
	return p, nil
}

// Endpoint is the stand-in's origin (the server's fcm_endpoint).
func (p *PushProvider) Endpoint() string { return p.FCM.URL() }

// CAFile, CredentialsFile and ServerYAML are the files of Dir the server
// is configured with.
func (p *PushProvider) CAFile() string          { return filepath.Join(p.Dir, providerCA) }
func (p *PushProvider) CredentialsFile() string { return filepath.Join(p.Dir, providerFCMJSON) }
func (p *PushProvider) ServerYAML() string      { return filepath.Join(p.Dir, providerYAML) }

// Close stops the stand-in (its files stay).
func (p *PushProvider) Close() { p.FCM.Close() }

func (p *PushProvider) writeConfig() error {
	if err := os.WriteFile(p.CredentialsFile(), p.FCM.CredentialsJSON(), 0o600); err != nil {
		return err
	}
	y := fmt.Sprintf(`# The settings that make a Parley server send its FCM notifications to the
# stand-in of parley bench push-offline: start the server with
# --config %s, or copy these keys into your config file.
fcm_credentials_file: %q
fcm_endpoint: %q
push_ca_file: %q
`, p.ServerYAML(), p.CredentialsFile(), p.Endpoint(), p.CAFile())
	return os.WriteFile(p.ServerYAML(), []byte(y), 0o600)
}

// loadOrMakeCert reads dir's certificate and key, or makes a self-signed
// pair for the loopback addresses.
func loadOrMakeCert(dir string) (tls.Certificate, error) {
	certFile, keyFile := filepath.Join(dir, providerCA), filepath.Join(dir, providerTLSKey)
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return c, err
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "parley bench push stand-in"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		// Self-signed and trusted as is (push_ca_file): it is its own CA.
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return tls.Certificate{}, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(certFile, keyFile)
}

// loadOrMakeRSA reads an RSA key (PKCS #8 PEM) from file, or makes one there.
func loadOrMakeRSA(file string) (*rsa.PrivateKey, error) {
	b, err := os.ReadFile(file)
	if err == nil {
		blk, _ := pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("%s: not PEM", file)
		}
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: not an RSA key", file)
		}
		return rk, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return k, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}
