package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parleyim/parley/errcode"
	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/backup"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// backupRoute streams an archive of the data directory (docs/backup.md).
// It is served here, not by the API package: its answer is a stream of
// gigabytes, which the API's audit wrapper (it holds an answer until the
// audit entry is written) is not made for.
const backupRoute = "POST /v1/admin/backup"

// checkpointer is the embedded store's consistent copy (pebblestore).
type checkpointer interface {
	Checkpoint(ctx context.Context, dest string) error
}

// backupPart serves backupRoute.
type backupPart struct {
	s     *Server
	store checkpointer // nil: PostgreSQL, whose backup is the database's
	keys  [][2]string  // admin API keys: name, secret
	mu    sync.Mutex   // one backup at a time: they share backup.TempDir
}

func newBackup(s *Server, raw store.Store, adminKeys []string) *backupPart {
	b := &backupPart{s: s}
	b.store, _ = raw.(checkpointer)
	if b.store != nil {
		// A backup cut short by a crash left its snapshot: the store's lock
		// is held now, so no backup of this directory is running.
		if err := backup.CleanTemp(s.cfg.DataDir); err != nil {
			s.log.Warn("backup: removing an earlier backup's snapshot failed", "err", err)
		}
	}
	for _, k := range adminKeys {
		name, secret := auth.ParseAdminKey(k)
		b.keys = append(b.keys, [2]string{name, secret})
	}
	return b
}

// keyName returns the name of the admin API key the request carries
// (X-Api-Key, or Authorization: Bearer, as every admin route takes it).
func (b *backupPart) keyName(r *http.Request) (string, bool) {
	key := r.Header.Get("X-Api-Key")
	if key == "" {
		key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if key == "" {
		return "", false
	}
	found := -1
	for i, k := range b.keys {
		// Every key compared in constant time, no early exit.
		if subtle.ConstantTimeCompare([]byte(k[1]), []byte(key)) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return b.keys[found][0], true
}

func backupError(w http.ResponseWriter, c pb.ErrorCode, msg string) {
	i := errcode.Of(c)
	var body struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Temporary bool   `json:"temporary"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message, body.Error.Temporary = i.APICode, msg, i.Temporary
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(i.HTTPStatus)
	_ = json.NewEncoder(w).Encode(body)
}

// ServeHTTP answers POST /v1/admin/backup[?secrets=true]: a tar archive of
// a store checkpoint, the local media files and, when asked, secrets.json.
// The request is audited when the backup starts: the archive is the whole
// of the server's data, and its answer is streamed, not held.
func (b *backupPart) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store") // as every API answer
	name, ok := b.keyName(r)
	if !ok {
		backupError(w, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED, "missing or invalid API key")
		return
	}
	withSecrets := false
	if v := r.URL.Query().Get("secrets"); v != "" {
		var err error
		if withSecrets, err = strconv.ParseBool(v); err != nil {
			backupError(w, pb.ErrorCode_ERROR_CODE_BAD_REQUEST, "secrets: not a boolean")
			return
		}
	}
	if b.store == nil {
		backupError(w, pb.ErrorCode_ERROR_CODE_BAD_REQUEST,
			"the store is PostgreSQL: back up the database with its own tools (pg_dump, pg_basebackup), see docs/backup.md")
		return
	}
	if !b.mu.TryLock() {
		backupError(w, pb.ErrorCode_ERROR_CODE_CONFLICT, "a backup is already running")
		return
	}
	defer b.mu.Unlock()
	cfg := b.s.cfg
	start := time.Now()
	snap, err := backup.Prepare(r.Context(), backup.Source{
		DataDir: cfg.DataDir, Checkpoint: b.store.Checkpoint,
		Media:   cfg.MediaS3Bucket == "" && !cfg.clustered(),
		Secrets: withSecrets, ParleyVersion: backup.BuildVersion(),
	})
	if err != nil {
		b.s.log.Error("backup failed", "err", err)
		backupError(w, pb.ErrorCode_ERROR_CODE_UNAVAILABLE, "the snapshot failed: "+err.Error())
		return
	}
	defer func() {
		if err := snap.Close(); err != nil {
			b.s.log.Warn("backup: removing the snapshot failed (removed at the next backup or start)", "err", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err = b.s.mod.Audit(ctx, name, backupRoute, r.URL.Path, map[string]any{"secrets": withSecrets})
	cancel()
	if err != nil {
		// Not audited, not served: the archive holds every message.
		b.s.log.Error("audit log append failed", "action", backupRoute, "key", name, "err", err)
		backupError(w, pb.ErrorCode_ERROR_CODE_UNAVAILABLE, "the audit log cannot be written")
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="parley-backup-%s.tar"`, start.UTC().Format("20060102T150405Z")))
	// The request is read; an archive takes as long as it takes to send.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	m, err := snap.WriteTo(r.Context(), w)
	if err != nil {
		b.s.log.Warn("backup not completed", "err", err, "took", time.Since(start).Round(time.Millisecond))
		// Cut the connection: the client sees a stream without its
		// manifest, never a short archive that looks whole.
		panic(http.ErrAbortHandler)
	}
	b.s.log.Info("backup sent", "files", len(m.Files), "bytes", m.Bytes(), "secrets", withSecrets,
		"took", time.Since(start).Round(time.Millisecond))
}
