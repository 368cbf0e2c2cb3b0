package chat

// The frame handlers of contacts, blocks, typing indicators and presence.
// The rules live in packages contacts (friends, blocks, mayMessage's
// relation cache) and presence (subscriptions, online/offline fan-out, last
// seen, the typing limiter); these handlers decode a request, call them and
// answer.

import (
	"context"
	"time"

	"github.com/parleyim/parley/internal/contacts"
	"github.com/parleyim/parley/internal/presence"
	"github.com/parleyim/parley/internal/route"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// social is the per-node state of contacts, blocks, typing and presence.
type social struct {
	contacts *contacts.Book
	presence *presence.Hub
	typing   presence.TypingLimiter
}

// initSocial builds the contacts book and the presence hub on the service's
// store, router and registry.
func (s *Service) initSocial() {
	s.social.contacts = contacts.New(s.store, contacts.Config{DenyStrangers: s.cfg.DenyStrangers, RefuseUnknown: s.cfg.RefuseUnknown}, s.pushContact)
	var cluster presence.Cluster
	if s.router.Clustered() {
		cluster = presenceCluster{s}
	}
	s.social.presence = presence.New(presence.Config{
		Store:    s.store,
		Contacts: s.social.contacts,
		Sessions: s.sessions,
		Circles:  presenceCircles{s},
		Cluster:  cluster,
		Watch:    func(uid string, on bool) { s.watch(route.TopicPresence, uid, on) },
		Log:      s.log,
		Life:     s.life,
	})
}

// presenceCluster is the cluster as presence asks it.
type presenceCluster struct{ s *Service }

func (c presenceCluster) OnlineElsewhere(ctx context.Context, uid string) (string, error) {
	return c.s.router.OnlineElsewhere(ctx, uid)
}

func (c presenceCluster) HeardFrom(node string) { c.s.heardFrom(node) }

// presenceCircles answers presence's questions about conversations.
type presenceCircles struct{ s *Service }

func (c presenceCircles) Conversations(ctx context.Context, uid string) (peers, groups []string, err error) {
	convs, err := c.s.store.Conversations(ctx, uid)
	if err != nil {
		return nil, nil, storeErr(err)
	}
	for _, conv := range convs {
		if isGroup(conv) {
			groups = append(groups, conv)
		} else if peer, found := directPeer(conv, uid); found {
			peers = append(peers, peer)
		}
	}
	return peers, groups, nil
}

func (c presenceCircles) GroupMembers(ctx context.Context, conv string) (map[string]store.Member, error) {
	g, err := c.s.group(ctx, conv)
	if err != nil {
		return nil, err
	}
	return g.members, nil
}

// mayMessage checks that from may send a 1:1 message to to.
func (s *Service) mayMessage(ctx context.Context, from, to string) error {
	return s.social.contacts.MayMessage(ctx, from, to)
}

// ---- Contacts ----

// pushContact sends owner's record about the other user to owner's devices,
// except the session except. A removed record has state UNSPECIFIED.
func (s *Service) pushContact(ctx context.Context, owner string, c store.Contact, except string) {
	out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_ContactEvent{
		ContactEvent: &pb.ContactEvent{Contact: contacts.Proto(c)}}})
	if err := s.router.DeliverToUsers(ctx, []string{owner}, out, except, nil); err != nil {
		s.deliveryFailed("contact event", err)
	}
}

func (s *Service) friendRequest(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.FriendRequest) error {
	return s.okOrErr(c, id, s.social.contacts.Request(ctx, sess.UserID, r.UserId, r.Note, sess.ID))
}

func (s *Service) respondFriend(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.RespondFriend) error {
	return s.okOrErr(c, id, s.social.contacts.Respond(ctx, sess.UserID, r.UserId, r.Accept, sess.ID))
}

func (s *Service) removeFriend(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.RemoveFriend) error {
	return s.okOrErr(c, id, s.social.contacts.Remove(ctx, sess.UserID, r.UserId, sess.ID))
}

func (s *Service) listContacts(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.ListContacts) error {
	cl, err := s.social.contacts.List(ctx, sess.UserID)
	if err != nil {
		return err
	}
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Contacts{Contacts: cl}})
	return nil
}

func (s *Service) block(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Block) error {
	return s.setBlocked(ctx, c, sess, id, r.UserId, true)
}

func (s *Service) unblock(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Unblock) error {
	return s.setBlocked(ctx, c, sess, id, r.UserId, false)
}

// setBlocked changes the block list. The other user is never told; a block
// also ends their presence subscriptions to this user on this node.
func (s *Service) setBlocked(ctx context.Context, c Replier, sess *session.Session, id uint64, other string, blocked bool) error {
	if err := s.social.contacts.SetBlocked(ctx, sess.UserID, other, blocked); err != nil {
		return err
	}
	if blocked {
		s.social.presence.DropSubscriber(sess.UserID, other)
	}
	s.replyOK(c, id)
	return nil
}

// okOrErr answers ok when err is nil, and returns err.
func (s *Service) okOrErr(c Replier, id uint64, err error) error {
	if err == nil {
		s.replyOK(c, id)
	}
	return err
}

// ---- Typing ----

// quietDrop reports whether err is a refusal that a typing indicator is
// dropped for silently (the sender cannot tell from the reply).
func quietDrop(err error) bool {
	return err == errDenied || err == errMuted || err == errConflict
}

func (s *Service) typing(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Typing) error {
	uid, conv := sess.UserID, r.ConversationId
	upTo, err := s.readLimit(ctx, uid, conv)
	if err != nil {
		return err
	}
	if upTo != 0 {
		return errDenied // a former member: may read, not take part
	}
	if sess.ShadowMuted {
		s.replyOK(c, id) // shown to nobody, like what they send
		return nil
	}
	var users []string
	if isGroup(conv) {
		err = s.maySendToGroup(ctx, uid, conv)
		// Typing fans out to every online member; above the receipt-list
		// size it is dropped (answered ok), as big groups would drown in it.
		if rs := s.groupRecipients(conv); err == nil && len(rs) <= s.cfg.ReceiptListMax {
			users = rs
		}
	} else {
		peer, _ := directPeer(conv, uid)
		if err = s.mayMessage(ctx, uid, peer); err == nil && peer != uid {
			users = []string{peer}
		}
	}
	switch {
	case err != nil && !quietDrop(err):
		return err
	case err == nil && len(users) > 0 && s.social.typing.Allow(uid, conv, time.Now()):
		out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Typing{
			Typing: &pb.TypingEvent{ConversationId: conv, UserId: uid}}})
		if isGroup(conv) {
			err = s.router.DeliverGroup(ctx, conv, users, nil, out, sess.ID, nil)
		} else {
			err = s.router.DeliverToUsers(ctx, users, out, sess.ID, nil)
		}
		if err != nil {
			s.deliveryFailed("typing", err)
		}
	}
	s.replyOK(c, id)
	return nil
}

// ---- Presence ----

// sessionOpened runs after sess was added to the registry.
func (s *Service) sessionOpened(sess *session.Session) {
	s.emitSession(EventUserOnline, sess)
	s.social.presence.Opened(sess.UserID)
}

// sessionClosed runs after sess was removed from the registry (or kicked).
func (s *Service) sessionClosed(sess *session.Session) {
	s.emitSession(EventUserOffline, sess)
	s.social.presence.Closed(sess)
}

// remotePresence applies node's report that uid came online there or has
// no session left there.
func (s *Service) remotePresence(uid, node string, on bool) {
	s.social.presence.Remote(uid, node, on)
}

// checkOffline publishes uid offline unless a session of uid is left here
// or on another node.
func (s *Service) checkOffline(uid string, lastSeen int64) {
	s.social.presence.CheckOffline(uid, lastSeen)
}

func (s *Service) subscribePresence(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.SubscribePresence) error {
	ids, err := s.validMembers(r.UserIds)
	if err != nil {
		return err
	}
	return s.social.presence.Subscribe(ctx, sess, ids, func(list *pb.PresenceList) {
		c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Presence{Presence: list}})
	})
}

func (s *Service) unsubscribePresence(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.UnsubscribePresence) error {
	ids, err := s.validMembers(r.UserIds)
	if err != nil {
		return err
	}
	s.social.presence.Unsubscribe(sess, ids) // an empty list ends every subscription
	s.replyOK(c, id)
	return nil
}
