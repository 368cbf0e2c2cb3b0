//go:build ignore

// Lists every fuzz target in the module as "./pkg:FuzzName", for .ci/run.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

func main() {
	re := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)
	filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != "." || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			fmt.Printf("./%s:%s\n", filepath.Dir(p), m[1])
		}
		return nil
	})
}
