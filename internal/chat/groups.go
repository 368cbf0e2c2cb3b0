package chat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// A group's conversation id is "g:" + 16 hex characters chosen by the server.
const groupPrefix = "g:"

// Limits on group fields.
const (
	maxGroupName         = 128
	maxAvatarURL         = 512
	maxAnnouncement      = 4096
	maxMembersPerRequest = 1000
	maxMuteSeconds       = 30 * 24 * 3600
)

func isGroup(conv string) bool { return strings.HasPrefix(conv, groupPrefix) }

// groupState is this node's cached view of one group. It is immutable once
// published: a change builds a new one (copy on write), so readers on the
// send and delivery paths share it without locks.
type groupState struct {
	info       store.Group
	members    map[string]store.Member // current members only
	recipients []string                // the current members' ids, for delivery
	// joiners are the members who joined within newInterestGrace of when
	// this state was built, oldest first, at most maxJoiners (see
	// groupDelivery); nil for most groups.
	joiners []joiner
}

type joiner struct {
	user string
	at   time.Time
}

// newInterestGrace is how long after a member joins that group messages also
// reach them through their user's interest. A node starts watching a group
// for its member when it hears of the join; NATS carries that interest to
// the other nodes' servers a moment later, and a message published there in
// that moment would miss the member (seen: a group's first message, sent at
// once after it was made through another node). Seconds is far more than the
// moment takes.
const newInterestGrace = 5 * time.Second

// maxJoiners caps the members delivered individually: a group made with
// thousands of members would cost a publish per member per message.
// Beyond it the newest are kept; the others rely on the group's interest
// (and on sync, should its first messages miss them).
const maxJoiners = 64

// setRecipients fills the lists derived from g.members.
func (g *groupState) setRecipients(now time.Time) {
	g.recipients = recipientList(g.members)
	g.joiners = g.joiners[:0:0]
	for id, m := range g.members {
		if now.Sub(m.JoinedAt) < newInterestGrace {
			g.joiners = append(g.joiners, joiner{user: id, at: m.JoinedAt})
		}
	}
	if len(g.joiners) == 0 {
		g.joiners = nil
		return
	}
	slices.SortFunc(g.joiners, func(a, b joiner) int { return a.at.Compare(b.at) })
	if len(g.joiners) > maxJoiners {
		g.joiners = g.joiners[len(g.joiners)-maxJoiners:]
	}
}

// recentJoiners are the members still within newInterestGrace of joining,
// sorted by id.
func (g *groupState) recentJoiners(now time.Time) []string {
	var ids []string
	for _, j := range g.joiners {
		if now.Sub(j.at) < newInterestGrace {
			ids = append(ids, j.user)
		}
	}
	slices.Sort(ids)
	return ids
}

func (g *groupState) role(uid string) (pb.GroupRole, bool) {
	m, ok := g.members[uid]
	return m.Role, ok
}

// groupCache holds the groups this node has used. Groups are loaded on first
// use, updated by the changes this node commits and dropped when another
// node reports a change (cluster.go).
type groupCache struct {
	mu sync.RWMutex
	m  map[string]*groupState // guarded by mu
	// gen counts changes and drops; a load that overlapped one is not
	// cached, as it may have read the state from before it. Guarded by mu.
	gen uint64
}

// group returns the group's state, loading it from the store on first use.
// errDenied when the group does not exist.
func (s *Service) group(ctx context.Context, conv string) (*groupState, error) {
	s.groups.mu.RLock()
	g := s.groups.m[conv]
	s.groups.mu.RUnlock()
	if g != nil {
		return g, nil
	}
	s.groups.mu.RLock()
	gen := s.groups.gen
	s.groups.mu.RUnlock()
	info, err := s.store.GetGroup(ctx, conv)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errDenied
	}
	if err != nil {
		return nil, storeErr(err)
	}
	g = &groupState{info: info, members: make(map[string]store.Member)}
	after := ""
	for {
		page, err := s.store.Members(ctx, conv, after, 1000)
		if err != nil {
			return nil, storeErr(err)
		}
		for _, m := range page {
			g.members[m.UserID] = m
		}
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].UserID
	}
	g.setRecipients(time.Now())
	s.groups.mu.Lock()
	if cur := s.groups.m[conv]; cur != nil {
		g = cur // another goroutine loaded it first
	} else if s.groups.gen != gen {
		s.groups.mu.Unlock()
		return g, nil // possibly stale by now: used once, not cached
	} else {
		s.groups.m[conv] = g
		// Under groups.mu, so a concurrent dropGroup cannot leave the
		// index tracking a group the cache no longer holds.
		s.online.track(conv, g.members, s.isOnline)
		s.shrinkGroups()
	}
	s.groups.mu.Unlock()
	return g, nil
}

// shrinkGroups drops a tenth of the cache when it is over its size, in map
// order (no bookkeeping on the hot path); a dropped group is loaded again
// when next used. Called with groups.mu held.
func (s *Service) shrinkGroups() {
	m := s.groups.m
	if len(m) <= s.cfg.GroupCacheSize {
		return
	}
	target := s.cfg.GroupCacheSize - s.cfg.GroupCacheSize/10
	for conv, g := range m {
		if len(m) <= target {
			break
		}
		s.online.untrack(conv, g.members) // lock order: groups.mu, then online.mu
		delete(m, conv)
	}
}

func (s *Service) groupsCached() int {
	s.groups.mu.RLock()
	defer s.groups.mu.RUnlock()
	return len(s.groups.m)
}

func recipientList(members map[string]store.Member) []string {
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	return ids
}

// applyToCache publishes a group's new state after a change was stored.
func (s *Service) applyToCache(conv string, info *store.Group, members []store.Member) {
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	s.groups.gen++ // a load of this group in flight may have read the state before this change
	old := s.groups.m[conv]
	created := false
	if old == nil {
		if info == nil {
			return // not cached: the next use loads it from the store
		}
		old, created = &groupState{members: map[string]store.Member{}}, true
	}
	g := &groupState{info: old.info, members: old.members}
	if info != nil {
		g.info = *info
	}
	if len(members) > 0 {
		g.members = make(map[string]store.Member, len(old.members)+len(members))
		for k, v := range old.members {
			g.members[k] = v
		}
		for _, m := range members {
			if m.Left {
				delete(g.members, m.UserID)
			} else {
				g.members[m.UserID] = m
			}
		}
	}
	g.setRecipients(time.Now())
	s.groups.m[conv] = g
	if created {
		s.online.track(conv, g.members, s.isOnline)
		s.shrinkGroups()
	} else {
		s.online.members(conv, members, s.isOnline)
	}
}

// groupRecipients returns the members of a group to deliver to: those with
// a session on this node (so the work follows the members online, not the
// group's size), or all members when the group is not tracked yet.
// groupDelivery is groupRecipients, and in a cluster the members who joined
// so lately that they are reached individually (DeliverGroup's joined).
func (s *Service) groupDelivery(conv string) (local, joined []string) {
	g, err := s.group(s.life, conv)
	if err != nil {
		return nil, nil
	}
	if online, ok := s.online.online(conv); ok {
		local = online
	} else {
		local = g.recipients
	}
	if g.joiners != nil && s.router.Clustered() {
		joined = g.recentJoiners(time.Now())
	}
	return local, joined
}

func (s *Service) groupRecipients(conv string) []string {
	g, err := s.group(s.life, conv)
	if err != nil {
		return nil
	}
	if online, ok := s.online.online(conv); ok {
		return online
	}
	return g.recipients
}

// maySendToGroup checks that uid may send to the group now.
func (s *Service) maySendToGroup(ctx context.Context, uid, conv string) error {
	g, err := s.group(ctx, conv)
	if err != nil {
		return err
	}
	m, ok := g.members[uid]
	if !ok {
		return errDenied
	}
	if g.info.Dissolved {
		return errConflict
	}
	if g.info.MuteAll && m.Role == pb.GroupRole_GROUP_ROLE_MEMBER {
		return errMuted
	}
	if !m.MutedUntil.IsZero() && time.Now().Before(m.MutedUntil) {
		return errMuted
	}
	return nil
}

// readLimit says how far uid may read conv: errDenied means not at all
// (whether or not it exists); upTo 0 means no limit, otherwise the last
// readable seq (a member who left reads up to their leaving). See readRange
// for the lower bound.
func (s *Service) readLimit(ctx context.Context, uid, conv string) (upTo uint64, err error) {
	_, upTo, err = s.readRange(ctx, uid, conv)
	return upTo, err
}

// readRange is readLimit with a lower bound: uid reads only seqs > since.
// In a group whose history visibility is since-join, since is the seq
// before the event that last added uid, so a member added later does not
// read what was said before, and one removed and added again does not read
// what was said while they were out (nor, then, their earlier period).
func (s *Service) readRange(ctx context.Context, uid, conv string) (since, upTo uint64, err error) {
	since, upTo, err = s.readRangeOf(ctx, uid, conv)
	if err != nil {
		return since, upTo, err
	}
	return s.aboveFloor(ctx, conv, since, upTo)
}

// readRangeOf is readRange before the conversation's retention floor.
func (s *Service) readRangeOf(ctx context.Context, uid, conv string) (since, upTo uint64, err error) {
	if !isGroup(conv) {
		if _, ok := directPeer(conv, uid); !ok {
			return 0, 0, errDenied
		}
		return 0, 0, nil
	}
	g, err := s.group(ctx, conv)
	if err != nil {
		return 0, 0, err
	}
	if m, ok := g.members[uid]; ok {
		return g.readsAfter(m), 0, nil
	}
	m, err := s.store.GetMember(ctx, conv, uid)
	if errors.Is(err, store.ErrNotFound) {
		return 0, 0, errDenied
	}
	if err != nil {
		return 0, 0, storeErr(err)
	}
	if !m.Left || m.LeftSeq == 0 {
		return 0, 0, errDenied
	}
	return g.readsAfter(m), m.LeftSeq, nil
}

// readsAfter is the seq after which member m reads the group: 0 (the whole
// history) under visibility ALL and for members added before JoinSeq was
// recorded, else the seq before their latest addition.
func (g *groupState) readsAfter(m store.Member) uint64 {
	if g.info.HistoryVisibility == pb.HistoryVisibility_HISTORY_VISIBILITY_ALL || m.JoinSeq == 0 {
		return 0
	}
	return m.JoinSeq - 1
}

// addPolicy and historyVisibility are a group's settings as in force:
// unset (every group stored before they existed) is the safe default.
func addPolicy(g store.Group) pb.GroupAddPolicy {
	if g.AddPolicy == pb.GroupAddPolicy_GROUP_ADD_POLICY_UNSPECIFIED {
		return pb.GroupAddPolicy_GROUP_ADD_POLICY_ADMINS
	}
	return g.AddPolicy
}

func historyVisibility(g store.Group) pb.HistoryVisibility {
	if g.HistoryVisibility == pb.HistoryVisibility_HISTORY_VISIBILITY_UNSPECIFIED {
		return pb.HistoryVisibility_HISTORY_VISIBILITY_SINCE_JOIN
	}
	return g.HistoryVisibility
}

// validAddPolicy and validVisibility accept the values a client may set
// (UNSPECIFIED only where it means "the default", at creation).
func validAddPolicy(p pb.GroupAddPolicy, unsetOK bool) bool {
	return p == pb.GroupAddPolicy_GROUP_ADD_POLICY_ADMINS || p == pb.GroupAddPolicy_GROUP_ADD_POLICY_EVERYONE ||
		unsetOK && p == pb.GroupAddPolicy_GROUP_ADD_POLICY_UNSPECIFIED
}

func validVisibility(v pb.HistoryVisibility, unsetOK bool) bool {
	return v == pb.HistoryVisibility_HISTORY_VISIBILITY_SINCE_JOIN || v == pb.HistoryVisibility_HISTORY_VISIBILITY_ALL ||
		unsetOK && v == pb.HistoryVisibility_HISTORY_VISIBILITY_UNSPECIFIED
}

func groupInfo(g *groupState) *pb.GroupInfo {
	i := g.info
	return &pb.GroupInfo{
		ConversationId: i.ConversationID, Name: i.Name, AvatarUrl: i.AvatarURL, Announcement: i.Announcement,
		Owner: i.Owner, OpenJoin: i.OpenJoin, MuteAll: i.MuteAll, MemberCount: uint32(len(g.members)),
		Dissolved: i.Dissolved, CreatedAt: i.CreatedAt.UnixMilli(),
		AddPolicy: addPolicy(i), HistoryVisibility: historyVisibility(i), MembersMentionAll: i.MembersMentionAll,
	}
}

func groupFrame(id uint64, g *groupState) *pb.ServerFrame {
	return &pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Group{Group: groupInfo(g)}}
}

// changeGroup stores a group change with its event through the committer (so
// the event takes its place in seq order), then updates the cache, delivers
// the event to the members (and to extra users, such as those removed), and
// calls reply.
func (s *Service) changeGroup(ctx context.Context, c Replier, sess *session.Session, reqID uint64, ch store.Change, extra []string, reply func(*groupState)) error {
	ch.Event.From = sess.UserID
	if ch.Event.ClientMsgId == "" {
		ch.Event.ClientMsgId = "evt-" + randomID()
	}
	p := &pendingSend{conn: c, sessID: sess.ID, reqID: reqID, change: &ch}
	p.after = func(r store.AppendResult, err error) {
		if e := mlsStepErr(err); e != nil && ch.MLS != nil {
			c.SendFrame(e.Frame(reqID)) // e2ee.go: a stale Commit
			return
		}
		if err != nil {
			c.SendFrame(errorFrame(reqID, pb.ErrorCode_ERROR_CODE_UNAVAILABLE))
			return
		}
		conv := ch.Event.ConversationId
		if !r.Duplicate {
			if ch.Joined { // as the store filled them in
				for i := range ch.Members {
					if m := &ch.Members[i]; !m.Left && m.JoinSeq == 0 {
						m.JoinSeq = r.Msg.Seq
					}
				}
			}
			s.applyToCache(conv, ch.Group, ch.Members)
			s.groupChanged(conv, ch.Members)
		}
		g, gerr := s.group(s.life, conv)
		if reply != nil && gerr == nil {
			reply(g)
		} else {
			s.replyOK(c, reqID)
		}
		if r.Duplicate || gerr != nil {
			return
		}
		s.deliverGroupChange(conv, g, ch.Members, extra, newMessageOutbound(r.Msg))
	}
	if s.cfg.Moderator != nil {
		return s.moderateGroupChange(ctx, sess, p)
	}
	if !s.submit(ctx, p) {
		return errUnavail
	}
	return nil
}

func randomID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func event(conv string, kind pb.MessageKind, ev *pb.MessageEvent) *pb.Message {
	return &pb.Message{ConversationId: conv, Kind: kind, Event: ev}
}

// validMembers checks, de-duplicates and bounds a list of user ids.
func (s *Service) validMembers(ids []string) ([]string, error) {
	if len(ids) > maxMembersPerRequest {
		return nil, errTooLarge
	}
	out := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !auth.ValidUserID(id) {
			return nil, errBadRequest
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

func (s *Service) createGroup(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.CreateGroup) error {
	if len(r.Name) > maxGroupName || len(r.AvatarUrl) > maxAvatarURL || len(r.Announcement) > maxAnnouncement {
		return errTooLarge
	}
	ids, err := s.validMembers(r.UserIds)
	if err != nil {
		return err
	}
	if !validAddPolicy(r.AddPolicy, true) || !validVisibility(r.HistoryVisibility, true) {
		return errBadRequest
	}
	ids = slices.DeleteFunc(ids, func(u string) bool { return u == sess.UserID })
	if len(ids)+1 > s.cfg.MaxGroupMembers {
		return errGroupFull
	}
	now := time.Now()
	// The settings are stored as in force, so a later change of the
	// defaults does not change existing groups.
	info := store.Group{
		ConversationID: groupPrefix + randomID(), Name: r.Name, AvatarURL: r.AvatarUrl,
		Announcement: r.Announcement, Owner: sess.UserID, OpenJoin: r.OpenJoin, CreatedAt: now.Truncate(time.Millisecond),
		MembersMentionAll: r.MembersMentionAll,
	}
	info.AddPolicy, info.HistoryVisibility = addPolicy(store.Group{AddPolicy: r.AddPolicy}), historyVisibility(store.Group{HistoryVisibility: r.HistoryVisibility})
	members := []store.Member{{UserID: sess.UserID, Role: pb.GroupRole_GROUP_ROLE_OWNER, JoinedAt: now}}
	for _, u := range ids {
		members = append(members, store.Member{UserID: u, Role: pb.GroupRole_GROUP_ROLE_MEMBER, JoinedAt: now})
	}
	g := &groupState{info: info, members: map[string]store.Member{}}
	for _, m := range members {
		g.members[m.UserID] = m
	}
	ev := event(info.ConversationID, pb.MessageKind_MESSAGE_KIND_GROUP_CREATED,
		&pb.MessageEvent{UserIds: append([]string{sess.UserID}, ids...), Group: groupInfo(g)})
	ch := store.Change{Event: ev, Group: &info, Members: members, Joined: true}
	if r.Encrypted { // e2ee.go: the group's MLS epoch starts with it
		ch.MLS, ev.Event.Group.Encrypted = &store.MLSStep{Create: true}, true
	}
	return s.changeGroup(ctx, c, sess, id, ch, nil,
		func(g *groupState) {
			f := groupFrame(id, g)
			f.GetGroup().Encrypted = r.Encrypted
			c.SendFrame(f)
		})
}

// loadForChange loads a group for a change by uid, who must be a current
// member of a group that is not dissolved; it returns uid's role.
func (s *Service) loadForChange(ctx context.Context, uid, conv string) (*groupState, pb.GroupRole, error) {
	if !isGroup(conv) {
		return nil, 0, errDenied
	}
	g, err := s.group(ctx, conv)
	if err != nil {
		return nil, 0, err
	}
	role, ok := g.role(uid)
	if !ok {
		return nil, 0, errDenied
	}
	if g.info.Dissolved {
		return nil, 0, errConflict
	}
	return g, role, nil
}

// loadForChangeAs is loadForChange for a session: the admin API's system
// session acts with the owner's rights in any group without being a member.
func (s *Service) loadForChangeAs(ctx context.Context, sess *session.Session, conv string) (*groupState, pb.GroupRole, error) {
	if !sess.System {
		return s.loadForChange(ctx, sess.UserID, conv)
	}
	if !isGroup(conv) {
		return nil, 0, errDenied
	}
	g, err := s.group(ctx, conv)
	if err != nil {
		return nil, 0, err
	}
	if g.info.Dissolved {
		return nil, 0, errConflict
	}
	return g, pb.GroupRole_GROUP_ROLE_OWNER, nil
}

func isAdmin(r pb.GroupRole) bool {
	return r == pb.GroupRole_GROUP_ROLE_ADMIN || r == pb.GroupRole_GROUP_ROLE_OWNER
}

func (s *Service) updateGroup(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.UpdateGroup) error {
	g, role, err := s.loadForChangeAs(ctx, sess, r.ConversationId)
	if err != nil {
		return err
	}
	if !isAdmin(role) {
		return errDenied
	}
	info := g.info
	if r.Name != nil {
		info.Name = *r.Name
	}
	if r.AvatarUrl != nil {
		info.AvatarURL = *r.AvatarUrl
	}
	if r.Announcement != nil {
		info.Announcement = *r.Announcement
	}
	if r.OpenJoin != nil {
		info.OpenJoin = *r.OpenJoin
	}
	if r.MuteAll != nil {
		info.MuteAll = *r.MuteAll
	}
	if r.MembersMentionAll != nil {
		info.MembersMentionAll = *r.MembersMentionAll
	}
	if r.AddPolicy != nil {
		if !validAddPolicy(*r.AddPolicy, false) {
			return errBadRequest
		}
		info.AddPolicy = *r.AddPolicy
	}
	if r.HistoryVisibility != nil {
		if !validVisibility(*r.HistoryVisibility, false) {
			return errBadRequest
		}
		info.HistoryVisibility = *r.HistoryVisibility
	}
	if len(info.Name) > maxGroupName || len(info.AvatarURL) > maxAvatarURL || len(info.Announcement) > maxAnnouncement {
		return errTooLarge
	}
	// Encryption is kept with the MLS epoch (e2ee.go), not in the group's
	// info: the reply and the event say it as createGroup's do.
	enc, err := s.isEncrypted(ctx, r.ConversationId)
	if err != nil {
		return err
	}
	next := &groupState{info: info, members: g.members}
	gi := groupInfo(next)
	gi.Encrypted = enc
	ev := event(info.ConversationID, pb.MessageKind_MESSAGE_KIND_GROUP_UPDATED, &pb.MessageEvent{Group: gi})
	return s.changeGroup(ctx, c, sess, id, store.Change{Event: ev, Group: &info}, nil,
		func(g *groupState) {
			f := groupFrame(id, g)
			f.GetGroup().Encrypted = enc
			c.SendFrame(f)
		})
}

func (s *Service) addMembers(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.AddMembers) error {
	g, role, err := s.loadForChangeAs(ctx, sess, r.ConversationId)
	if err != nil {
		return err
	}
	// Plain members add only when the group lets everyone add, and not
	// while it is muted.
	if !isAdmin(role) && (addPolicy(g.info) != pb.GroupAddPolicy_GROUP_ADD_POLICY_EVERYONE || g.info.MuteAll) {
		return errDenied
	}
	ids, err := s.validMembers(r.UserIds)
	if err != nil {
		return err
	}
	ids = slices.DeleteFunc(ids, func(u string) bool { _, in := g.members[u]; return in })
	if len(ids) == 0 && len(r.MlsCommit) > 0 {
		return errBadRequest // nothing to store the Commit with (a device Commit goes through MlsCommit)
	}
	if len(ids) == 0 {
		s.replyOK(c, id)
		return nil
	}
	if len(g.members)+len(ids) > s.cfg.MaxGroupMembers {
		return errGroupFull
	}
	now := time.Now()
	members := make([]store.Member, len(ids))
	for i, u := range ids {
		members[i] = store.Member{UserID: u, Role: pb.GroupRole_GROUP_ROLE_MEMBER, JoinedAt: now}
	}
	ev := event(r.ConversationId, pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, &pb.MessageEvent{UserIds: ids})
	ch := store.Change{Event: ev, Members: members, Joined: true}
	if err := s.withCommit(ctx, &ch, r.MlsCommit, r.MlsWelcome); err != nil {
		return err
	}
	return s.changeGroup(ctx, c, sess, id, ch, nil, nil)
}

// outranks reports whether a may act on a member with role b.
func outranks(a, b pb.GroupRole) bool {
	return a == pb.GroupRole_GROUP_ROLE_OWNER && b != pb.GroupRole_GROUP_ROLE_OWNER ||
		a == pb.GroupRole_GROUP_ROLE_ADMIN && b == pb.GroupRole_GROUP_ROLE_MEMBER
}

func (s *Service) removeMember(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.RemoveMember) error {
	g, role, err := s.loadForChangeAs(ctx, sess, r.ConversationId)
	if err != nil {
		return err
	}
	target, ok := g.members[r.UserId]
	if !ok || r.UserId == sess.UserID {
		return errBadRequest
	}
	if !outranks(role, target.Role) {
		return errDenied
	}
	target.Left, target.LeftSeq = true, 0
	ev := event(r.ConversationId, pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED, &pb.MessageEvent{UserIds: []string{r.UserId}})
	ch := store.Change{Event: ev, Members: []store.Member{target}}
	if err := s.withCommit(ctx, &ch, r.MlsCommit, nil); err != nil {
		return err
	}
	return s.changeGroup(ctx, c, sess, id, ch, []string{r.UserId}, nil)
}

func (s *Service) joinGroup(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.JoinGroup) error {
	if !isGroup(r.ConversationId) {
		return errDenied
	}
	g, err := s.group(ctx, r.ConversationId)
	if err != nil {
		return err
	}
	if _, in := g.members[sess.UserID]; in {
		c.SendFrame(groupFrame(id, g))
		return nil
	}
	if !g.info.OpenJoin || g.info.Dissolved {
		return errDenied // the same answer as for a group that does not exist
	}
	if len(g.members)+1 > s.cfg.MaxGroupMembers {
		return errGroupFull
	}
	m := store.Member{UserID: sess.UserID, Role: pb.GroupRole_GROUP_ROLE_MEMBER, JoinedAt: time.Now()}
	ev := event(r.ConversationId, pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, &pb.MessageEvent{UserIds: []string{sess.UserID}})
	return s.changeGroup(ctx, c, sess, id, store.Change{Event: ev, Members: []store.Member{m}, Joined: true}, nil,
		func(g *groupState) { c.SendFrame(groupFrame(id, g)) })
}

func (s *Service) leaveGroup(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.LeaveGroup) error {
	g, role, err := s.loadForChangeAs(ctx, sess, r.ConversationId)
	if err != nil {
		return err
	}
	if role == pb.GroupRole_GROUP_ROLE_OWNER {
		return errConflict // transfer ownership (or dissolve) first
	}
	me := g.members[sess.UserID]
	me.Left, me.LeftSeq = true, 0
	ev := event(r.ConversationId, pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED, &pb.MessageEvent{UserIds: []string{sess.UserID}})
	return s.changeGroup(ctx, c, sess, id, store.Change{Event: ev, Members: []store.Member{me}}, []string{sess.UserID}, nil)
}

func (s *Service) setRole(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.SetRole) error {
	g, role, err := s.loadForChangeAs(ctx, sess, r.ConversationId)
	if err != nil {
		return err
	}
	if role != pb.GroupRole_GROUP_ROLE_OWNER {
		return errDenied
	}
	if r.Role != pb.GroupRole_GROUP_ROLE_ADMIN && r.Role != pb.GroupRole_GROUP_ROLE_MEMBER {
		return errBadRequest
	}
	target, ok := g.members[r.UserId]
	if !ok || r.UserId == sess.UserID {
		return errBadRequest
	}
	target.Role = r.Role
	ev := event(r.ConversationId, pb.MessageKind_MESSAGE_KIND_ROLE_CHANGED, &pb.MessageEvent{UserIds: []string{r.UserId}, Role: r.Role})
	return s.changeGroup(ctx, c, sess, id, store.Change{Event: ev, Members: []store.Member{target}}, nil, nil)
}

func (s *Service) muteMember(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.MuteMember) error {
	g, role, err := s.loadForChangeAs(ctx, sess, r.ConversationId)
	if err != nil {
		return err
	}
	target, ok := g.members[r.UserId]
	if !ok || r.UserId == sess.UserID || r.DurationSeconds > maxMuteSeconds {
		return errBadRequest
	}
	if !outranks(role, target.Role) {
		return errDenied
	}
	target.MutedUntil = time.Time{}
	var until int64
	if r.DurationSeconds > 0 {
		target.MutedUntil = time.Now().Add(time.Duration(r.DurationSeconds) * time.Second).Truncate(time.Millisecond)
		until = target.MutedUntil.UnixMilli()
	}
	ev := event(r.ConversationId, pb.MessageKind_MESSAGE_KIND_MEMBER_MUTED, &pb.MessageEvent{UserIds: []string{r.UserId}, MutedUntil: until})
	return s.changeGroup(ctx, c, sess, id, store.Change{Event: ev, Members: []store.Member{target}}, nil, nil)
}

func (s *Service) transferOwnership(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.TransferOwnership) error {
	g, role, err := s.loadForChangeAs(ctx, sess, r.ConversationId)
	if err != nil {
		return err
	}
	if role != pb.GroupRole_GROUP_ROLE_OWNER {
		return errDenied
	}
	target, ok := g.members[r.UserId]
	if !ok || r.UserId == sess.UserID {
		return errBadRequest
	}
	if target.Role == pb.GroupRole_GROUP_ROLE_OWNER {
		return errBadRequest
	}
	// The previous owner: the caller, or, for the admin API, whoever owned it.
	me := g.members[g.info.Owner]
	me.Role, target.Role = pb.GroupRole_GROUP_ROLE_ADMIN, pb.GroupRole_GROUP_ROLE_OWNER
	info := g.info
	info.Owner = r.UserId
	ev := event(r.ConversationId, pb.MessageKind_MESSAGE_KIND_OWNER_CHANGED, &pb.MessageEvent{UserIds: []string{r.UserId}})
	return s.changeGroup(ctx, c, sess, id, store.Change{Event: ev, Group: &info, Members: []store.Member{me, target}}, nil, nil)
}

func (s *Service) dissolveGroup(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.DissolveGroup) error {
	g, role, err := s.loadForChangeAs(ctx, sess, r.ConversationId)
	if err != nil {
		return err
	}
	if role != pb.GroupRole_GROUP_ROLE_OWNER {
		return errDenied
	}
	info := g.info
	info.Dissolved = true
	ev := event(r.ConversationId, pb.MessageKind_MESSAGE_KIND_GROUP_DISSOLVED, nil)
	return s.changeGroup(ctx, c, sess, id, store.Change{Event: ev, Group: &info}, nil, nil)
}

func (s *Service) getGroup(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.GetGroup) error {
	if !isGroup(r.ConversationId) {
		return errDenied
	}
	if !sess.System {
		if _, err := s.readLimit(ctx, sess.UserID, r.ConversationId); err != nil {
			return err
		}
	}
	g, err := s.group(ctx, r.ConversationId)
	if err != nil {
		return err
	}
	f := groupFrame(id, g)
	if f.GetGroup().Encrypted, err = s.isEncrypted(ctx, r.ConversationId); err != nil {
		return err
	}
	c.SendFrame(f)
	return nil
}

func (s *Service) listMembers(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.ListMembers) error {
	if !isGroup(r.ConversationId) {
		return errDenied
	}
	g, err := s.group(ctx, r.ConversationId)
	if err != nil {
		return err
	}
	if _, ok := g.members[sess.UserID]; !ok && !sess.System {
		return errDenied
	}
	n := pageLimit(r.Limit)
	list, err := s.store.Members(ctx, r.ConversationId, r.AfterUserId, n+1)
	if err != nil {
		return storeErr(err)
	}
	page := &pb.MemberPage{ConversationId: r.ConversationId}
	if len(list) > n {
		list = list[:n]
		page.NextAfterUserId = list[n-1].UserID
	}
	for _, m := range list {
		pm := &pb.Member{UserId: m.UserID, Role: m.Role, JoinedAt: m.JoinedAt.UnixMilli()}
		if !m.MutedUntil.IsZero() {
			pm.MutedUntil = m.MutedUntil.UnixMilli()
		}
		page.Members = append(page.Members, pm)
	}
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Members{Members: page}})
	return nil
}
