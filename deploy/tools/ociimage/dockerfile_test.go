package ociimage

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// compareDockerfile holds the Dockerfile's final stage to the daemonless
// image's config, so that `docker build` and CI's build make the same image.
func compareDockerfile(t *testing.T, user string, entrypoint, cmd []string, ports, volumes map[string]struct{}, health []string, labels map[string]string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Instructions of the last stage, continuation lines joined.
	joined := strings.ReplaceAll(string(src), "\\\n", " ")
	var stage []string
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(strings.ToUpper(line), "FROM ") {
			stage = nil
		}
		stage = append(stage, line)
	}
	got := map[string]string{}
	for _, line := range stage {
		op, rest, _ := strings.Cut(line, " ")
		got[strings.ToUpper(op)] = strings.TrimSpace(rest)
	}
	jsonList := func(s string) []string {
		var v []string
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Errorf("Dockerfile: %q is not a JSON list: %v", s, err)
		}
		return v
	}
	if got["USER"] != user {
		t.Errorf("Dockerfile USER %q, image %q", got["USER"], user)
	}
	if e := jsonList(got["ENTRYPOINT"]); !slices.Equal(e, entrypoint) {
		t.Errorf("Dockerfile ENTRYPOINT %q, image %q", e, entrypoint)
	}
	if c := jsonList(got["CMD"]); !slices.Equal(c, cmd) {
		t.Errorf("Dockerfile CMD %q, image %q", c, cmd)
	}
	if e := strings.Fields(got["EXPOSE"]); !slices.Equal(slices.Sorted(slices.Values(e)), slices.Sorted(maps.Keys(ports))) {
		t.Errorf("Dockerfile EXPOSE %q, image %v", e, ports)
	}
	if v := strings.Fields(got["VOLUME"]); !slices.Equal(v, slices.Sorted(maps.Keys(volumes))) {
		t.Errorf("Dockerfile VOLUME %q, image %v", v, volumes)
	}
	if _, hc, ok := strings.Cut(got["HEALTHCHECK"], " CMD "); !ok || !slices.Equal(append([]string{"CMD"}, jsonList(hc)...), health) {
		t.Errorf("Dockerfile HEALTHCHECK %q, image %q", got["HEALTHCHECK"], health)
	}
	// LABEL k="v" ...: the same keys; fixed values equal (build args aside).
	dl := map[string]string{}
	for _, m := range regexp.MustCompile(`([\w.]+)="([^"]*)"`).FindAllStringSubmatch(got["LABEL"], -1) {
		dl[m[1]] = m[2]
	}
	if !slices.Equal(slices.Sorted(maps.Keys(dl)), slices.Sorted(maps.Keys(labels))) {
		t.Errorf("Dockerfile labels %v, image labels %v", slices.Sorted(maps.Keys(dl)), slices.Sorted(maps.Keys(labels)))
	}
	for k, v := range dl {
		if !strings.Contains(v, "${") && labels[k] != v {
			t.Errorf("label %s: Dockerfile %q, image %q", k, v, labels[k])
		}
	}
}
