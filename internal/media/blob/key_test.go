package blob_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/media/blob/blobtest"
)

func TestCheckKey(t *testing.T) {
	for _, k := range blobtest.BadKeys {
		if blob.CheckKey(k) == nil {
			t.Errorf("CheckKey(%q) accepted it", k)
		}
	}
	for _, k := range []string{"a", "f/ab/0123abcdef", "a b/c+d%e", "x..y/z.", "ünï/名", blobtest.LongestKey} {
		if err := blob.CheckKey(k); err != nil {
			t.Errorf("CheckKey(%q): %v", k, err)
		}
	}
}

// FuzzCheckKey: every key CheckKey accepts, joined to a directory, names
// a path strictly under it, unchanged by cleaning.
func FuzzCheckKey(f *testing.F) {
	for _, k := range blobtest.BadKeys {
		f.Add(k)
	}
	f.Add("f/ab/cd")
	f.Fuzz(func(t *testing.T, key string) {
		if blob.CheckKey(key) != nil {
			return
		}
		const root = "/srv/media"
		p := filepath.Join(root, key)
		if !strings.HasPrefix(p, root+"/") || p != root+"/"+key || filepath.Clean(key) != key {
			t.Fatalf("accepted key %q joins to %q", key, p)
		}
		for _, elem := range strings.Split(key, "/") {
			if elem == ".." || elem == "." || elem == "" || strings.ContainsAny(elem, "\\\x00") {
				t.Fatalf("accepted key %q has element %q", key, elem)
			}
		}
	})
}
