// Package account exports an account's data (an archive built in the
// background into the media blob store) and deletes accounts
// (docs/accounts.md). It reaches the chat service through the small Chat
// interface: group changes go through it so members see them in sequence.
package account

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Chat is what this package needs of the chat service.
type Chat interface {
	// Call runs one request as the user (a group leave).
	Call(ctx context.Context, claims auth.Claims, f *pb.ClientFrame) (*pb.ServerFrame, error)
	// CallSystem runs one group request with an owner's rights (a
	// transfer or dissolution of a deleted owner's group).
	CallSystem(ctx context.Context, f *pb.ClientFrame) (*pb.ServerFrame, error)
	// CloseUserSessions closes the user's sessions on every node.
	CloseUserSessions(uid string, code pb.DisconnectCode, reason, sessionID, tokenID string) int
}

// Message policies of a deletion.
const (
	PolicyErase = "erase" // the deleted user's messages keep their place, without content
	PolicyKeep  = "keep"  // the deleted user's messages stay as they are
)

// Config is what the service needs.
type Config struct {
	Store store.Store
	Chat  Chat
	// Blobs holds export archives (under "exports/") and the uploaded
	// files deleted with an account. Nil: exports are off and only file
	// records are deleted.
	Blobs blob.Store
	// MessagePolicy is PolicyErase (default) or PolicyKeep.
	MessagePolicy string
	// ExportTTL: an archive is deleted this long after it is ready.
	// Default 48 hours.
	ExportTTL time.Duration
	// MaxExports bounds the exports built at once on this node. Default 2.
	MaxExports int
	// MessageBytes bounds one message (the server's frame limit); a page
	// read for an export holds at most pageMessages of them.
	MessageBytes int
	// Purge, when set, runs after the store's PurgeDeleted: the server
	// merges its embedded search index there, so that erased text leaves
	// the index's files too.
	Purge  func(context.Context) error
	Logger *slog.Logger
}

// Service runs exports and deletions. Build with New, Start it, Close it.
type Service struct {
	cfg   Config
	st    store.Store
	log   *slog.Logger
	slots chan struct{} // export concurrency
	life  context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	mu       sync.Mutex
	deleting map[string]bool // deletions running on this node
}

// New builds the service.
func New(cfg Config) *Service {
	if cfg.MessagePolicy == "" {
		cfg.MessagePolicy = PolicyErase
	}
	if cfg.ExportTTL <= 0 {
		cfg.ExportTTL = 48 * time.Hour
	}
	if cfg.MaxExports <= 0 {
		cfg.MaxExports = 2
	}
	if cfg.MessageBytes <= 0 {
		cfg.MessageBytes = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	life, stop := context.WithCancel(context.Background())
	return &Service{cfg: cfg, st: cfg.Store, log: cfg.Logger, slots: make(chan struct{}, cfg.MaxExports),
		life: life, stop: stop, deleting: make(map[string]bool)}
}

// Start resumes the deletions a stop or crash interrupted and starts the
// sweeper of expired archives.
func (s *Service) Start() {
	ids, err := s.readIndex(s.life, deletionIndexKey)
	if err != nil {
		s.log.Error("account: reading unfinished deletions failed", "err", err)
	}
	for _, uid := range ids {
		s.runDeletion(uid)
	}
	s.wg.Add(1)
	go s.sweepLoop()
}

// Close stops background work and waits for it.
func (s *Service) Close() {
	s.stop()
	s.wg.Wait()
}

// Exports reports whether exports are on (a blob store is configured).
func (s *Service) Exports() bool { return s.cfg.Blobs != nil }

// ErrNotFound: no such job, or not the caller's (the same answer).
var ErrNotFound = errors.New("account: not found")

// ErrNoExport: exports are off (no blob store).
var ErrNoExport = errors.New("account: exports are off on this server")

// Settings keys. Values are JSON.
const (
	deletionKeyPrefix = "account/deletion/" // + user id -> Deletion
	deletionIndexKey  = "account/deletions" // user ids with a deletion not done
	exportJobPrefix   = "account/export/"   // + job id -> Job
	exportUserPrefix  = "account/export-of/"
	exportIndexKey    = "account/exports" // job ids with an archive or a run
)

// Deletion is the state of an account's deletion.
type Deletion struct {
	UserID     string    `json:"user_id"`
	State      string    `json:"state"` // "running" or "done"
	By         string    `json:"by"`    // "user" or the admin API key's name
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

func (s *Service) getJSON(ctx context.Context, key string, v any) (bool, error) {
	b, err := s.st.GetSetting(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(b, v)
}

func (s *Service) putJSON(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.st.PutSetting(ctx, key, b)
}

// readIndex returns the ids listed under key.
func (s *Service) readIndex(ctx context.Context, key string) ([]string, error) {
	var ids []string
	_, err := s.getJSON(ctx, key, &ids)
	return ids, err
}

// editIndex adds (or removes) id in the list under key, atomically across
// nodes (compare and swap).
func (s *Service) editIndex(ctx context.Context, key, id string, add bool) error {
	for {
		old, err := s.st.GetSetting(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			old, err = nil, nil
		}
		if err != nil {
			return err
		}
		var ids []string
		if old != nil {
			if err := json.Unmarshal(old, &ids); err != nil {
				return err
			}
		}
		has := slices.Contains(ids, id)
		if has == add {
			return nil
		}
		if add {
			ids = append(ids, id)
		} else {
			ids = slices.DeleteFunc(ids, func(x string) bool { return x == id })
		}
		b, _ := json.Marshal(ids)
		ok, err := s.st.SwapSetting(ctx, key, old, b)
		if err != nil || ok {
			return err
		}
	}
}

// DeletionState returns the deletion of uid (found false: none).
func (s *Service) DeletionState(ctx context.Context, uid string) (Deletion, bool, error) {
	var d Deletion
	found, err := s.getJSON(ctx, deletionKeyPrefix+uid, &d)
	return d, found, err
}

// Deleted reports whether uid's account was deleted (or is being deleted).
func (s *Service) Deleted(ctx context.Context, uid string) (bool, error) {
	_, found, err := s.DeletionState(ctx, uid)
	return found, err
}

// Delete starts (or resumes, or reports) the deletion of uid's account.
// The user is locked out before it returns (tokens, sessions, password);
// the rest runs in the background. by names who asked ("user" or an admin
// API key's name). ErrNotFound: there is no such user.
func (s *Service) Delete(ctx context.Context, uid, by string) (Deletion, error) {
	d, found, err := s.DeletionState(ctx, uid)
	if err != nil {
		return d, err
	}
	if found && d.State == "done" {
		return d, nil
	}
	if !found {
		if _, err := s.st.GetUser(ctx, uid); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return d, ErrNotFound
			}
			return d, err
		}
		d = Deletion{UserID: uid, State: "running", By: by, StartedAt: time.Now().UTC().Truncate(time.Millisecond)}
		if err := s.editIndex(ctx, deletionIndexKey, uid, true); err != nil {
			return d, err
		}
		if err := s.putJSON(ctx, deletionKeyPrefix+uid, d); err != nil {
			return d, err
		}
	}
	if err := s.lockOut(ctx, uid); err != nil {
		return d, err
	}
	s.runDeletion(uid)
	return d, nil
}

// lockOut makes the account unusable at once: disabled, no password, every
// token revoked (epoch), every session closed on every node.
func (s *Service) lockOut(ctx context.Context, uid string) error {
	u, err := s.st.GetUser(ctx, uid)
	if errors.Is(err, store.ErrNotFound) {
		// A user known only by tokens: a record that keeps the id taken.
		key, _ := auth.NormalizeUsername(uid)
		u = store.User{ID: uid, NameKey: key, Disabled: true, TokenEpoch: 1, CreatedAt: time.Now().UTC()}
		if err := s.st.CreateUser(ctx, u); err != nil && !errors.Is(err, store.ErrExists) {
			return err
		}
	} else if err != nil {
		return err
	} else if !u.Disabled || u.PasswordHash != "" || u.Bot || u.ShadowMuted {
		u.Disabled, u.PasswordHash, u.Bot, u.ShadowMuted = true, "", false, false
		u.TokenEpoch++
		if err := s.st.UpdateUser(ctx, u); err != nil {
			return err
		}
	}
	s.cfg.Chat.CloseUserSessions(uid, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED, "account deleted", "", "")
	return nil
}

// runDeletion runs the rest of uid's deletion in the background, once per
// node at a time.
func (s *Service) runDeletion(uid string) {
	s.mu.Lock()
	if s.deleting[uid] {
		s.mu.Unlock()
		return
	}
	s.deleting[uid] = true
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.deleting, uid)
			s.mu.Unlock()
		}()
		if err := s.finishDeletion(s.life, uid); err != nil && s.life.Err() == nil {
			s.log.Error("account: deletion failed; it is retried at the next start or request", "user", uid, "err", err)
		}
	}()
}

// finishDeletion does every step; each is idempotent, so a run cut short
// is finished by the next one.
func (s *Service) finishDeletion(ctx context.Context, uid string) error {
	if err := s.lockOut(ctx, uid); err != nil {
		return fmt.Errorf("lock out: %w", err)
	}
	convs, err := s.st.Conversations(ctx, uid)
	if err != nil {
		return err
	}
	slices.Sort(convs)
	for _, conv := range convs {
		if strings.HasPrefix(conv, "g:") {
			if err := s.leaveGroup(ctx, uid, conv); err != nil {
				return fmt.Errorf("leave %s: %w", conv, err)
			}
		}
	}
	if s.cfg.MessagePolicy == PolicyErase {
		for _, conv := range convs {
			for after := uint64(0); ; {
				next, _, err := s.st.EraseMessages(ctx, conv, uid, after, 256)
				if err != nil {
					return fmt.Errorf("erase %s: %w", conv, err)
				}
				if next == 0 {
					break
				}
				after = next
			}
		}
	}
	if err := s.deleteFiles(ctx, uid); err != nil {
		return fmt.Errorf("files: %w", err)
	}
	if err := s.deleteExport(ctx, uid); err != nil {
		return fmt.Errorf("export archive: %w", err)
	}
	if err := s.st.DeleteKeyPackages(ctx, uid, ""); err != nil { // docs/e2ee.md
		return fmt.Errorf("key packages: %w", err)
	}
	if err := s.st.DeleteUserRecords(ctx, uid); err != nil {
		return fmt.Errorf("records: %w", err)
	}
	if err := s.st.PurgeDeleted(ctx); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	if s.cfg.Purge != nil {
		if err := s.cfg.Purge(ctx); err != nil {
			return fmt.Errorf("purge the search index: %w", err)
		}
	}
	var d Deletion
	if _, err := s.getJSON(ctx, deletionKeyPrefix+uid, &d); err != nil {
		return err
	}
	d.UserID, d.State, d.FinishedAt = uid, "done", time.Now().UTC().Truncate(time.Millisecond)
	if err := s.putJSON(ctx, deletionKeyPrefix+uid, d); err != nil {
		return err
	}
	return s.editIndex(ctx, deletionIndexKey, uid, false)
}

// leaveGroup takes uid out of conv with the group's ordinary leave event.
// An owner first hands the group to its oldest admin, else its oldest
// member; an owner alone dissolves it.
func (s *Service) leaveGroup(ctx context.Context, uid, conv string) error {
	m, err := s.st.GetMember(ctx, conv, uid)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if m.Left {
		return nil
	}
	g, err := s.st.GetGroup(ctx, conv)
	if err != nil {
		return err
	}
	if g.Dissolved {
		return nil
	}
	if m.Role == pb.GroupRole_GROUP_ROLE_OWNER || g.Owner == uid {
		next, err := s.successor(ctx, conv, uid)
		if err != nil {
			return err
		}
		var f *pb.ClientFrame
		if next == "" {
			f = &pb.ClientFrame{Body: &pb.ClientFrame_DissolveGroup{DissolveGroup: &pb.DissolveGroup{ConversationId: conv}}}
		} else {
			f = &pb.ClientFrame{Body: &pb.ClientFrame_TransferOwnership{TransferOwnership: &pb.TransferOwnership{ConversationId: conv, UserId: next}}}
		}
		if err := frameErr(s.cfg.Chat.CallSystem(ctx, f)); err != nil {
			return err
		}
		if next == "" {
			return nil
		}
	}
	err = frameErr(s.cfg.Chat.Call(ctx, auth.Claims{UserID: uid},
		&pb.ClientFrame{Body: &pb.ClientFrame_LeaveGroup{LeaveGroup: &pb.LeaveGroup{ConversationId: conv}}}))
	if err != nil {
		// Left meanwhile (another node resuming the same deletion): done.
		if m, gerr := s.st.GetMember(ctx, conv, uid); gerr == nil && m.Left {
			return nil
		}
	}
	return err
}

// successor is the member a deleted owner's group passes to: the admin who
// joined first, else the member who joined first ("" when none is left).
func (s *Service) successor(ctx context.Context, conv, uid string) (string, error) {
	var best store.Member
	found := false
	better := func(m store.Member) bool {
		if !found {
			return true
		}
		ma, ba := m.Role == pb.GroupRole_GROUP_ROLE_ADMIN, best.Role == pb.GroupRole_GROUP_ROLE_ADMIN
		if ma != ba {
			return ma
		}
		if !m.JoinedAt.Equal(best.JoinedAt) {
			return m.JoinedAt.Before(best.JoinedAt)
		}
		return m.UserID < best.UserID
	}
	for after := ""; ; {
		page, err := s.st.Members(ctx, conv, after, 500)
		if err != nil {
			return "", err
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			if m.UserID != uid && better(m) {
				best, found = m, true
			}
		}
		after = page[len(page)-1].UserID
	}
	if !found {
		return "", nil
	}
	return best.UserID, nil
}

func frameErr(f *pb.ServerFrame, err error) error {
	if err != nil {
		return err
	}
	if e := f.GetError(); e != nil {
		return fmt.Errorf("%s: %s", e.Code, e.Message)
	}
	return nil
}

// deleteFiles deletes the user's uploaded files: bytes, thumbnail, record.
func (s *Service) deleteFiles(ctx context.Context, uid string) error {
	for {
		page, err := s.st.FilesOf(ctx, uid, "", 100)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		for _, f := range page {
			if s.cfg.Blobs != nil {
				for _, k := range []string{f.BlobKey, f.ThumbKey} {
					if k == "" {
						continue
					}
					if err := s.cfg.Blobs.Delete(ctx, k); err != nil {
						return err
					}
				}
			}
			if _, err := s.st.DeleteFile(ctx, f.ID); err != nil {
				return err
			}
		}
	}
}
