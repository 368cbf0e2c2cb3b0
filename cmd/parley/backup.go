package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/parleyim/parley/internal/backup"
	"github.com/parleyim/parley/internal/store/pebblestore"
)

// backupCmd is 'parley backup': an archive of a data directory, through
// the running server (--server) or, with the server stopped, from the
// directory itself (--data).
func backupCmd(args []string) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	out := fs.String("out", "", "the archive to write (required); written whole or not at all")
	server := fs.String("server", "", "the running server's HTTP address (default http://127.0.0.1:8080 unless --data)")
	keyFile := fs.String("api-key-file", "", "file holding an admin API key (default: $PARLEY_API_KEY)")
	dataDir := fs.String("data", "", "back up this data directory directly, with no server running on it")
	secrets := fs.Bool("with-secrets", false, "include secrets.json (token and admin keys, VAPID keys; see docs/backup.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return errors.New("backup: usage: parley backup --out FILE [--server URL] [--api-key-file FILE] [--with-secrets]\n       parley backup --out FILE --data DIR [--with-secrets]   (server stopped)")
	}
	if *dataDir != "" && *server != "" {
		return errors.New("backup: give --server (a running server) or --data (a stopped one), not both")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var m *backup.Manifest
	var err error
	if *dataDir != "" {
		m, err = backupOffline(ctx, *dataDir, *out, *secrets)
	} else {
		key, kerr := readAPIKey(*keyFile)
		if kerr != nil {
			return kerr
		}
		if *server == "" {
			*server = "http://127.0.0.1:8080"
		}
		m, err = backupOnline(ctx, *server, key, *out, *secrets)
	}
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d files, %d bytes (secrets: %v)\n", *out, len(m.Files), m.Bytes(), hasSecrets(m))
	return nil
}

// readAPIKey reads the admin API key from file, else $PARLEY_API_KEY.
func readAPIKey(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("backup: admin API key: %w", err)
		}
		if k := strings.TrimSpace(string(b)); k != "" {
			return k, nil
		}
		return "", fmt.Errorf("backup: %s holds no admin API key", file)
	}
	if k := os.Getenv("PARLEY_API_KEY"); k != "" {
		return k, nil
	}
	return "", errors.New("backup: no admin API key (--api-key-file FILE or $PARLEY_API_KEY)")
}

func hasSecrets(m *backup.Manifest) bool {
	for _, f := range m.Files {
		if f.Path == backup.SecretsFile {
			return true
		}
	}
	return false
}

// backupOnline asks the server for an archive and writes it to out, checking
// it as it arrives: a stream cut short or damaged leaves no out.
func backupOnline(ctx context.Context, server, key, out string, secrets bool) (*backup.Manifest, error) {
	u := strings.TrimRight(server, "/") + "/v1/admin/backup"
	if secrets {
		u += "?" + url.Values{"secrets": {"true"}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("backup: server answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return writeAtomically(out, func(w io.Writer) (*backup.Manifest, error) {
		m, err := backup.Verify(io.TeeReader(resp.Body, w), backup.Limits{})
		if err != nil {
			return nil, fmt.Errorf("backup: the archive received is not whole (the server or the connection failed?): %w", err)
		}
		// The tar end's padding, if any, belongs in the file too.
		if _, err := io.Copy(w, resp.Body); err != nil {
			return nil, fmt.Errorf("backup: %w", err)
		}
		return m, nil
	})
}

// backupOffline archives dataDir, whose server is stopped.
func backupOffline(ctx context.Context, dataDir, out string, secrets bool) (*backup.Manifest, error) {
	storeDir := filepath.Join(dataDir, backup.StoreDir)
	if _, err := os.Stat(storeDir); err != nil {
		return nil, fmt.Errorf("backup: no embedded store in %s: %w", dataDir, err)
	}
	st, err := pebblestore.Open(storeDir, pebblestore.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) || strings.Contains(err.Error(), "lock held by current process") {
			return nil, fmt.Errorf("backup: the data directory %s is in use (a server runs on it?): back it up through that server instead: parley backup --server URL --out %s: %w", dataDir, out, err)
		}
		return nil, fmt.Errorf("backup: open store: %w", err)
	}
	defer st.Close()
	_, merr := os.Stat(filepath.Join(dataDir, backup.MediaDir))
	snap, err := backup.Prepare(ctx, backup.Source{DataDir: dataDir, Checkpoint: st.Checkpoint,
		Media: merr == nil, Secrets: secrets, ParleyVersion: version})
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	return writeAtomically(out, func(w io.Writer) (*backup.Manifest, error) { return snap.WriteTo(ctx, w) })
}

// writeAtomically writes out through a temporary file beside it, synced and
// renamed into place once write succeeded; on failure nothing is left.
func writeAtomically(out string, write func(io.Writer) (*backup.Manifest, error)) (_ *backup.Manifest, err error) {
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*.partial")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	m, err := write(f)
	if err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(f.Name(), out); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if d, err := os.Open(filepath.Dir(out)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return m, nil
}

// restoreCmd is 'parley restore': a data directory from an archive.
func restoreCmd(args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	in := fs.String("in", "", "the archive (written by parley backup); - reads standard input")
	dataDir := fs.String("data", "", "the data directory to create (must not exist, or be empty)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *dataDir == "" || fs.NArg() > 0 {
		return errors.New("restore: usage: parley restore --in FILE --data DIR")
	}
	return restore(*in, *dataDir, os.Stdout)
}

func restore(in, dataDir string, out io.Writer) error {
	r := io.Reader(os.Stdin)
	if in != "-" {
		f, err := os.Open(in)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		defer f.Close()
		r = f
	}
	start := time.Now()
	m, err := backup.Restore(r, dataDir, backup.Limits{})
	if err != nil {
		return fmt.Errorf("restore: nothing restored: %w", err)
	}
	fmt.Fprintf(out, "restored %d files (%d bytes) from a backup of %s (parley %s) into %s in %s\n",
		len(m.Files), m.Bytes(), m.Created.Format(time.RFC3339), m.ParleyVersion, dataDir, time.Since(start).Round(time.Millisecond))
	if !hasSecrets(m) {
		fmt.Fprintf(out, "the archive holds no secrets.json: put the original one in %s, or start with --new-secrets "+
			"(every token, admin API key and Web Push subscription issued before stops working; see docs/backup.md)\n", dataDir)
	}
	fmt.Fprintln(out, "the search index is rebuilt by the server as it starts")
	return nil
}
