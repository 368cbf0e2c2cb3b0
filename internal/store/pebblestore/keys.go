package pebblestore

import (
	"encoding/binary"
	"errors"
)

// Key layout. Every key starts with a one-byte namespace. String components
// are length-prefixed (uvarint length, then the bytes), so a key decodes in
// exactly one way whatever bytes an id holds, and the keys of one id never
// share a prefix with the keys of another ("a" vs "a\x00b").
//
//	'm' lp(conversation) seq(8, big-endian)   -> message         (range scans by seq)
//	'l' lp(conversation)                      -> newest seq      (one point lookup on a cold start)
//	'd' lp(from) lp(client_msg_id)            -> conversation+seq (de-dup index)
//	'c' lp(user) lp(conversation)             -> empty            (conversation list)
//	'k' lp(conversation) lp(user)             -> delivered, read  (cursors)
//	'u' lp(user)                              -> user record
//	't' lp(token id)                          -> expiry           (revoked tokens)
//	'g' lp(conversation)                      -> group record
//	'n' lp(conversation) user                 -> member record    (current members)
//	'o' lp(conversation) user                 -> member record    (past members: Left)
//	's' lp(user) lp(conversation)             -> conversation settings
//	'h' lp(user) lp(conversation) seq(8, BE)  -> empty            (messages hidden for the user)
//	'f' lp(owner) user                        -> contact record
//	'b' lp(owner) user                        -> empty            (block list)
//	'a' lp(user)                              -> last seen
//	'U' lp(normalized username)               -> user id          (unique names; bare 'U': index built)
//	'q' lp(user)                              -> payload bytes stored (storage quota)
//	'p' lp(user) device                       -> push target
//	'F' lp(file id)                           -> file record
//	'N' time(8, BE unix ns) file id           -> empty            (files never attached, oldest first)
//	'Q' lp(owner)                             -> files, bytes     (media usage)
//	'R' report id                             -> report record
//	'r' status(1) report id                   -> empty            (reports by status)
//	'D' lp(reporter) lp(conversation) seq(8)  -> report id        (one report per reporter and message)
//	'A' id(8, BE)                             -> audit entry
//	'V' lp(key)                               -> setting value    (server-wide settings)
//	'e' lp(conversation) seq(8) lp(user)      -> lp(emoji)...     (one user's reactions to a message)
//	'E' lp(conversation) seq(8)               -> message's reaction version
//	'E' lp(conversation) seq(8) lp(emoji)     -> count, order     (an emoji's count on a message)
//	'v' lp(conversation)                      -> reaction version (the conversation's newest)
//	'w' lp(conversation) version(8, BE)       -> seq              (reaction changes, by version)
//	'P' lp(conversation) seq(8)               -> pin              (pinned messages)
//	'T' lp(conversation) root(8) seq(8)       -> empty            (thread replies)
//	'S' lp(conversation) root(8)              -> thread summary
//	'I' lp(conversation) root(8) lp(user)     -> empty            (thread participants)
//	'M' lp(user) lp(conversation) seq(8)      -> empty            (mentions by name)
//	'X' lp(conversation) seq(8)               -> lp(sender)       (mentions of everyone)
//	'L' pos(8, BE)                            -> lp(conversation) seq(8) (the message log, log.go)
//
// The last component of 'n', 'o', 'f', 'b' and 'p' keys is the raw user id, not
// length-prefixed: those lists are returned ordered by user id, and a length
// prefix would order them by length first ("b" before "aa"). It is still
// unambiguous: it is the rest of the key after a length-prefixed prefix.
// Report ids in 'R' and 'r' keys are raw for the same reason (reports are
// listed in id order), after a fixed-size prefix.
//
// A user's reactions to a message are one 'e' row: the emojis the user has
// on it, each once, in the order the user added them. What the user has on
// a message (Reaction.Me for every emoji) is one point lookup, and React
// changes a user's reactions with one lookup and one Set of that row. A
// lookup that finds a value as the key's newest version stops there, so
// its cost does not grow with the dead versions that adding and taking
// back reactions leave behind (a seek over one row per emoji walked them
// all). That is why a user who takes back every reaction keeps an empty
// row rather than a deleted one: a lookup that finds a tombstone goes on
// through every older version of the key. A user who never reacted to the
// message has no row.
//
// The 'e' layout changed to this one during development, before any
// release, and is not migrated: a store written with the earlier layout
// (one row per user and emoji, 'e' lp(conversation) seq(8) lp(user)
// lp(emoji) -> empty) keeps its old rows, which are never read (no key of
// theirs equals a key of this layout), so its users' own reactions read as
// none while its counts still include them. Start such a store afresh.
//
// A message's reaction version and its emoji counts share the 'E' prefix
// (the version's key is the bare prefix, so it sorts first): reading a
// message's reactions is one short scan, never a scan of every reaction. A
// count row's order is the reaction version at which the emoji appeared on
// the message (versions are unique per conversation), so emojis list in the
// order they were first added. A message's 'w' entry moves (the old one is
// deleted) whenever its version changes, so the 'w' range lists each changed
// message once, at its newest version.
//
// A member record sits under exactly one of 'n' and 'o': Apply moves it
// between them in the same batch. Members pages through 'n' only, so the
// past members of a large group are never read when listing current ones.
const (
	nsMessage    byte = 'm'
	nsLastSeq    byte = 'l'
	nsDedup      byte = 'd'
	nsConv       byte = 'c'
	nsCursor     byte = 'k'
	nsUser       byte = 'u'
	nsToken      byte = 't'
	nsGroup      byte = 'g'
	nsMember     byte = 'n'
	nsPastMember byte = 'o'
	nsSettings   byte = 's'
	nsHidden     byte = 'h'
	nsContact    byte = 'f'
	nsBlock      byte = 'b'
	nsLastSeen   byte = 'a'
	nsUsage      byte = 'q'
	nsPush       byte = 'p'
	nsFile       byte = 'F'
	nsUnattached byte = 'N'
	nsMediaUsage byte = 'Q'
	nsReport     byte = 'R'
	nsReportIdx  byte = 'r'
	nsReportDup  byte = 'D'
	nsAudit      byte = 'A'
	nsSetting    byte = 'V'
	nsReaction   byte = 'e'
	nsReactCount byte = 'E'
	nsReactVer   byte = 'v'
	nsReactIdx   byte = 'w'
	nsPin        byte = 'P'
	nsThread     byte = 'T'
	nsThreadSum  byte = 'S'
	nsThreadUser byte = 'I'
	nsMention    byte = 'M'
	nsMentionAll byte = 'X'
	nsLog        byte = 'L'
	// End-to-end encryption (e2ee.go)
	nsKeyPackage byte = 'K' // lp(user) lp(device) id(8, BE) -> one-time MLS KeyPackage
	nsLastResort byte = 'O' // lp(user) lp(device)           -> last-resort MLS KeyPackage
	nsMLSEpoch   byte = 'H' // lp(conversation)              -> epoch(8, BE) of an encrypted group
)

var errBadKey = errors.New("malformed key")

// appendLP appends a length-prefixed string.
func appendLP(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// lpLen is the encoded size of appendLP(nil, s).
func lpLen(s string) int {
	return uvarintLen(uint64(len(s))) + len(s)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// readLP decodes one length-prefixed string from b and returns the rest.
func readLP(b []byte) (string, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return "", nil, errBadKey
	}
	end := w + int(n)
	return string(b[w:end]), b[end:], nil
}

// messagePrefix is 'm' lp(conv): the common prefix of a conversation's messages.
func messagePrefix(b []byte, conv string) []byte {
	return appendLP(append(b, nsMessage), conv)
}

func messageKey(b []byte, conv string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(messagePrefix(b, conv), seq)
}

func messageKeyLen(conv string) int { return 1 + lpLen(conv) + 8 }

// seqFromMessageKey returns the seq of a key that starts with prefix.
func seqFromMessageKey(key, prefix []byte) (uint64, bool) {
	if len(key) != len(prefix)+8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[len(prefix):]), true
}

func lastSeqKey(b []byte, conv string) []byte {
	return appendLP(append(b, nsLastSeq), conv)
}

func dedupKey(b []byte, from, clientMsgID string) []byte {
	return appendLP(appendLP(append(b, nsDedup), from), clientMsgID)
}

func convPrefix(b []byte, user string) []byte {
	return appendLP(append(b, nsConv), user)
}

func convKey(b []byte, user, conv string) []byte {
	return appendLP(convPrefix(b, user), conv)
}

func cursorKey(b []byte, conv, user string) []byte {
	return appendLP(cursorPrefix(b, conv), user)
}

func userKey(b []byte, id string) []byte {
	return appendLP(append(b, nsUser), id)
}

func tokenKey(b []byte, id string) []byte {
	return appendLP(append(b, nsToken), id)
}

func cursorPrefix(b []byte, conv string) []byte {
	return appendLP(append(b, nsCursor), conv)
}

func groupKey(b []byte, conv string) []byte {
	return appendLP(append(b, nsGroup), conv)
}

// memberPrefix is ns lp(conv), ns being nsMember or nsPastMember.
func memberPrefix(b []byte, ns byte, conv string) []byte {
	return appendLP(append(b, ns), conv)
}

func memberKey(b []byte, ns byte, conv, user string) []byte {
	return append(memberPrefix(b, ns, conv), user...)
}

func settingsKey(b []byte, user, conv string) []byte {
	return appendLP(appendLP(append(b, nsSettings), user), conv)
}

func hiddenPrefix(b []byte, user, conv string) []byte {
	return appendLP(appendLP(append(b, nsHidden), user), conv)
}

func hiddenKey(b []byte, user, conv string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(hiddenPrefix(b, user, conv), seq)
}

// ownedPrefix is ns lp(owner), ns being nsContact or nsBlock.
func ownedPrefix(b []byte, ns byte, owner string) []byte {
	return appendLP(append(b, ns), owner)
}

func ownedKey(b []byte, ns byte, owner, user string) []byte {
	return append(ownedPrefix(b, ns, owner), user...)
}

func usageKey(b []byte, user string) []byte {
	return appendLP(append(b, nsUsage), user)
}

func lastSeenKey(b []byte, user string) []byte {
	return appendLP(append(b, nsLastSeen), user)
}

// afterKey is the smallest key of prefix+id with id > after: prefix after 0x00.
func afterKey(prefix []byte, after string) []byte {
	k := append(append([]byte(nil), prefix...), after...)
	return append(k, 0)
}

// prefixEnd returns the smallest key greater than every key with the prefix
// (the exclusive upper bound of a prefix scan). Prefixes here always start
// with a namespace byte below 0xff, so the result is never empty.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// convSeqKey is ns lp(conv) seq(8): the shape of several per-message keys.
func convSeqKey(b []byte, ns byte, conv string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(appendLP(append(b, ns), conv), seq)
}

// reactionKey is the key of one user's reactions to a message.
func reactionKey(b []byte, conv string, seq uint64, user string) []byte {
	return appendLP(convSeqKey(b, nsReaction, conv, seq), user)
}

// reactCountPrefix is a message's reaction prefix; the bare prefix is also
// the key of the message's reaction version.
func reactCountPrefix(b []byte, conv string, seq uint64) []byte {
	return convSeqKey(b, nsReactCount, conv, seq)
}

func reactCountKey(b []byte, conv string, seq uint64, emoji string) []byte {
	return appendLP(reactCountPrefix(b, conv, seq), emoji)
}

func reactVerKey(b []byte, conv string) []byte {
	return appendLP(append(b, nsReactVer), conv)
}

func reactIdxPrefix(b []byte, conv string) []byte {
	return appendLP(append(b, nsReactIdx), conv)
}

func reactIdxKey(b []byte, conv string, version uint64) []byte {
	return binary.BigEndian.AppendUint64(reactIdxPrefix(b, conv), version)
}

func pinPrefix(b []byte, conv string) []byte {
	return appendLP(append(b, nsPin), conv)
}

func pinKey(b []byte, conv string, seq uint64) []byte {
	return convSeqKey(b, nsPin, conv, seq)
}

// threadPrefix is 'T' lp(conv) root(8): the replies of one thread.
func threadPrefix(b []byte, conv string, root uint64) []byte {
	return convSeqKey(b, nsThread, conv, root)
}

func threadKey(b []byte, conv string, root, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(threadPrefix(b, conv, root), seq)
}

func threadSumKey(b []byte, conv string, root uint64) []byte {
	return convSeqKey(b, nsThreadSum, conv, root)
}

func threadUserKey(b []byte, conv string, root uint64, user string) []byte {
	return appendLP(convSeqKey(b, nsThreadUser, conv, root), user)
}

// mentionPrefix is 'M' lp(user) lp(conv): the user's mentions in one
// conversation.
func mentionPrefix(b []byte, user, conv string) []byte {
	return appendLP(appendLP(append(b, nsMention), user), conv)
}

func mentionKey(b []byte, user, conv string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(mentionPrefix(b, user, conv), seq)
}

func mentionAllPrefix(b []byte, conv string) []byte {
	return appendLP(append(b, nsMentionAll), conv)
}

func mentionAllKey(b []byte, conv string, seq uint64) []byte {
	return convSeqKey(b, nsMentionAll, conv, seq)
}
