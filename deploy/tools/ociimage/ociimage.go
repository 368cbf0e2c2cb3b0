// Package ociimage builds Parley's container image without a Docker daemon
// or a base image from a registry: one layer on an empty base holding the
// static binary, a passwd entry for the non-root user, the image's config
// file and the /data and /tmp directories. Its image config matches the
// Dockerfile's final stage (a test holds the two together), so an image built
// here and one built by `docker build` run the same way.
//
// The build is reproducible: every file time is the image's creation time
// and every owner fixed, so the same binary, config and creation time give
// the same digest.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the server runs as: distroless's "nonroot", so the Dockerfile's
// image and this one own /data the same way.
const (
	UID  = 65532
	User = "65532:65532"
)

// What the image's config says; the Dockerfile says the same.
var (
	Entrypoint   = []string{"/parley"}
	Cmd          = []string{"serve", "--config", "/etc/parley/parley.yaml"}
	ExposedPorts = []string{"8080/tcp", "7070/tcp", "6222/tcp"} // HTTP+WebSocket, TCP, NATS routes
	Volumes      = []string{"/data"}
	Healthcheck  = v1.HealthConfig{
		Test:        []string{"CMD", "/parley", "healthcheck"},
		Interval:    30 * time.Second,
		Timeout:     5 * time.Second,
		StartPeriod: 30 * time.Second,
		Retries:     3,
	}
)

// Spec is what goes into one image.
type Spec struct {
	Binary   []byte    // a static linux build of ./cmd/parley
	Config   []byte    // deploy/container/parley.yaml
	CABundle []byte    // PEM roots for outgoing TLS (push, S3, webhooks); nil: none
	Version  string    // org.opencontainers.image.version
	Revision string    // the source commit
	Created  time.Time // the commit's time, for a reproducible image
	Arch     string    // GOARCH of Binary
}

// Labels are the image's org.opencontainers.image.* labels.
func (s Spec) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "parley",
		"org.opencontainers.image.description": "Parley IM server (web client embedded)",
		"org.opencontainers.image.source":      "https://github.com/parleyim/parley",
		"org.opencontainers.image.url":         "https://github.com/parleyim/parley",
		"org.opencontainers.image.licenses":    "MIT",
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.revision":    s.Revision,
		"org.opencontainers.image.created":     s.Created.UTC().Format(time.RFC3339),
	}
}

// Build makes the image.
func Build(s Spec) (v1.Image, error) {
	if len(s.Binary) == 0 {
		return nil, fmt.Errorf("ociimage: no binary")
	}
	if s.Arch == "" {
		return nil, fmt.Errorf("ociimage: no architecture")
	}
	created := s.Created.UTC().Truncate(time.Second)
	layerTar, err := rootfs(s, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "parley-image", Comment: "parley " + s.Version},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = s.Arch, "linux"
	cf.Created = v1.Time{Time: created}
	hc := Healthcheck
	cf.Config = v1.Config{
		User:         User,
		Entrypoint:   Entrypoint,
		Cmd:          Cmd,
		ExposedPorts: set(ExposedPorts),
		Volumes:      set(Volumes),
		Labels:       s.Labels(),
		Healthcheck:  &hc,
		WorkingDir:   "/",
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
	}
	return mutate.ConfigFile(img, cf)
}

func set(keys []string) map[string]struct{} {
	m := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		m[k] = struct{}{}
	}
	return m
}

// rootfs is the layer's tar: directories first, every time and owner fixed.
func rootfs(s Spec, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	type entry struct {
		name string
		mode int64
		uid  int
		body []byte
		dir  bool
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, UID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID)
	entries := []entry{
		{name: "data/", mode: 0o700, uid: UID, dir: true},
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/parley/", mode: 0o755, dir: true},
		{name: "etc/parley/parley.yaml", mode: 0o644, body: s.Config},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: UID, dir: true},
		{name: "parley", mode: 0o755, body: s.Binary},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	if s.CABundle != nil {
		entries = append(entries,
			entry{name: "etc/ssl/", mode: 0o755, dir: true},
			entry{name: "etc/ssl/certs/", mode: 0o755, dir: true},
			entry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: s.CABundle})
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadSpecFiles fills the file parts of a Spec from paths (caBundle may be "").
func ReadSpecFiles(s *Spec, binary, config, caBundle string) error {
	var err error
	if s.Binary, err = os.ReadFile(binary); err != nil {
		return err
	}
	if s.Config, err = os.ReadFile(config); err != nil {
		return err
	}
	if caBundle != "" {
		if s.CABundle, err = os.ReadFile(caBundle); err != nil {
			return err
		}
	}
	return nil
}
