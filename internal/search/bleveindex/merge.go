package bleveindex

import (
	"context"
	"errors"
	"fmt"

	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch/mergeplan"
)

// mergePlaceholder is the id of Merge's placeholder document (no message's
// id: those are conversation/seq).
const mergePlaceholder = "\x00merge"

// Merge rewrites the index into one segment. A deleted document's text
// stays in its segment file (only marked deleted) until its segment is
// merged; an account deletion merges so that erased text leaves the disk
// (docs/accounts.md). The old segment files are removed by the index in
// the background once no search uses them. It costs a rewrite of the whole
// index.
func (x *Index) Merge(ctx context.Context) error {
	if err := x.enter(); err != nil {
		return err
	}
	defer x.mu.RUnlock()
	adv, err := x.idx.Advanced()
	if err != nil {
		return fmt.Errorf("bleveindex: %w", err)
	}
	m, ok := adv.(interface {
		ForceMerge(context.Context, *mergeplan.MergePlanOptions) error
	})
	if !ok {
		return errors.New("bleveindex: the index cannot merge")
	}
	// Bleve never merges a lone segment, whatever it has deleted: a
	// placeholder document (no fields; no search matches it) makes a
	// second one, and is deleted again once merged.
	b := x.idx.NewBatch()
	if err := b.IndexAdvanced(document.NewDocument(mergePlaceholder)); err != nil {
		return fmt.Errorf("bleveindex: %w", err)
	}
	if err := x.idx.Batch(b); err != nil {
		return fmt.Errorf("bleveindex: %w", err)
	}
	if err := m.ForceMerge(ctx, &mergeplan.SingleSegmentMergePlanOptions); err != nil {
		return fmt.Errorf("bleveindex: %w", err)
	}
	if err := x.idx.Delete(mergePlaceholder); err != nil {
		return fmt.Errorf("bleveindex: %w", err)
	}
	return nil
}
