package pebblestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/parleyim/parley/internal/migrate"
	"github.com/parleyim/parley/internal/store"
)

// Export (parley migrate): the store as a migrate.Source. Every namespace
// of keys.go is either exported (exportKinds, in the order the target
// loads them) or derived (derivedNamespaces: the target rebuilds it from
// exported records). Check refuses a store holding any other namespace,
// so a record kind added without an exporter stops a migration instead of
// being left behind. Adding one is an entry of exportKinds (and an
// importer in pgstore/import.go: see internal/migrate/records.go).

// exportKind decodes one namespace's records. decode gets the key after
// its namespace byte and the value's verified body, and emits zero or more
// records.
type exportKind struct {
	ns     byte
	kind   migrate.Kind
	decode func(key, k, body []byte, emit func(any)) error
}

// exportKinds, in load order: users before their names, conversations'
// last seqs and messages before what refers to them.
var exportKinds = []exportKind{
	{nsUser, "users", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		id := r.lp()
		if !r.end() {
			return corruptf(key, "bad user key")
		}
		u, err := decodeUser(key, id, body)
		emit(u)
		return err
	}},
	{nsUserName, "usernames", func(key, k, body []byte, emit func(any)) error {
		if len(k) == 0 {
			return nil // the bare "index built" mark
		}
		r := keyReader{b: k}
		name := r.lp()
		if !r.end() || len(body) == 0 {
			return corruptf(key, "bad username record")
		}
		emit(migrate.UserName{NameKey: name, UserID: string(body)})
		return nil
	}},
	{nsToken, "revoked_tokens", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		id := r.lp()
		if !r.end() {
			return corruptf(key, "bad token key")
		}
		t, err := decodeToken(key, body)
		if err == nil && !t.After(time.Now()) {
			return nil // expired: refused anyway, and purged by the target
		}
		emit(migrate.RevokedToken{ID: id, Expires: t})
		return err
	}},
	{nsLastSeq, "last_seqs", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv := r.lp()
		if !r.end() {
			return corruptf(key, "bad last seq key")
		}
		seq, err := decodeUint64(key, body, "last seq")
		emit(migrate.LastSeq{Conv: conv, Seq: seq})
		return err
	}},
	{nsMessage, "messages", nil}, // decoded from the framed value: see readKind
	{nsDedup, "dedup", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		from, id := r.lp(), r.lp()
		if !r.end() {
			return corruptf(key, "bad de-dup key")
		}
		conv, seq, err := decodeDedup(key, body)
		emit(migrate.Dedup{From: from, ClientMsgID: id, Conv: conv, Seq: seq})
		return err
	}},
	{nsConv, "conversation_lists", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		user, conv := r.lp(), r.lp()
		if !r.end() {
			return corruptf(key, "bad conversation list key")
		}
		emit(migrate.ConvEntry{User: user, Conv: conv})
		return nil
	}},
	{nsCursor, "cursors", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv, user := r.lp(), r.lp()
		if !r.end() {
			return corruptf(key, "bad cursor key")
		}
		d, rd, err := decodeCursor(key, body)
		emit(store.Cursor{ConversationID: conv, UserID: user, Delivered: d, Read: rd})
		return err
	}},
	{nsGroup, "groups", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv := r.lp()
		if !r.end() {
			return corruptf(key, "bad group key")
		}
		g, err := decodeGroup(key, conv, body)
		emit(g)
		return err
	}},
	{nsMember, "members", decodeMemberRecord},
	{nsPastMember, "past_members", decodeMemberRecord},
	{nsSettings, "conversation_settings", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		user, conv := r.lp(), r.lp()
		if !r.end() {
			return corruptf(key, "bad settings key")
		}
		cs, err := decodeSettings(key, body)
		emit(migrate.ConvSettings{User: user, Conv: conv, ConversationSettings: cs})
		return err
	}},
	{nsHidden, "hidden_messages", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		user, conv, seq := r.lp(), r.lp(), r.u64()
		if !r.end() {
			return corruptf(key, "bad hidden message key")
		}
		emit(migrate.Hidden{User: user, Conv: conv, Seq: seq})
		return nil
	}},
	{nsContact, "contacts", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		owner, user := r.lp(), r.rest()
		if r.bad || user == "" {
			return corruptf(key, "bad contact key")
		}
		c, err := decodeContact(key, user, body)
		emit(migrate.Contact{Owner: owner, Contact: c})
		return err
	}},
	{nsBlock, "blocks", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		owner, user := r.lp(), r.rest()
		if r.bad || user == "" {
			return corruptf(key, "bad block key")
		}
		emit(migrate.Block{Owner: owner, User: user})
		return nil
	}},
	{nsLastSeen, "last_seen", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		user := r.lp()
		if !r.end() {
			return corruptf(key, "bad last seen key")
		}
		t, err := decodeLastSeen(key, body)
		emit(migrate.LastSeen{User: user, At: t})
		return err
	}},
	{nsUsage, "storage_usage", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		user := r.lp()
		if !r.end() {
			return corruptf(key, "bad storage usage key")
		}
		n, err := decodeUint64(key, body, "storage usage")
		emit(migrate.Usage{User: user, Bytes: n})
		return err
	}},
	{nsPush, "push_targets", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		user, device := r.lp(), r.rest()
		if r.bad || device == "" {
			return corruptf(key, "bad push target key")
		}
		t, err := decodePushTarget(key, user, device, body)
		emit(t)
		return err
	}},
	{nsFile, "files", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		id := r.lp()
		if !r.end() {
			return corruptf(key, "bad file key")
		}
		f, err := decodeFile(key, id, body)
		emit(f)
		return err
	}},
	{nsReport, "reports", func(key, k, body []byte, emit func(any)) error {
		rep, err := decodeReport(key, string(k), body)
		emit(rep)
		return err
	}},
	{nsAudit, "audit_log", func(key, k, body []byte, emit func(any)) error {
		e, err := decodeAudit(key, body)
		emit(e)
		return err
	}},
	{nsSetting, "settings", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		name := r.lp()
		if !r.end() {
			return corruptf(key, "bad setting key")
		}
		emit(migrate.Setting{Key: name, Value: bytes.Clone(body)})
		return nil
	}},
	{nsReaction, "reactions", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv, seq, user := r.lp(), r.u64(), r.lp()
		if !r.end() {
			return corruptf(key, "bad reaction key")
		}
		for len(body) > 0 {
			emoji, rest, err := readLP(body)
			if err != nil {
				return corruptf(key, "bad reaction record")
			}
			emit(migrate.Reaction{Conv: conv, Seq: seq, User: user, Emoji: emoji})
			body = rest
		}
		return nil
	}},
	{nsReactCount, "reaction_counts", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv, seq := r.lp(), r.u64()
		if r.end() {
			v, err := decodeUint64(key, body, "reaction version")
			emit(migrate.MessageReactionVersion{Conv: conv, Seq: seq, Version: v})
			return err
		}
		emoji := r.lp()
		if !r.end() {
			return corruptf(key, "bad reaction count key")
		}
		count, order, err := decodeReactCount(key, body)
		emit(migrate.ReactionCount{Conv: conv, Seq: seq, Emoji: emoji, Count: count, Order: order})
		return err
	}},
	{nsReactVer, "reaction_versions", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv := r.lp()
		if !r.end() {
			return corruptf(key, "bad reaction version key")
		}
		v, err := decodeUint64(key, body, "reaction version")
		emit(migrate.ReactionVersion{Conv: conv, Version: v})
		return err
	}},
	{nsPin, "pins", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv, seq := r.lp(), r.u64()
		if !r.end() {
			return corruptf(key, "bad pin key")
		}
		p, order, err := decodePin(key, seq, body)
		emit(migrate.Pin{Conv: conv, Pin: p, Order: order})
		return err
	}},
	{nsThread, "thread_replies", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv, root, seq := r.lp(), r.u64(), r.u64()
		if !r.end() {
			return corruptf(key, "bad thread key")
		}
		emit(migrate.ThreadReply{Conv: conv, Root: root, Seq: seq})
		return nil
	}},
	{nsThreadSum, "threads", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv, root := r.lp(), r.u64()
		if !r.end() {
			return corruptf(key, "bad thread summary key")
		}
		t, err := decodeThreadSummary(key, body)
		emit(migrate.Thread{Conv: conv, Root: root, ThreadSummary: t})
		return err
	}},
	{nsThreadUser, "thread_participants", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv, root, user := r.lp(), r.u64(), r.lp()
		if !r.end() {
			return corruptf(key, "bad thread participant key")
		}
		emit(migrate.ThreadUser{Conv: conv, Root: root, User: user})
		return nil
	}},
	{nsMention, "mentions", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		user, conv, seq := r.lp(), r.lp(), r.u64()
		if !r.end() {
			return corruptf(key, "bad mention key")
		}
		emit(migrate.Mention{User: user, Conv: conv, Seq: seq})
		return nil
	}},
	{nsFloor, "message_floors", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv := r.lp()
		if !r.end() {
			return corruptf(key, "bad floor key")
		}
		f, err := decodeFloor(key, body)
		emit(migrate.Floor{Conv: conv, Floor: f.floor})
		return err
	}},
	{nsMentionAll, "mentions_all", func(key, k, body []byte, emit func(any)) error {
		r := keyReader{b: k}
		conv, seq := r.lp(), r.u64()
		if !r.end() {
			return corruptf(key, "bad mention key")
		}
		sender, rest, err := readLP(body)
		if err != nil || len(rest) != 0 {
			return corruptf(key, "bad mention record")
		}
		emit(migrate.MentionAll{Conv: conv, Seq: seq, Sender: sender})
		return nil
	}},
}

// derivedNamespaces are not exported: the target keeps them as part of
// the exported records (indexes, counters, the message log).
var derivedNamespaces = map[byte]string{
	nsLog:        "the message log (PostgreSQL orders messages itself)",
	nsLogRef:     "each message's log position (the message log is the target's own)",
	nsExpiry:     "messages by expiry (the target indexes the messages' expires_at column)",
	nsUnattached: "files never attached (the target indexes files by their attached flag)",
	nsMediaUsage: "media usage (the target sums file records)",
	nsReportIdx:  "reports by status (an index of the report records)",
	nsReportDup:  "one report per reporter and message (a unique index of the report records)",
	nsReactIdx:   "reaction changes by version (an index of the messages' reaction versions)",
	nsFileRef:    "the messages carrying each file (the target rebuilds them from the messages' attachments)",
	nsFileOrphan: "files whose carrying messages were deleted, not checked yet (those pending at the copy are kept, as before)",
}

func decodeMemberRecord(key, k, body []byte, emit func(any)) error {
	r := keyReader{b: k}
	conv, user := r.lp(), r.rest()
	if r.bad || user == "" {
		return corruptf(key, "bad member key")
	}
	m, err := decodeMember(key, user, body)
	emit(migrate.Member{Conv: conv, Member: m})
	return err
}

// keyReader decodes a key's components; a malformed one sets bad.
type keyReader struct {
	b   []byte
	bad bool
}

func (r *keyReader) lp() string {
	s, rest, err := readLP(r.b)
	if err != nil {
		r.bad = true
		return ""
	}
	r.b = rest
	return s
}

func (r *keyReader) u64() uint64 {
	if len(r.b) < 8 {
		r.bad = true
		return 0
	}
	x := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return x
}

func (r *keyReader) rest() string {
	s := string(r.b)
	r.b = nil
	return s
}

func (r *keyReader) end() bool { return !r.bad && len(r.b) == 0 }

// Exporter returns the store as a migrate.Source. The store must not be
// written while it is used (parley migrate opens it with no server).
func (s *Store) Exporter() migrate.Source { return exporter{s} }

type exporter struct{ s *Store }

func (e exporter) Kinds() []migrate.Kind {
	out := make([]migrate.Kind, len(exportKinds))
	for i, k := range exportKinds {
		out[i] = k.kind
	}
	return out
}

func findKind(kind migrate.Kind) (exportKind, bool) {
	for _, k := range exportKinds {
		if k.kind == kind {
			return k, true
		}
	}
	return exportKind{}, false
}

// iter runs fn with an iterator over [lower, upper) of the open store.
func (e exporter) iter(ctx context.Context, lower, upper []byte, fn func(it *pebble.Iterator) error) error {
	if err := e.s.enter(ctx); err != nil {
		return err
	}
	defer e.s.closeMu.RUnlock()
	it, err := e.s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return mapErr(err)
	}
	err = fn(it)
	if cerr := it.Close(); err == nil {
		err = mapErr(cerr)
	}
	return err
}

// Check walks the namespaces present (one seek each) and refuses one
// neither exported nor derived.
func (e exporter) Check(ctx context.Context) error {
	known := make(map[byte]bool, len(exportKinds))
	for _, k := range exportKinds {
		known[k.ns] = true
	}
	return e.iter(ctx, nil, nil, func(it *pebble.Iterator) error {
		for ok := it.First(); ok; {
			ns := it.Key()[0]
			if _, derived := derivedNamespaces[ns]; !known[ns] && !derived {
				return fmt.Errorf("%w: namespace %q (key %q); add its exporter in internal/store/pebblestore/export.go",
					migrate.ErrUnknownNamespace, ns, it.Key())
			}
			if ns == 0xff {
				break
			}
			ok = it.SeekGE([]byte{ns + 1})
		}
		return mapErr(it.Error())
	})
}

// Fingerprint hashes the first and last record of every namespace: a
// rerun against another store (or this one written since) is told apart
// without reading everything.
func (e exporter) Fingerprint(ctx context.Context) (string, error) {
	h := sha256.New()
	err := e.iter(ctx, nil, nil, func(it *pebble.Iterator) error {
		for ok := it.First(); ok; {
			ns := it.Key()[0]
			h.Write(it.Key())
			h.Write(it.Value())
			if ns == 0xff {
				it.Last()
			} else {
				it.SeekLT([]byte{ns + 1}) // the namespace's last key
			}
			h.Write(it.Key())
			h.Write(it.Value())
			if ns == 0xff {
				break
			}
			ok = it.SeekGE([]byte{ns + 1})
		}
		return mapErr(it.Error())
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// Read implements migrate.Source.
func (e exporter) Read(ctx context.Context, kind migrate.Kind, after []byte, maxBytes int) ([]any, []byte, error) {
	k, ok := findKind(kind)
	if !ok {
		return nil, nil, fmt.Errorf("pebblestore: export: unknown kind %q", kind)
	}
	lower := []byte{k.ns}
	if after != nil {
		if len(after) == 0 || after[0] != k.ns {
			return nil, nil, fmt.Errorf("pebblestore: export: position %q is not of %s", after, kind)
		}
		lower = append(bytes.Clone(after), 0) // the smallest key after it
	}
	var recs []any
	var next []byte
	emit := func(r any) { recs = append(recs, r) }
	err := e.iter(ctx, lower, []byte{k.ns + 1}, func(it *pebble.Iterator) error {
		size := 0
		for ok := it.First(); ok; ok = it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			key, v := it.Key(), it.Value()
			if k.ns == nsMessage {
				r := keyReader{b: key[1:]}
				conv, seq := r.lp(), r.u64()
				if !r.end() {
					return corruptf(key, "bad message key")
				}
				m, err := decodeMessage(key, v, conv, seq)
				if err != nil {
					return err
				}
				emit(migrate.Message{Msg: m})
			} else {
				body, err := unframe(key, v)
				if err != nil {
					return err
				}
				if err := k.decode(key, key[1:], body, emit); err != nil {
					return err
				}
			}
			size += len(key) + len(v)
			if size >= maxBytes {
				next = bytes.Clone(key)
				break
			}
		}
		return mapErr(it.Error())
	})
	if err != nil {
		return nil, nil, err
	}
	return recs, next, nil
}

// Conversations implements migrate.Source: each conversation with a last
// seq, and its number of messages.
func (e exporter) Conversations(ctx context.Context, after []byte, limit int) ([]migrate.ConvStats, []byte, error) {
	lower := []byte{nsLastSeq}
	if after != nil {
		lower = append(bytes.Clone(after), 0)
	}
	var out []migrate.ConvStats
	var next []byte
	err := e.iter(ctx, lower, []byte{nsLastSeq + 1}, func(it *pebble.Iterator) error {
		for ok := it.First(); ok; ok = it.Next() {
			key := it.Key()
			r := keyReader{b: key[1:]}
			conv := r.lp()
			if !r.end() {
				return corruptf(key, "bad last seq key")
			}
			body, err := unframe(key, it.Value())
			if err != nil {
				return err
			}
			last, err := decodeUint64(key, body, "last seq")
			if err != nil {
				return err
			}
			n, err := e.countPrefix(messagePrefix(nil, conv))
			if err != nil {
				return err
			}
			out = append(out, migrate.ConvStats{Conv: conv, LastSeq: last, Messages: n})
			if len(out) >= limit {
				next = bytes.Clone(key)
				break
			}
		}
		return mapErr(it.Error())
	})
	if err != nil {
		return nil, nil, err
	}
	return out, next, nil
}

// countPrefix counts the keys with prefix. Called within iter (the store
// held open).
func (e exporter) countPrefix(prefix []byte) (int64, error) {
	it, err := e.s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, mapErr(err)
	}
	var n int64
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		return 0, mapErr(err)
	}
	return n, nil
}
