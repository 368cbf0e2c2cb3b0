// Package rich holds the parts of rich messages (docs/rich-messages.md) that
// are not the messaging service's own: checking reaction emojis, cutting a
// reply's preview, coalescing reaction updates before they fan out to a
// conversation's members, and the registry of streamed messages being
// written. Package chat calls it; it knows nothing of sessions or storage.
package rich
