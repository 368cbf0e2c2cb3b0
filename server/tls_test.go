package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/server"
)

// selfSigned writes a certificate for 127.0.0.1 and its key; it returns
// their paths and a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "parley-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// With a certificate configured, wss:// and tls:// chat; plaintext on
// either TLS port, and a client that never finishes its handshake, are
// closed within their timeouts; TLS below 1.2 is refused.
func TestTLSListeners(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	ts := startServer(t, func(c *server.Config) {
		c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
		c.AuthTimeout = time.Second
	})
	ctx := ctx10(t)
	tlsCfg := &tls.Config{RootCAs: pool}
	hc := client.HTTPClient{BaseURL: "https://" + ts.HTTPAddr(), Client: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}}
	dial := func(addr, uid string) *client.Client {
		cred, err := hc.MintToken(ctx, testAPIKey, uid, 0)
		if err != nil {
			t.Fatalf("mint over https: %v", err)
		}
		c, err := client.Dial(ctx, client.Options{Addr: addr, Token: cred.Token, DeviceID: uid + "-d", DeviceType: "test", TLSConfig: tlsCfg})
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	alice := dial("wss://"+ts.HTTPAddr()+"/ws", "alice")
	bobC := dial("tls://"+ts.TCPAddr(), "bob")
	if _, err := alice.SendText(ctx, "bob", "over tls"); err != nil {
		t.Fatal(err)
	}
	page, err := bobC.History(ctx, "p:alice:bob", 0, 10)
	if err != nil || len(page.Messages) != 1 || string(page.Messages[0].Payload) != "over tls" {
		t.Fatalf("bob's history over tls://: %v %v", page, err)
	}

	// Plaintext to the TLS TCP port: closed, nothing served.
	for _, addr := range []string{ts.TCPAddr(), ts.HTTPAddr()} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 512)
		n, _ := nc.Read(buf)
		if n > 0 && string(buf[:4]) == "HTTP" && addr == ts.TCPAddr() {
			t.Fatalf("plaintext on the TLS TCP port got an answer: %q", buf[:n])
		}
		if _, err := nc.Read(buf); err == nil {
			t.Fatalf("plaintext connection to %s left open", addr)
		}
		nc.Close()
	}
	// A client that connects and never sends its ClientHello is closed by the auth timeout.
	nc, err := net.Dial("tcp", ts.TCPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("a silent TLS client got bytes")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("a silent TLS client was kept %v (auth timeout 1s)", el)
	}
	// TLS 1.1 is refused.
	_, err = tls.Dial("tcp", ts.TCPAddr(), &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11})
	if err == nil {
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
}
