// Package bleveindex is the embedded search.Index: a Bleve (scorch) index in
// a directory of the server's data directory, fed by a search.Follower from
// the embedded store's log.
//
// One Bleve document per searchable message, id "seq:conversation":
//
//	text    the message's text, analyzed (analysis.go), stored (snippets),
//	        with positions (phrases)
//	key     the sort key (sortKey): time, conversation, seq and sender in
//	        one term, doc values; a hit's time and sender are read from it
//	conv    conversation id, one term
//	member  each of Doc.Members (the two sides of a 1:1 conversation), one
//	        term each: a user's 1:1 conversations are one term's postings;
//	        and NUL (memberAny) once when there are members
//	seq     number, only in documents without members (groups: a member's
//	        join/leave window is a seq range)
//	from    sender id, one term
//	ctype   content type, one term, when not "" (text)
//	att     true, only when it has attachments
//	vis     "all", or "sender" for SenderOnly
//
// Each indexed term costs the segment builder a posting per document, and
// a Bleve number is 16 terms: the time is therefore not a number field
// (the date filters and paging use the sort key, which begins with it),
// and fields whose value no query asks for are left out.
//
// Documents are built directly (IndexAdvanced) rather than through a
// mapping, so no analyzer is registered in Bleve's package-level registry.
// The feed position is an internal key set in the same batch as the
// documents: Bleve introduces both in one snapshot.
package bleveindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/single"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	bindex "github.com/blevesearch/bleve_index_api"
	"golang.org/x/text/unicode/norm"

	"github.com/parleyim/parley/internal/search"
)

// Field names and values.
const (
	fText   = "text"
	fKey    = "key"
	fConv   = "conv"
	fMember = "member"
	fSeq    = "seq"
	fFrom   = "from"
	fCType  = "ctype"
	fAtt    = "att"
	fVis    = "vis"

	// memberAny is a member term of every document with members (no user
	// id holds a NUL): such documents have no seq field.
	memberAny = "\x00"

	visAll    = "all"
	visSender = "sender"
)

// Internal keys.
var (
	keyPosition = []byte("parley.position")
	// keyFormat holds formatVersion. An index of another version (the
	// documents or the analysis changed) is dropped and rebuilt from the
	// store by the follower, from position 0.
	keyFormat = []byte("parley.format")
)

// formatVersion 3: members, sender in the sort key, no time field.
const formatVersion = "3"

// foldCacheBytes bounds the index's cache of folded non-ASCII terms
// (search.FoldCache).
const foldCacheBytes = 4 << 20

// Dir is the index's directory in a server's data directory (beside the
// store's "store").
const Dir = "search"

// Options configures an Index. The zero value is usable.
type Options struct {
	// Logger gets what the index does on its own (dropping an unreadable
	// or outdated index). nil means slog.Default().
	Logger *slog.Logger
	// scorch is Bleve's scorch configuration (benchmarks of its persister
	// and merge options); nil: its defaults.
	scorch map[string]any
}

// Index is a search.Index in one directory. Safe for concurrent use.
type Index struct {
	dir   string
	log   *slog.Logger
	index analysis.Analyzer // analyzes documents' text
	query analysis.Analyzer // cuts query text
	kw    analysis.Analyzer // one term per value

	// mu is held for reading by every call while it uses idx, for writing
	// by Close.
	mu     sync.RWMutex
	idx    bleve.Index // nil once closed
	closed bool
}

var _ search.Index = (*Index)(nil)

// Open opens the index in dir, creating it when there is none. An index
// that cannot be opened (damaged) or was written by another format version
// is removed and created empty: it is rebuilt from the store (its position
// starts at 0), and the loss is logged.
func Open(dir string, opts Options) (*Index, error) {
	l := opts.Logger
	if l == nil {
		l = slog.Default()
	}
	// 4 MiB of foldings: tens of thousands of distinct non-ASCII words.
	fc := search.NewFoldCache(foldCacheBytes)
	ix := &Index{dir: dir, log: l, index: newAnalyzer(false, fc), query: newAnalyzer(true, fc), kw: &analysis.DefaultAnalyzer{Tokenizer: single.NewSingleTokenTokenizer()}}
	idx, err := openOrCreate(dir, l, opts.scorch)
	if err != nil {
		return nil, err
	}
	ix.idx = idx
	return ix, nil
}

func openOrCreate(dir string, l *slog.Logger, cfg map[string]any) (bleve.Index, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return create(dir, cfg)
	} else if err != nil {
		return nil, fmt.Errorf("bleveindex: %w", err)
	}
	idx, err := bleve.OpenUsing(dir, cfg)
	reason := ""
	if err != nil {
		reason = "cannot be opened: " + err.Error()
	} else if v, verr := idx.GetInternal(keyFormat); verr != nil {
		reason = "unreadable: " + verr.Error()
	} else if string(v) != formatVersion {
		reason = fmt.Sprintf("format %q, this server writes %q", v, formatVersion)
	} else if p, perr := idx.GetInternal(keyPosition); perr != nil || (len(p) != 0 && len(p) != 8) {
		reason = fmt.Sprintf("bad position record (%d bytes, %v)", len(p), perr)
	}
	if reason == "" {
		return idx, nil
	}
	if err == nil { // opened, but not ours to use (on error idx holds a nil pointer)
		_ = idx.Close()
	}
	l.Error("bleveindex: dropping the search index; it is rebuilt from the store", "dir", dir, "reason", reason)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("bleveindex: remove %s: %w", dir, err)
	}
	return create(dir, cfg)
}

func create(dir string, cfg map[string]any) (bleve.Index, error) {
	m := bleve.NewIndexMapping()
	// Documents are built by hand (newDocument); nothing is mapped.
	m.DefaultMapping = mapping.NewDocumentDisabledMapping()
	m.IndexDynamic, m.StoreDynamic, m.DocValuesDynamic = false, false, false
	idx, err := bleve.NewUsing(dir, m, scorch.Name, scorch.Name, cfg)
	if err != nil {
		return nil, fmt.Errorf("bleveindex: create %s: %w", dir, err)
	}
	if err := idx.SetInternal(keyFormat, []byte(formatVersion)); err != nil {
		_ = idx.Close()
		return nil, fmt.Errorf("bleveindex: create %s: %w", dir, err)
	}
	return idx, nil
}

// enter holds mu for reading while the index is open; the caller must call
// mu.RUnlock.
func (x *Index) enter() error {
	x.mu.RLock()
	if x.closed {
		x.mu.RUnlock()
		return search.ErrClosed
	}
	return nil
}

// Close implements search.Index.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return search.ErrClosed
	}
	x.closed = true
	return x.idx.Close()
}

// docID is "seq:conversation": unambiguous whatever bytes the
// conversation id holds (the seq has no ':').
func docID(conv string, seq uint64) string {
	return strconv.FormatUint(seq, 10) + ":" + conv
}

func parseDocID(id string) (conv string, seq uint64, ok bool) {
	s, conv, found := strings.Cut(id, ":")
	if !found {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(s, 10, 64)
	return conv, seq, err == nil
}

// indexed: a keyword field, matched by term only (no scoring: no
// frequencies or norms).
const indexed = bindex.IndexField | bindex.SkipFreqNorm

// keyOptions: the sort key's doc values are read for every matching
// document, in no particular order, so each is its own uncompressed chunk:
// with chunks of many documents (Bleve's default), compressed, a search
// decompressed a whole chunk per hit it sorted (40 % of a search's CPU).
const keyOptions = indexed | bindex.DocValues | bindex.SkipDVChunking | bindex.SkipDVCompression

// sortKey orders documents as search.Cursor does, bytewise: the time as 16
// hex digits (times before 1970 are clamped to 0), the conversation, a NUL,
// the seq as 16 hex digits. One doc-value field sorts a search: each field
// sorted on costs a doc-value chunk read per matching document. A
// document's key goes on with a NUL and the sender (docKey), so a hit's
// time and sender come with its sort value; a cursor's key is a prefix of
// its document's, so paging after it still leaves that document out.
func sortKey(c search.Cursor) string {
	t := uint64(max(c.Time, 0))
	return fmt.Sprintf("%016x%s\x00%016x", t, c.ConversationID, c.Seq)
}

func docKey(d *search.Doc) string {
	return sortKey(search.Cursor{Time: d.Time, ConversationID: d.ConversationID, Seq: d.Seq}) + "\x00" + d.From
}

// timeKey is where the keys of time t end: every key of a time <= t sorts
// before it, every later one after.
func timeKey(t int64) string {
	if t < 0 {
		t = -1
	}
	return fmt.Sprintf("%016x", uint64(t+1))
}

// keyFields reads a docKey's time and sender.
func keyFields(key string) (t int64, from string, ok bool) {
	if len(key) < 16 {
		return 0, "", false
	}
	u, err := strconv.ParseUint(key[:16], 16, 64)
	i := strings.LastIndexByte(key, 0)
	if err != nil || i < 16 {
		return 0, "", false
	}
	return int64(u), key[i+1:], true
}

func (x *Index) newDocument(d *search.Doc) *document.Document {
	doc := document.NewDocument(docID(d.ConversationID, d.Seq))
	text := norm.NFC.String(search.CutText(d.Text, search.MaxTextBytes))
	vis := visAll
	if d.SenderOnly {
		vis = visSender
	}
	doc.AddField(document.NewTextFieldCustom(fText, nil, []byte(text),
		bindex.IndexField|bindex.StoreField|bindex.IncludeTermVectors, x.index))
	doc.AddField(document.NewTextFieldCustom(fKey, nil, []byte(docKey(d)), keyOptions, x.kw))
	doc.AddField(document.NewTextFieldCustom(fConv, nil, []byte(d.ConversationID), indexed, x.kw))
	if len(d.Members) > 0 {
		doc.AddField(document.NewTextFieldCustom(fMember, nil, []byte(memberAny), indexed, x.kw))
	}
	for _, m := range d.Members {
		doc.AddField(document.NewTextFieldCustom(fMember, nil, []byte(m), indexed, x.kw))
	}
	if len(d.Members) == 0 {
		doc.AddField(document.NewNumericFieldWithIndexingOptions(fSeq, nil, float64(d.Seq), indexed))
	}
	doc.AddField(document.NewTextFieldCustom(fFrom, nil, []byte(d.From), indexed, x.kw))
	if d.ContentType != "" {
		doc.AddField(document.NewTextFieldCustom(fCType, nil, []byte(d.ContentType), indexed, x.kw))
	}
	if d.HasAttachment {
		doc.AddField(document.NewBooleanFieldWithIndexingOptions(fAtt, nil, true, indexed))
	}
	doc.AddField(document.NewTextFieldCustom(fVis, nil, []byte(vis), indexed, x.kw))
	return doc
}

// Apply implements search.Index: one Bleve batch of the documents and the
// position, durable when it returns.
func (x *Index) Apply(ctx context.Context, changes []search.Change, pos uint64) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := x.enter(); err != nil {
		return err
	}
	defer x.mu.RUnlock()
	defer recoverInto(&err)
	b := x.idx.NewBatch()
	for _, c := range changes {
		if c.Put != nil {
			if err := b.IndexAdvanced(x.newDocument(c.Put)); err != nil {
				return fmt.Errorf("bleveindex: %w", err)
			}
			continue
		}
		b.Delete(docID(c.ConversationID, c.Seq))
	}
	b.SetInternal(keyPosition, binary.BigEndian.AppendUint64(nil, pos))
	if err := x.idx.Batch(b); err != nil {
		return fmt.Errorf("bleveindex: %w", err)
	}
	return nil
}

// Position implements search.Index.
func (x *Index) Position(ctx context.Context) (uint64, error) {
	if err := x.enter(); err != nil {
		return 0, err
	}
	defer x.mu.RUnlock()
	v, err := x.idx.GetInternal(keyPosition)
	if err != nil {
		return 0, fmt.Errorf("bleveindex: %w", err)
	}
	if len(v) == 0 {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("bleveindex: bad position record (%d bytes)", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// recoverInto turns a panic inside Bleve into an error of the call that
// met it: the index is a copy of the store, and one bad batch or query
// must fail that call (the follower retries it), never the server. Seen
// once under heavy load: zapx's term-dictionary cache written after its
// segment was closed ("assignment to entry in nil map").
func recoverInto(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("bleveindex: panic inside Bleve: %v", r)
	}
}
