package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/parleyim/parley/internal/bench"
)

// The usage names every bench scenario, each once.
func TestUsageListsEveryBenchScenario(t *testing.T) {
	var b bytes.Buffer
	writeUsage(&b)
	words := regexp.MustCompile(`[\w-]+`).FindAllString(b.String(), -1)
	count := map[string]int{}
	for _, w := range words {
		count[w]++
	}
	for _, s := range bench.Scenarios() {
		if count[s] == 0 {
			t.Errorf("the usage does not list the bench scenario %q:\n%s", s, b.String())
		}
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if len(line) > 80 {
			t.Errorf("usage line longer than 80 columns: %q", line)
		}
	}
}

// The default data directory holds secrets.json: `git add .` in a checkout
// where `parley serve` ran must not pick it up.
func TestDataDirIgnoredByGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	for _, p := range []string{"data/secrets.json", "data/store/000001.log"} {
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", p)
		cmd.Dir = root
		if err := cmd.Run(); err != nil {
			t.Errorf("git does not ignore %s (%v): .gitignore must cover the default data directory", p, err)
		}
	}
}

// What the README tells a newcomer in the first hour, held against the tree.
func TestReadmeFirstHour(t *testing.T) {
	root := repoRoot(t)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme := read("README.md")
	license := read("LICENSE")
	first, _, _ := strings.Cut(license, "\n")
	kind := strings.TrimSuffix(strings.TrimSpace(first), " License") // "MIT"
	if !regexp.MustCompile(`(?m)^## License\n\n` + regexp.QuoteMeta(kind) + `\b`).MatchString(readme) {
		t.Errorf("README has no License section naming %q (LICENSE says %q)", kind, first)
	}
	for _, want := range []struct{ text, why string }{
		{"PARLEY_TEST_PG=", "how to run the PostgreSQL and cluster tests"},
		{"go build -o parley", "that the first go run compiles for minutes, and the way round it"},
		{"`/metrics` (it needs the\n  admin API key", "that /metrics answers 401 without the admin key"},
		{"--device", "how two chats of one user run side by side"},
	} {
		if !strings.Contains(readme, want.text) {
			t.Errorf("README no longer says %s (%q)", want.why, want.text)
		}
	}
	// Every `parley chat` line of the README parses: its flags exist (with -h
	// appended, a parse that gets through them all stops there, without
	// connecting anywhere).
	lines := regexp.MustCompile(`parley chat ([^\n]*)`).FindAllStringSubmatch(readme, -1)
	if len(lines) == 0 {
		t.Error("README runs no `parley chat`")
	}
	for _, m := range lines {
		args := append(strings.Fields(m[1]), "-h")
		if err := runChat(context.Background(), args, strings.NewReader(""), io.Discard); err != nil {
			t.Errorf("README's `parley chat %s`: %v", m[1], err)
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..")
}
