package ociimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

const repoRoot = "../../.."

// buildParley builds ./cmd/parley as the Dockerfile does: static, trimmed.
func buildParley(t *testing.T) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "parley")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=v0.0.0-test", "-o", bin, "./cmd/parley")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ociConfig is the part of an OCI/Docker image config this test reads,
// decoded by hand from the layout's files rather than through the library
// that wrote them.
type ociConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User         string              `json:"User"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Volumes      map[string]struct{} `json:"Volumes"`
		Labels       map[string]string   `json:"Labels"`
		Healthcheck  *struct {
			Test []string `json:"Test"`
		} `json:"Healthcheck"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
}

func readBlob(t *testing.T, dir, digest string) []byte {
	t.Helper()
	alg, hex, ok := strings.Cut(digest, ":")
	if !ok || alg != "sha256" {
		t.Fatalf("digest %q", digest)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blobs", alg, hex))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The daemonless image: built twice from the same inputs it has the same
// digest; its config says what an operator relies on (non-root user, the
// entrypoint, the ports, the /data volume, the health check, the labels),
// the same as the Dockerfile's final stage; its one layer holds a static
// binary and the user's passwd entry; and that binary, run with the image's
// entrypoint and arguments, serves /healthz, passes the image's own health
// check, and exits 0 on SIGTERM.
func TestImage(t *testing.T) {
	cfgYAML, err := os.ReadFile(filepath.Join(repoRoot, "deploy/container/parley.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Binary: buildParley(t), Config: cfgYAML, CABundle: []byte("-----BEGIN CERTIFICATE-----\n"), Version: "v0.0.0-test", Revision: "abc123",
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Arch: runtime.GOARCH}
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Fatalf("two builds from the same inputs: %s and %s", d1, d2)
	}

	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}

	// index.json -> manifest -> config and layers, as any OCI tool reads them.
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(dir, "index.json"))), &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v %+v", err, index)
	}
	if index.Manifests[0].MediaType != "application/vnd.oci.image.manifest.v1+json" || index.Manifests[0].Digest != d1.String() {
		t.Fatalf("index.json names %+v, want the OCI manifest %s", index.Manifests[0], d1)
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(readBlob(t, dir, d1.String()), &manifest); err != nil {
		t.Fatal(err)
	}
	var cfg ociConfig
	if err := json.Unmarshal(readBlob(t, dir, manifest.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	if uid, _, _ := strings.Cut(c.User, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("User %q: the server must not run as root", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/parley"}) || !slices.Equal(c.Cmd, []string{"serve", "--config", "/etc/parley/parley.yaml"}) {
		t.Errorf("Entrypoint %q Cmd %q", c.Entrypoint, c.Cmd)
	}
	for _, port := range []string{"8080/tcp", "7070/tcp", "6222/tcp"} {
		if _, ok := c.ExposedPorts[port]; !ok {
			t.Errorf("port %s not exposed: %v", port, c.ExposedPorts)
		}
	}
	if _, ok := c.Volumes["/data"]; !ok {
		t.Errorf("/data is not a volume: %v", c.Volumes)
	}
	if c.Healthcheck == nil || !slices.Equal(c.Healthcheck.Test, []string{"CMD", "/parley", "healthcheck"}) {
		t.Errorf("Healthcheck %+v", c.Healthcheck)
	}
	for k, want := range map[string]string{"title": "parley", "version": "v0.0.0-test", "revision": "abc123",
		"created": "2026-01-02T03:04:05Z", "source": "https://github.com/parleyim/parley", "licenses": "MIT"} {
		if got := c.Labels["org.opencontainers.image."+k]; got != want {
			t.Errorf("label org.opencontainers.image.%s = %q, want %q", k, got, want)
		}
	}
	compareDockerfile(t, c.User, c.Entrypoint, c.Cmd, c.ExposedPorts, c.Volumes, c.Healthcheck.Test, c.Labels)

	// The layer, unpacked as a runtime would.
	if len(manifest.Layers) != 1 || len(cfg.RootFS.DiffIDs) != 1 {
		t.Fatalf("%d layers, %d diff ids: want one", len(manifest.Layers), len(cfg.RootFS.DiffIDs))
	}
	root := t.TempDir()
	owners := unpack(t, readBlob(t, dir, manifest.Layers[0].Digest), root)
	uid, _, _ := strings.Cut(c.User, ":")
	if !regexp.MustCompile(`(?m)^\w+:x:` + uid + `:`).Match(must(os.ReadFile(filepath.Join(root, "etc/passwd")))) {
		t.Errorf("/etc/passwd has no entry for the image's user %s", uid)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")); err != nil || !bytes.Equal(b, spec.CABundle) {
		t.Errorf("the CA roots are not at /etc/ssl/certs/ca-certificates.crt (Go's default path): %v", err)
	}
	if owners["data/"] != uid {
		t.Errorf("/data is owned by %q, want the image's user %s (a new volume takes its owner)", owners["data/"], uid)
	}
	bin := filepath.Join(root, "parley")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("/parley asks for a dynamic loader: not static (it would not start on distroless/scratch)")
		}
	}
	f.Close()

	// Run it as the image says, on loopback and a data directory of the test's.
	args := slices.Clone(c.Cmd)
	args[2] = filepath.Join(root, "etc/parley/parley.yaml")
	args = append(args, "--http", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--data", t.TempDir())
	cmd := exec.Command(filepath.Join(root, c.Entrypoint[0]), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "HTTP" && f[1] == "API" {
				addrs <- f[2]
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	var base string
	select {
	case base = <-addrs:
	case err := <-exited:
		exited <- err
		t.Fatalf("the image's command exited: %v\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the image's command printed no HTTP address\n%s", stderr.String())
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz answered %s", resp.Status)
	}
	hc := c.Healthcheck.Test[1:] // after "CMD"
	check := exec.Command(filepath.Join(root, hc[0]), append(slices.Clone(hc[1:]), "--url", base+"/healthz")...)
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("the image's health check failed on a serving node: %v\n%s", err, out)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("after SIGTERM: %v, want exit 0\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30 s after SIGTERM\n%s", stderr.String())
	}
}

// unpack extracts a gzipped layer under root and returns each entry's owner uid.
func unpack(t *testing.T, blob []byte, root string) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("layer entry %q escapes the root", h.Name)
		}
		owners[h.Name] = strconv.Itoa(h.Uid)
		p := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.WriteFile(p, must(io.ReadAll(tr)), os.FileMode(h.Mode)&0o777); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("layer entry %q of type %c", h.Name, h.Typeflag)
		}
	}
	return owners
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
