package account

import (
	"archive/zip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Job is an export's state, kept in the store's settings so any node can
// answer for it and serve its archive.
type Job struct {
	ID     string `json:"id"`
	UserID string `json:"user_id"`
	// State: "pending" (waiting for a slot), "running", "ready", "failed".
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	// UpdatedAt moves while the job runs; a running job not updated for
	// staleAfter is reported failed (its node stopped).
	UpdatedAt time.Time `json:"updated_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"` // ready: when the archive is deleted
	Size      int64     `json:"size,omitempty"`      // ready: the archive's bytes
	Error     string    `json:"error,omitempty"`
}

const (
	staleAfter = 5 * time.Minute
	// pageMessages bounds a page of messages read for an export: with
	// messages at most MessageBytes each, a page holds at most that many
	// times as many bytes.
	pageMessages  = 64
	archivePrefix = "exports/"
)

var exportJSON = protojson.MarshalOptions{UseProtoNames: true}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func archiveKey(jobID string) string { return archivePrefix + jobID + ".zip" }

// view is j as its owner sees it now (a stale run reads as failed).
func (j Job) view(now time.Time) Job {
	if (j.State == "running" || j.State == "pending") && now.Sub(j.UpdatedAt) > staleAfter {
		j.State, j.Error = "failed", "interrupted"
	}
	return j
}

// Export starts an export of uid's data, or returns the one running. One
// export per user at a time; a new one replaces a ready archive.
func (s *Service) Export(ctx context.Context, uid string) (Job, error) {
	if s.cfg.Blobs == nil {
		return Job{}, ErrNoExport
	}
	if _, found, err := s.DeletionState(ctx, uid); err != nil {
		return Job{}, err
	} else if found {
		return Job{}, ErrNotFound
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	for {
		old, err := s.st.GetSetting(ctx, exportUserPrefix+uid)
		if errors.Is(err, store.ErrNotFound) {
			old, err = nil, nil
		}
		if err != nil {
			return Job{}, err
		}
		if len(old) > 0 {
			if j, err := s.job(ctx, string(old)); err == nil {
				if v := j.view(now); v.State == "running" || v.State == "pending" {
					return v, nil
				}
			}
		}
		j := Job{ID: newID(), UserID: uid, State: "pending", CreatedAt: now, UpdatedAt: now}
		if err := s.putJSON(ctx, exportJobPrefix+j.ID, j); err != nil {
			return Job{}, err
		}
		ok, err := s.st.SwapSetting(ctx, exportUserPrefix+uid, old, []byte(j.ID))
		if err != nil {
			return Job{}, err
		}
		if !ok { // another request won: use its job
			_ = s.st.PutSetting(ctx, exportJobPrefix+j.ID, nil)
			continue
		}
		if err := s.editIndex(ctx, exportIndexKey, j.ID, true); err != nil {
			return Job{}, err
		}
		if len(old) > 0 {
			s.dropJob(ctx, string(old))
		}
		s.wg.Add(1)
		go s.run(j)
		return j, nil
	}
}

// job reads a job record; ErrNotFound when none.
func (s *Service) job(ctx context.Context, id string) (Job, error) {
	var j Job
	found, err := s.getJSON(ctx, exportJobPrefix+id, &j)
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
			return Job{}, ErrNotFound // a dropped job (emptied record)
		}
		return Job{}, err
	}
	if !found || j.ID != id {
		return Job{}, ErrNotFound
	}
	return j, nil
}

// JobOf returns job id when it is uid's (uid "" for the admin API: any);
// another user's job is ErrNotFound, exactly as a missing one.
func (s *Service) JobOf(ctx context.Context, uid, id string) (Job, error) {
	if id == "" || len(id) > 64 {
		return Job{}, ErrNotFound
	}
	j, err := s.job(ctx, id)
	if err != nil {
		return Job{}, err
	}
	if uid != "" && j.UserID != uid {
		return Job{}, ErrNotFound
	}
	return j.view(time.Now()), nil
}

// OpenArchive opens a ready job's archive (as JobOf decides who may).
func (s *Service) OpenArchive(ctx context.Context, uid, id string) (Job, blob.Object, error) {
	j, err := s.JobOf(ctx, uid, id)
	if err != nil {
		return j, nil, err
	}
	if j.State != "ready" || time.Now().After(j.ExpiresAt) {
		return j, nil, ErrNotFound
	}
	obj, err := s.cfg.Blobs.Open(ctx, archiveKey(j.ID))
	if errors.Is(err, blob.ErrNotFound) {
		return j, nil, ErrNotFound
	}
	return j, obj, err
}

// dropJob deletes a job's archive and record (best effort: the sweeper
// retries what is left in the index).
func (s *Service) dropJob(ctx context.Context, id string) {
	if s.cfg.Blobs != nil {
		if err := s.cfg.Blobs.Delete(ctx, archiveKey(id)); err != nil {
			s.log.Warn("account: deleting an export archive failed", "job", id, "err", err)
			return
		}
	}
	_ = s.st.PutSetting(ctx, exportJobPrefix+id, nil)
	_ = s.editIndex(ctx, exportIndexKey, id, false)
}

// deleteExport drops uid's export (account deletion).
func (s *Service) deleteExport(ctx context.Context, uid string) error {
	id, err := s.st.GetSetting(ctx, exportUserPrefix+uid)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(id) > 0 {
		if s.cfg.Blobs != nil {
			if err := s.cfg.Blobs.Delete(ctx, archiveKey(string(id))); err != nil {
				return err
			}
		}
		if err := s.st.PutSetting(ctx, exportJobPrefix+string(id), nil); err != nil {
			return err
		}
		if err := s.editIndex(ctx, exportIndexKey, string(id), false); err != nil {
			return err
		}
	}
	return s.st.PutSetting(ctx, exportUserPrefix+uid, nil)
}

// sweepLoop deletes expired archives (any node's: the index is shared).
func (s *Service) sweepLoop() {
	defer s.wg.Done()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		s.Sweep(s.life, time.Now())
		select {
		case <-s.life.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep deletes the archives expired at now and the records of jobs that
// failed or were interrupted long ago.
func (s *Service) Sweep(ctx context.Context, now time.Time) {
	ids, err := s.readIndex(ctx, exportIndexKey)
	if err != nil {
		return
	}
	for _, id := range ids {
		j, err := s.job(ctx, id)
		if errors.Is(err, ErrNotFound) {
			_ = s.editIndex(ctx, exportIndexKey, id, false)
			continue
		}
		if err != nil {
			return
		}
		v := j.view(now)
		if (v.State == "ready" && now.After(v.ExpiresAt)) || (v.State == "failed" && now.Sub(v.UpdatedAt) > s.cfg.ExportTTL) {
			s.dropJob(ctx, id)
		}
	}
}

// run builds the archive of j under a concurrency slot.
func (s *Service) run(j Job) {
	defer s.wg.Done()
	ctx := s.life
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-s.slots }()
	j.State, j.UpdatedAt = "running", time.Now().UTC()
	_ = s.putJSON(ctx, exportJobPrefix+j.ID, j)
	size, err := s.build(ctx, j)
	now := time.Now().UTC().Truncate(time.Millisecond)
	j.UpdatedAt = now
	if err != nil {
		if ctx.Err() != nil {
			return // stopping: the job reads as interrupted later
		}
		s.log.Error("account: export failed", "user", j.UserID, "job", j.ID, "err", err)
		_ = s.cfg.Blobs.Delete(context.Background(), archiveKey(j.ID))
		j.State, j.Error = "failed", "the export failed; try again"
	} else {
		j.State, j.Size, j.ExpiresAt = "ready", size, now.Add(s.cfg.ExportTTL)
	}
	if err := s.putJSON(ctx, exportJobPrefix+j.ID, j); err != nil {
		s.log.Error("account: recording an export failed", "job", j.ID, "err", err)
	}
}

// countWriter counts the bytes of the archive on their way to the store.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// build streams the archive into the blob store through a pipe: it is
// never held in memory.
func (s *Service) build(ctx context.Context, j Job) (int64, error) {
	pr, pw := io.Pipe()
	cw := &countWriter{w: pw}
	done := make(chan error, 1)
	go func() {
		zw := zip.NewWriter(cw)
		err := s.write(ctx, zw, j)
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
		pw.CloseWithError(err)
		done <- err
	}()
	err := s.cfg.Blobs.Put(ctx, archiveKey(j.ID), pr, -1, "application/zip")
	pr.CloseWithError(errors.New("archive store stopped reading"))
	if werr := <-done; err == nil {
		err = werr
	}
	return cw.n, err
}

func writeJSONFile(zw *zip.Writer, name string, v any) error {
	w, err := zw.Create(name)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(v)
}

// Archive files (docs/accounts.md).
type profileJSON struct {
	UserID      string    `json:"user_id"`
	CreatedAt   time.Time `json:"created_at"`
	HasPassword bool      `json:"has_password"`
	Bot         bool      `json:"bot"`
	Disabled    bool      `json:"disabled"`
	LastSeen    time.Time `json:"last_seen,omitzero"`
	ExportedAt  time.Time `json:"exported_at"`
}

type contactJSON struct {
	UserID    string    `json:"user_id"`
	State     string    `json:"state"`
	Note      string    `json:"note,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

type conversationJSON struct {
	ConversationID string `json:"conversation_id"`
	Pinned         bool   `json:"pinned"`
	Muted          bool   `json:"muted"`
	ClearedSeq     uint64 `json:"cleared_seq,omitempty"`
	// MessagesFile is the file under messages/ holding what the user may
	// read of it; FromSeq and ToSeq bound that range.
	MessagesFile string `json:"messages_file"`
	FromSeq      uint64 `json:"from_seq"`
	ToSeq        uint64 `json:"to_seq"`
	Messages     int    `json:"messages"`
}

type groupJSON struct {
	ConversationID string    `json:"conversation_id"`
	Name           string    `json:"name"`
	Owner          string    `json:"owner"`
	Dissolved      bool      `json:"dissolved"`
	Role           string    `json:"role"`
	JoinedAt       time.Time `json:"joined_at"`
	Left           bool      `json:"left"`
}

type fileJSON struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Size        int64     `json:"size"`
	ContentType string    `json:"content_type"`
	CreatedAt   time.Time `json:"created_at"`
	Path        string    `json:"path"` // in the archive; "" when its bytes are missing
}

func (s *Service) touch(ctx context.Context, j *Job) {
	if now := time.Now().UTC(); now.Sub(j.UpdatedAt) > staleAfter/5 {
		j.UpdatedAt = now
		_ = s.putJSON(ctx, exportJobPrefix+j.ID, j)
	}
}

func (s *Service) write(ctx context.Context, zw *zip.Writer, j Job) error {
	uid := j.UserID
	u, err := s.st.GetUser(ctx, uid)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	seen, err := s.st.LastSeen(ctx, uid)
	if err != nil {
		return err
	}
	if err := writeJSONFile(zw, "profile.json", profileJSON{UserID: uid, CreatedAt: u.CreatedAt, HasPassword: u.PasswordHash != "",
		Bot: u.Bot, Disabled: u.Disabled, LastSeen: seen, ExportedAt: time.Now().UTC()}); err != nil {
		return err
	}
	cs, err := s.st.Contacts(ctx, uid)
	if err != nil {
		return err
	}
	contacts := make([]contactJSON, 0, len(cs))
	for _, c := range cs {
		contacts = append(contacts, contactJSON{UserID: c.UserID, State: c.State.String(), Note: c.Note, UpdatedAt: c.UpdatedAt})
	}
	if err := writeJSONFile(zw, "contacts.json", contacts); err != nil {
		return err
	}
	blocked, err := s.st.Blocked(ctx, uid)
	if err != nil {
		return err
	}
	if blocked == nil {
		blocked = []string{}
	}
	if err := writeJSONFile(zw, "blocked.json", blocked); err != nil {
		return err
	}
	convs, err := s.st.Conversations(ctx, uid)
	if err != nil {
		return err
	}
	groups := []groupJSON{}
	conversations := []conversationJSON{}
	for i, conv := range convs {
		from, upTo := uint64(1), uint64(0) // upTo 0: to the newest
		if strings.HasPrefix(conv, "g:") {
			g, err := s.st.GetGroup(ctx, conv)
			if err != nil {
				return err
			}
			m, err := s.st.GetMember(ctx, conv, uid)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			groups = append(groups, groupJSON{ConversationID: conv, Name: g.Name, Owner: g.Owner, Dissolved: g.Dissolved,
				Role: m.Role.String(), JoinedAt: m.JoinedAt, Left: m.Left})
			if g.HistoryVisibility != pb.HistoryVisibility_HISTORY_VISIBILITY_ALL && m.JoinSeq > 0 {
				from = m.JoinSeq
			}
			if m.Left {
				upTo = m.LeftSeq
			}
		}
		set, err := s.st.GetConversationSettings(ctx, uid, conv)
		if err != nil {
			return err
		}
		from = max(from, set.ClearedSeq+1)
		c := conversationJSON{ConversationID: conv, Pinned: set.Pinned, Muted: set.Muted, ClearedSeq: set.ClearedSeq,
			MessagesFile: fmt.Sprintf("messages/%04d-%s.jsonl", i+1, url.PathEscape(conv)), FromSeq: from}
		n, last, err := s.writeMessages(ctx, zw, &j, c.MessagesFile, conv, uid, from, upTo)
		if err != nil {
			return err
		}
		c.Messages, c.ToSeq = n, last
		conversations = append(conversations, c)
	}
	if err := writeJSONFile(zw, "groups.json", groups); err != nil {
		return err
	}
	if err := writeJSONFile(zw, "conversations.json", conversations); err != nil {
		return err
	}
	return s.writeFiles(ctx, zw, &j, uid)
}

// writeMessages writes what uid may read of conv in [from, upTo] (upTo 0:
// to the newest) as one protocol-JSON message per line, leaving out the
// messages they deleted for themselves and other people's sender-only
// messages.
func (s *Service) writeMessages(ctx context.Context, zw *zip.Writer, j *Job, name, conv, uid string, from, upTo uint64) (int, uint64, error) {
	w, err := zw.Create(name)
	if err != nil {
		return 0, 0, err
	}
	n, last := 0, uint64(0)
	for after := from - 1; ; {
		page, err := s.st.Messages(ctx, conv, after, pageMessages)
		if err != nil {
			return n, last, err
		}
		if len(page) == 0 {
			return n, last, nil
		}
		lo, hi := page[0].Seq, page[len(page)-1].Seq
		hidden, err := s.st.HiddenMessages(ctx, uid, conv, lo, hi)
		if err != nil {
			return n, last, err
		}
		skip := make(map[uint64]bool, len(hidden))
		for _, h := range hidden {
			skip[h] = true
		}
		for _, m := range page {
			if upTo != 0 && m.Seq > upTo {
				return n, last, nil
			}
			if skip[m.Seq] || (m.SenderOnly && m.From != uid) {
				continue
			}
			b, err := exportJSON.Marshal(m)
			if err != nil {
				return n, last, err
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return n, last, err
			}
			n, last = n+1, m.Seq
		}
		after = hi
		s.touch(ctx, j)
	}
}

// writeFiles copies the user's uploaded files into files/ and lists them
// in files.json.
func (s *Service) writeFiles(ctx context.Context, zw *zip.Writer, j *Job, uid string) error {
	list := []fileJSON{}
	for after := ""; ; {
		page, err := s.st.FilesOf(ctx, uid, after, 100)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		for _, f := range page {
			fj := fileJSON{ID: f.ID, Name: f.Name, Size: f.Size, ContentType: f.ContentType, CreatedAt: f.CreatedAt}
			obj, err := s.cfg.Blobs.Open(ctx, f.BlobKey)
			if err == nil {
				fj.Path = "files/" + f.ID + "-" + safeName(f.Name)
				w, err := zw.CreateHeader(&zip.FileHeader{Name: fj.Path, Method: zip.Store, Modified: f.CreatedAt})
				if err == nil {
					_, err = io.Copy(w, obj)
				}
				obj.Close()
				if err != nil {
					return err
				}
			} else if !errors.Is(err, blob.ErrNotFound) {
				return err
			}
			list = append(list, fj)
			s.touch(ctx, j)
		}
		after = page[len(page)-1].ID
	}
	return writeJSONFile(zw, "files.json", list)
}

// safeName keeps a file name usable in an archive path.
func safeName(n string) string {
	n = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, n)
	n = strings.TrimLeft(n, ".")
	if n == "" {
		n = "file"
	}
	return n
}
