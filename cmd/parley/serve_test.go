package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := loadConfig(write("ok.yaml", "data_dir: /var/lib/parley\nheartbeat: 15s\nkick_policy: device\nmax_group_members: 500\nadmin_api_keys: [\"0123456789abcdef\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/var/lib/parley" || cfg.Heartbeat != 15*time.Second || cfg.KickPolicy != "device" ||
		cfg.MaxGroupMembers != 500 || len(cfg.AdminAPIKeys) != 1 {
		t.Fatalf("loaded %+v", cfg)
	}
	if _, err := loadConfig(write("typo.yaml", "hearbeat: 15s\n")); err == nil || !strings.Contains(err.Error(), "hearbeat") {
		t.Fatalf("a misspelled key must be an error naming it, got %v", err)
	}
	if _, err := loadConfig(write("bad.yaml", "heartbeat: soon\n")); err == nil {
		t.Fatal("an unparseable duration was accepted")
	}
	if cfg, err := loadConfig(write("empty.yaml", "")); err != nil || cfg.DataDir != "" {
		t.Fatalf("an empty file: %+v %v", cfg, err)
	}
}
