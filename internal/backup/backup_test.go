package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCheckpoint "checkpoints" a store by copying the files of src.
func fakeCheckpoint(src string) func(context.Context, string) error {
	return func(_ context.Context, dest string) error {
		if err := os.MkdirAll(dest, 0o700); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dest, e.Name()), b, 0o600); err != nil {
				return err
			}
		}
		return nil
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dataDir makes a data directory with a store, media and secrets, and
// returns it with an archive of it.
func archiveOf(t *testing.T, secrets bool) (string, []byte) {
	t.Helper()
	data := t.TempDir()
	writeFile(t, filepath.Join(data, "store", "000001.sst"), strings.Repeat("table ", 1000))
	writeFile(t, filepath.Join(data, "store", "MANIFEST-000001"), "manifest")
	writeFile(t, filepath.Join(data, "media", "ab", "cd"), "a picture")
	writeFile(t, filepath.Join(data, "media", ".tmp", "put-1"), "half an upload")
	writeFile(t, filepath.Join(data, "secrets.json"), `{"token_key":"k"}`)
	snap, err := Prepare(context.Background(), Source{DataDir: data, Checkpoint: fakeCheckpoint(filepath.Join(data, "store")),
		Media: true, Secrets: secrets, ParleyVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data, TempDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("snapshot left after Close: %v", err)
	}
	return data, buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	_, arch := archiveOf(t, true)
	dir := filepath.Join(t.TempDir(), "restored")
	m, err := Restore(bytes.NewReader(arch), dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"store/000001.sst":      strings.Repeat("table ", 1000),
		"store/MANIFEST-000001": "manifest",
		"media/ab/cd":           "a picture",
		"secrets.json":          `{"token_key":"k"}`,
	}
	if len(m.Files) != len(want) {
		t.Fatalf("manifest lists %+v, want the %d files %v (no media temporaries)", m.Files, len(want), want)
	}
	for name, content := range want {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil || string(b) != content {
			t.Fatalf("%s restored as %q, %v", name, b, err)
		}
	}
	if m.Format != FormatVersion || m.ParleyVersion != "test" {
		t.Fatalf("manifest %+v", m)
	}
	// Into an existing empty directory too; never into a non-empty one.
	empty := t.TempDir()
	if _, err := Restore(bytes.NewReader(arch), empty, Limits{}); err != nil {
		t.Fatalf("restore into an empty directory: %v", err)
	}
	if _, err := Restore(bytes.NewReader(arch), dir, Limits{}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("restore into a non-empty directory: %v, want ErrNotEmpty", err)
	}
	_, noSecrets := archiveOf(t, false)
	m, err = Verify(bytes.NewReader(noSecrets), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		if f.Path == SecretsFile {
			t.Fatal("secrets.json archived without Secrets")
		}
	}
}

// refuseRestore checks that restoring arch fails with ErrInvalid and leaves
// nothing: neither the target nor a staging directory beside it.
func refuseRestore(t *testing.T, what string, arch []byte) {
	t.Helper()
	parent := t.TempDir()
	dir := filepath.Join(parent, "restored")
	_, err := Restore(bytes.NewReader(arch), dir, Limits{MaxFileBytes: 1 << 20})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("%s: restore: %v, want ErrInvalid", what, err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) > 0 {
		t.Fatalf("%s: restore failed but left %s", what, entries[0].Name())
	}
	if _, err := Verify(bytes.NewReader(arch), Limits{MaxFileBytes: 1 << 20}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("%s: verify: %v, want ErrInvalid", what, err)
	}
}

// TestCorruptOrTruncated: a flipped byte anywhere in a file, or an archive
// cut anywhere, is refused and nothing is restored.
func TestCorruptOrTruncated(t *testing.T) {
	_, arch := archiveOf(t, true)
	i := bytes.Index(arch, []byte("table table"))
	bad := bytes.Clone(arch)
	bad[i+3] ^= 1
	refuseRestore(t, "a flipped byte", bad)
	for _, n := range []int{0, 100, 512, 1024, i + 10, len(arch) / 2, len(arch) - 1100, len(arch) - 1025, len(arch) - 700, len(arch) - 1} {
		refuseRestore(t, fmt.Sprintf("cut at %d of %d", n, len(arch)), arch[:n])
	}
	// The manifest's own figures tampered with.
	j := bytes.LastIndex(arch, []byte(`"size":8`))
	bad = bytes.Clone(arch)
	bad[j+7] = '9'
	refuseRestore(t, "a manifest size changed", bad)
}

type entry struct {
	hdr  tar.Header
	body string
}

// craft writes a tar of the given entries, with a valid header first and
// a manifest that matches whatever files precede it (a malicious archive
// made with care).
func craft(t *testing.T, format int, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	put := func(h tar.Header, body string) {
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		h.Mode = 0o600
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			t.Fatal(err)
		}
	}
	hb, _ := json.Marshal(Header{Format: format, ParleyVersion: "x"})
	put(tar.Header{Name: HeaderName}, string(hb))
	for _, e := range entries {
		put(e.hdr, e.body)
	}
	mb, _ := json.Marshal(Manifest{Format: format, ParleyVersion: "x", Files: []File{}})
	put(tar.Header{Name: ManifestName}, string(mb))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestMaliciousArchives: names that leave the directory, links, absurd
// sizes and unknown formats are refused before anything lands outside the
// staging directory, and nothing is restored.
func TestMaliciousArchives(t *testing.T) {
	for _, name := range []string{"../evil", "store/../../evil", "/tmp/evil", "store/./x", "store//x", "other/x",
		"media/..", `store\..\evil`, strings.Repeat("a/", 3000) + "x"} {
		refuseRestore(t, "name "+name, craft(t, FormatVersion, entry{tar.Header{Name: name}, "pwned"}))
	}
	if _, err := os.Stat(filepath.Join(os.TempDir(), "evil")); err == nil {
		t.Fatal("a file was written outside the target")
	}
	refuseRestore(t, "a symlink", craft(t, FormatVersion, entry{tar.Header{Name: "store/l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, ""}))
	refuseRestore(t, "a hard link", craft(t, FormatVersion, entry{tar.Header{Name: "store/l", Typeflag: tar.TypeLink, Linkname: "../../x"}, ""}))
	refuseRestore(t, "a directory", craft(t, FormatVersion, entry{tar.Header{Name: "store/d", Typeflag: tar.TypeDir}, ""}))
	refuseRestore(t, "a file twice", craft(t, FormatVersion, entry{tar.Header{Name: "store/a"}, "1"}, entry{tar.Header{Name: "store/a"}, "2"}))
	refuseRestore(t, "a future format", craft(t, FormatVersion+1))
	refuseRestore(t, "a file the manifest does not list", craft(t, FormatVersion, entry{tar.Header{Name: "store/a"}, "1"}))

	// A header claiming 2 TiB is refused from the header alone.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hb, _ := json.Marshal(Header{Format: FormatVersion})
	tw.WriteHeader(&tar.Header{Name: HeaderName, Typeflag: tar.TypeReg, Size: int64(len(hb)), Mode: 0o600})
	tw.Write(hb)
	tw.WriteHeader(&tar.Header{Name: "store/huge", Typeflag: tar.TypeReg, Size: 2 << 40, Mode: 0o600})
	tw.Flush()
	refuseRestore(t, "a 2 TiB file", buf.Bytes())

	refuseRestore(t, "not a backup", []byte(strings.Repeat("hello", 300)))
	var plain bytes.Buffer
	tw = tar.NewWriter(&plain)
	tw.WriteHeader(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Size: 1, Mode: 0o600})
	tw.Write([]byte("x"))
	tw.Close()
	refuseRestore(t, "another tar", plain.Bytes())
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"secrets.json", "store/000001.sst", "media/ab/cd/ef", "media/uploads/x.info"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"store/a\x00b", "store/.", "media", "store", "secrets.json/x", "./store/x"} {
		if err := CheckName(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckName(%q): %v, want ErrInvalid", bad, err)
		}
	}
}
