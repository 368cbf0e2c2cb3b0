package bleveindex

import (
	"context"
	"fmt"

	"github.com/parleyim/parley/internal/store"
)

// Forget removes the documents of messages that were deleted for good
// (retention, disappearing messages: docs/retention.md), without moving the
// index's position in the log: their log entries are deleted with them, so
// the follower never hands them again. A document the follower adds after
// Forget (it read the entry just before the deletion) stays until the next
// Forget of it; searches leave such hits out (they are below the
// conversation's floor, or their message is gone).
func (x *Index) Forget(ctx context.Context, refs []store.MessageRef) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(refs) == 0 {
		return nil
	}
	if err := x.enter(); err != nil {
		return err
	}
	defer x.mu.RUnlock()
	b := x.idx.NewBatch()
	for _, r := range refs {
		b.Delete(docID(r.ConversationID, r.Seq))
	}
	if err := x.idx.Batch(b); err != nil {
		return fmt.Errorf("bleveindex: %w", err)
	}
	return nil
}
