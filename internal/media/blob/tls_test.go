package blob_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/media/blob/blobtest"
)

// proxyCert is the certificate of TestS3OverTLS's proxy. TestMain makes
// it and names it in SSL_CERT_FILE, which Go reads the first time it
// verifies a certificate, so the S3 store (and the test's own GETs) trust
// it with no test knob in the store's config.
var proxyCert tls.Certificate

func TestMain(m *testing.M) {
	var cleanup func()
	if os.Getenv(s3Env) != "" {
		var err error
		if cleanup, err = trustTestCert(); err != nil {
			fmt.Fprintln(os.Stderr, "making the test certificate:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	os.Exit(code)
}

func trustTestCert() (func(), error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "parley blob test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if proxyCert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "blob-tls")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(file, certPEM, 0o600); err != nil {
		return nil, err
	}
	os.Setenv("SSL_CERT_FILE", file)
	return func() { os.RemoveAll(dir) }, nil
}

// TestS3OverTLS runs the suite through a TLS proxy in front of the test
// server: over https the store streams Puts of known size (aws-chunked
// with a trailing checksum) instead of buffering them, and a stream cut
// short must still leave nothing.
func TestS3OverTLS(t *testing.T) {
	s3TestConfig(t) // skips without a server
	blobtest.Run(t, func(t *testing.T) blob.Store {
		cfg := s3TestConfig(t)
		target, err := url.Parse(cfg.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.ErrorLog = log.New(io.Discard, "", 0) // the suite cuts uploads short on purpose
		srv := httptest.NewUnstartedServer(proxy)
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{proxyCert}}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		direct := cfg
		cfg.Endpoint = srv.URL
		s, err := blob.NewS3(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { emptyPrefix(t, direct) })
		return s
	})
}
