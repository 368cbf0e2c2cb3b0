// Command parley-image writes Parley's container image as an OCI image
// layout directory and/or a `docker load` tarball, without a Docker daemon
// and without pulling a base image (see deploy/tools/ociimage).
//
//	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$V" -o parley ./cmd/parley
//	cd deploy/tools && go run ./cmd/parley-image --binary ../../parley --version $V \
//	    --revision $(git rev-parse HEAD) --created $(git log -1 --format=%cI) \
//	    --layout /tmp/parley-oci --tarball /tmp/parley.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/parleyim/parley/deploy/tools/ociimage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "parley-image:", err)
		os.Exit(1)
	}
}

func run() error {
	binary := flag.String("binary", "", "static linux build of ./cmd/parley (required)")
	config := flag.String("config", "../container/parley.yaml", "the image's /etc/parley/parley.yaml")
	caBundle := flag.String("ca-bundle", "", "PEM CA roots to put at /etc/ssl/certs/ca-certificates.crt (e.g. the build machine's)")
	version := flag.String("version", "dev", "image version label")
	revision := flag.String("revision", "", "source commit label")
	created := flag.String("created", "1970-01-01T00:00:00Z", "creation time (RFC 3339; the commit's time keeps the build reproducible)")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH of --binary")
	layoutDir := flag.String("layout", "", "write an OCI image layout here")
	tarPath := flag.String("tarball", "", "write a `docker load` tarball here")
	tag := flag.String("tag", "parley:dev", "the tarball's image name")
	flag.Parse()
	if *binary == "" || (*layoutDir == "" && *tarPath == "") {
		return fmt.Errorf("need --binary and --layout or --tarball")
	}
	t, err := time.Parse(time.RFC3339, *created)
	if err != nil {
		return fmt.Errorf("--created: %w", err)
	}
	spec := ociimage.Spec{Version: *version, Revision: *revision, Created: t, Arch: *arch}
	if err := ociimage.ReadSpecFiles(&spec, *binary, *config, *caBundle); err != nil {
		return err
	}
	img, err := ociimage.Build(spec)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if *layoutDir != "" {
		if err := os.RemoveAll(*layoutDir); err != nil {
			return err
		}
		p, err := layout.Write(*layoutDir, empty.Index)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img); err != nil {
			return err
		}
	}
	if *tarPath != "" {
		ref, err := name.NewTag(*tag)
		if err != nil {
			return err
		}
		if err := tarball.WriteToFile(*tarPath, ref, img); err != nil {
			return err
		}
	}
	fmt.Println(digest)
	return nil
}
