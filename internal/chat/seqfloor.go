package chat

import (
	"context"
)

// maxSeqJump bounds how far one report of a cursor beyond the newest seq
// raises a conversation's seq: a real loss is covered over a few syncs,
// while a member who lies about their cursor can only skip seqs slowly (and
// each report is logged and counted).
const maxSeqJump = 1 << 16

// cursorBeyondLast handles a client that synced from a cursor past the
// conversation's newest stored seq: the messages it holds there were lost
// by the store (a restore from an older backup, a lost log). The seq is
// raised past the cursor so that no seq the client holds is issued again to
// a different message. uid has been authorized to read conv.
func (s *Service) cursorBeyondLast(ctx context.Context, uid, conv string, cursor uint64) {
	last, err := s.store.LastSeq(ctx, conv)
	if err != nil || cursor <= last {
		return
	}
	s.stats.cursorsAhead.Add(1)
	floor := min(cursor, last+maxSeqJump)
	s.log.Error("chat: a client holds seqs this conversation does not have: stored messages were lost; raising the next seq past them",
		"conversation", conv, "user", uid, "client_cursor", cursor, "last_seq", last, "raised_to", floor)
	if err := s.store.RaiseSeq(ctx, conv, floor); err != nil {
		s.log.Error("chat: raising the seq failed", "conversation", conv, "err", err)
	}
}
