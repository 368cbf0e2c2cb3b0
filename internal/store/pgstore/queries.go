package pgstore

import "strings"

// queries holds every statement with the schema filled in. Names are
// qualified rather than left to search_path, so a pooler or a role's
// default search_path cannot point them at other tables.
type queries struct {
	// Append and Apply.
	lookupDups, bumpSeqs, insertMessages, insertLists string
	updateMessage, upsertGroup, upsertMembers         string
	addUsage, userStorage                             string
	// Reads of messages.
	messagesAfter, messagesBefore, getMessage, lastSeq, conversations string
	raiseSeq                                                          string
	// Cursors, users, tokens.
	setCursors, getCursor, cursorsOf                           string
	createUser, updateUser, getUser, userByName                string
	revokeToken, tokenRevoked, purgeTokens                     string
	getGroup, getMember, membersAfter                          string
	listUsers, listUsersTo, listGroups, listGroupsTo, diskSize string
	// schema is the quoted schema name, a parameter of diskSize.
	schema                                                    string
	setSettings, getSettings, hideMessages, hiddenMessages    string
	putContact, deleteContact, getContact, contacts           string
	block, unblock, blocked, isBlocked, setLastSeen, lastSeen string
	putPush, pushTargets, deletePush, deletePushToken         string
	putFile, updateFile, getFile, deleteFile, attachFiles     string
	unattachedFiles, mediaUsage                               string
	putReport, reportOf, getReport, reportsAfter              string
	reportsByStatus, closeReport, appendAudit, auditLog       string
	getSetting, putSetting, addSetting, swapSetting           string
	// Rich messages: indexes written by Append and Apply.
	insertThreadReplies, upsertThreads, insertParticipants  string
	insertMentions, insertMentionsAll                       string
	deleteMentions, deleteMentionsAll, upsertPin, deletePin string
	// React.
	probeJoins, lockReactionVersions, messagesExist, readReactionCounts, readReactionMessages string
	readUserReactions, insertReactions, deleteReactions                                       string
	upsertReactionCounts, deleteReactionCounts, upsertReactionMessages                        string
	setReactionVersions                                                                       string
	// Reads of rich messages.
	reactions, reactionChanges, reactionVersion, pins           string
	threads, threadAfter, threadBefore, inThread, mentionsAfter string
	// Search backfill (backfill.go).
	backfillLock, backfillExists, backfillRows, backfillUpdate, backfillDelete, backfillMove string
}

func newQueries(schema string) queries {
	r := strings.NewReplacer("{s}", schema)
	q := func(sql string) string { return r.Replace(sql) }
	const userCols = `id, password_hash, token_epoch, disabled, shadow_muted, created_at, bot`
	const groupCols = `conversation_id, name, avatar_url, announcement, owner_id, open_join, mute_all, dissolved, created_at,
			add_policy, history_visibility, members_mention_all`
	return queries{
		schema: schema,
		// The "To" forms bound the index scan by the end of the prefix's
		// range ($3), so a prefix matching few ids reads few rows.
		listUsers:    q(`SELECT ` + userCols + ` FROM {s}.users WHERE id > $1 AND id >= $2 ORDER BY id LIMIT $3`),
		listUsersTo:  q(`SELECT ` + userCols + ` FROM {s}.users WHERE id > $1 AND id >= $2 AND id < $4 ORDER BY id LIMIT $3`),
		listGroups:   q(`SELECT ` + groupCols + ` FROM {s}.groups WHERE conversation_id > $1 AND conversation_id >= $2 ORDER BY conversation_id LIMIT $3`),
		listGroupsTo: q(`SELECT ` + groupCols + ` FROM {s}.groups WHERE conversation_id > $1 AND conversation_id >= $2 AND conversation_id < $4 ORDER BY conversation_id LIMIT $3`),
		// Tables with their indexes and TOAST; to_regnamespace takes the
		// quoted name, so any schema name works.
		diskSize: `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::int8 FROM pg_class c
			WHERE c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'm')`,
		lookupDups: q(`SELECT m.sender, m.client_msg_id, m.conversation_id, m.seq, m.body, m.crc
			FROM unnest($1::text[], $2::text[]) AS k(sender, client_msg_id)
			JOIN {s}.messages m ON m.sender = k.sender AND m.client_msg_id = k.client_msg_id`),
		// Raises each conversation's counter by its number of new messages,
		// locking the rows in one order (bytewise by id) in every
		// transaction, so concurrent batches over the same conversations
		// queue rather than deadlock.
		bumpSeqs: q(`INSERT INTO {s}.conversations AS c (id, last_seq)
			SELECT id, n FROM unnest($1::text[], $2::int8[]) AS t(id, n) ORDER BY id COLLATE "C"
			ON CONFLICT (id) DO UPDATE SET last_seq = c.last_seq + excluded.last_seq
			RETURNING id, last_seq`),
		// back is how many new messages of the same conversation follow in
		// the batch, so seq = the raised counter - back: the counter row is
		// this transaction's own write, and locked, when this runs.
		insertMessages: q(`INSERT INTO {s}.messages (conversation_id, seq, sender, client_msg_id, body, crc,
				search_norm, server_time, content_type, has_attachment, sender_only, expires_at)
			SELECT i.conv, c.last_seq - i.back, i.sender, NULLIF(i.cmid, ''), i.body, i.crc, i.norm, i.t, i.ct, i.att, i.so, NULLIF(i.exp, 0)
			FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::bytea[], $6::int4[],
				$7::text[], $8::int8[], $9::text[], $10::bool[], $11::bool[], $12::int8[])
				AS i(conv, back, sender, cmid, body, crc, norm, t, ct, att, so, exp)
			JOIN {s}.conversations c ON c.id = i.conv`),
		insertLists: q(`INSERT INTO {s}.user_conversations (user_id, conversation_id)
			SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING`),
		// Returns the row as it was before (locked, latest committed), so
		// Apply can refuse an update of a recalled message in the same
		// round trip (the transaction is then rolled back). No row: no
		// such message, or one below its floor (gone, see getMessage).
		updateMessage: q(`UPDATE {s}.messages m SET body = $3, crc = $4,
				search_norm = $5, server_time = $6, content_type = $7, has_attachment = $8, sender_only = $9
			FROM (SELECT body, crc FROM {s}.messages WHERE conversation_id = $1 AND seq = $2 FOR UPDATE) old
			WHERE m.conversation_id = $1 AND m.seq = $2
				AND NOT EXISTS (SELECT 1 FROM {s}.message_floors f WHERE f.conversation_id = $1 AND f.floor > $2)
			RETURNING old.body, old.crc`),
		upsertGroup: q(`INSERT INTO {s}.groups (conversation_id, name, avatar_url, announcement, owner_id, open_join, mute_all, dissolved, created_at,
				add_policy, history_visibility, members_mention_all)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			ON CONFLICT (conversation_id) DO UPDATE SET name = excluded.name, avatar_url = excluded.avatar_url,
				announcement = excluded.announcement, owner_id = excluded.owner_id, open_join = excluded.open_join,
				mute_all = excluded.mute_all, dissolved = excluded.dissolved, created_at = excluded.created_at,
				add_policy = excluded.add_policy, history_visibility = excluded.history_visibility,
				members_mention_all = excluded.members_mention_all`),
		upsertMembers: q(`INSERT INTO {s}.members (conversation_id, user_id, role, muted_until, joined_at, has_left, left_seq, join_seq)
			SELECT $1, * FROM unnest($2::text[], $3::int4[], $4::timestamptz[], $5::timestamptz[], $6::bool[], $7::int8[], $8::int8[])
			ON CONFLICT (conversation_id, user_id) DO UPDATE SET role = excluded.role, muted_until = excluded.muted_until,
				joined_at = excluded.joined_at, has_left = excluded.has_left, left_seq = excluded.left_seq, join_seq = excluded.join_seq`),

		messagesAfter: q(`SELECT seq, body, crc FROM {s}.messages
			WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`),
		messagesBefore: q(`SELECT seq, body, crc FROM {s}.messages
			WHERE conversation_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`),
		// A message below its conversation's floor is gone, though a sweep
		// deleting in batches may not have deleted its row yet.
		getMessage: q(`SELECT seq, body, crc FROM {s}.messages WHERE conversation_id = $1 AND seq = $2
			AND NOT EXISTS (SELECT 1 FROM {s}.message_floors f WHERE f.conversation_id = $1 AND f.floor > $2)`),
		lastSeq: q(`SELECT last_seq FROM {s}.conversations WHERE id = $1`),
		raiseSeq: q(`INSERT INTO {s}.conversations AS c (id, last_seq) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET last_seq = GREATEST(c.last_seq, excluded.last_seq)`),
		conversations: q(`SELECT conversation_id FROM {s}.user_conversations WHERE user_id = $1`),

		// One statement per call; repeats of a cursor are folded first,
		// since ON CONFLICT cannot touch one row twice. Each value is
		// clamped to its conversation's last seq (a conversation without
		// a row has none, so its cursors are not written).
		setCursors: q(`INSERT INTO {s}.cursors AS c (conversation_id, user_id, delivered_seq, read_seq)
			SELECT t.conv, t.usr, least(max(t.d), cv.last_seq), least(max(t.r), cv.last_seq)
			FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[]) AS t(conv, usr, d, r)
			JOIN {s}.conversations cv ON cv.id = t.conv
			GROUP BY t.conv, t.usr, cv.last_seq ORDER BY t.conv COLLATE "C", t.usr COLLATE "C"
			ON CONFLICT (conversation_id, user_id) DO UPDATE
				SET delivered_seq = greatest(c.delivered_seq, excluded.delivered_seq), read_seq = greatest(c.read_seq, excluded.read_seq)
				WHERE c.delivered_seq < excluded.delivered_seq OR c.read_seq < excluded.read_seq`),
		getCursor: q(`SELECT delivered_seq, read_seq FROM {s}.cursors WHERE conversation_id = $1 AND user_id = $2`),
		cursorsOf: q(`SELECT user_id, delivered_seq, read_seq FROM {s}.cursors WHERE conversation_id = $1`),

		// No conflict target: a taken id and a taken name_key both insert
		// nothing (the unique index decides between concurrent creates).
		createUser: q(`INSERT INTO {s}.users (id, password_hash, token_epoch, disabled, shadow_muted, created_at, bot, name_key)
			VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, '')) ON CONFLICT DO NOTHING`),
		userByName: q(`SELECT id, password_hash, token_epoch, disabled, shadow_muted, created_at, bot FROM {s}.users WHERE name_key = $1`),
		updateUser: q(`UPDATE {s}.users SET password_hash = $2, token_epoch = $3, disabled = $4, shadow_muted = $5, created_at = $6,
			bot = $7 WHERE id = $1`),
		getUser: q(`SELECT password_hash, token_epoch, disabled, shadow_muted, created_at, bot FROM {s}.users WHERE id = $1`),

		revokeToken: q(`INSERT INTO {s}.revoked_tokens AS t (id, expires_at) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET expires_at = greatest(t.expires_at, excluded.expires_at)`),
		tokenRevoked: q(`SELECT EXISTS (SELECT 1 FROM {s}.revoked_tokens WHERE id = $1)`),
		purgeTokens:  q(`DELETE FROM {s}.revoked_tokens WHERE expires_at < $1`),

		getGroup: q(`SELECT name, avatar_url, announcement, owner_id, open_join, mute_all, dissolved, created_at, add_policy, history_visibility,
			members_mention_all FROM {s}.groups WHERE conversation_id = $1`),
		getMember: q(`SELECT user_id, role, muted_until, joined_at, has_left, left_seq, join_seq
			FROM {s}.members WHERE conversation_id = $1 AND user_id = $2`),
		membersAfter: q(`SELECT user_id, role, muted_until, joined_at, has_left, left_seq, join_seq
			FROM {s}.members WHERE conversation_id = $1 AND user_id > $2 AND NOT has_left ORDER BY user_id LIMIT $3`),

		setSettings: q(`INSERT INTO {s}.conversation_settings (user_id, conversation_id, pinned, muted, cleared_seq)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (user_id, conversation_id) DO UPDATE
			SET pinned = excluded.pinned, muted = excluded.muted, cleared_seq = excluded.cleared_seq`),
		getSettings: q(`SELECT pinned, muted, cleared_seq FROM {s}.conversation_settings WHERE user_id = $1 AND conversation_id = $2`),
		hideMessages: q(`INSERT INTO {s}.hidden_messages (user_id, conversation_id, seq)
			SELECT $1, $2, * FROM unnest($3::int8[]) ON CONFLICT DO NOTHING`),
		hiddenMessages: q(`SELECT seq FROM {s}.hidden_messages
			WHERE user_id = $1 AND conversation_id = $2 AND seq BETWEEN $3 AND $4 ORDER BY seq`),

		putContact: q(`INSERT INTO {s}.contacts (owner_id, user_id, state, note, updated_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (owner_id, user_id) DO UPDATE SET state = excluded.state, note = excluded.note, updated_at = excluded.updated_at`),
		deleteContact: q(`DELETE FROM {s}.contacts WHERE owner_id = $1 AND user_id = $2`),
		getContact:    q(`SELECT user_id, state, note, updated_at FROM {s}.contacts WHERE owner_id = $1 AND user_id = $2`),
		contacts:      q(`SELECT user_id, state, note, updated_at FROM {s}.contacts WHERE owner_id = $1 ORDER BY user_id`),

		putPush: q(`INSERT INTO {s}.push_targets (user_id, device_id, kind, token, topic, sandbox, p256dh, auth, token_id, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT (user_id, device_id) DO UPDATE SET kind = excluded.kind, token = excluded.token, topic = excluded.topic,
			sandbox = excluded.sandbox, p256dh = excluded.p256dh, auth = excluded.auth, token_id = excluded.token_id, updated_at = excluded.updated_at`),
		pushTargets: q(`SELECT device_id, kind, token, topic, sandbox, p256dh, auth, token_id, updated_at
			FROM {s}.push_targets WHERE user_id = $1 ORDER BY device_id`),
		deletePush:      q(`DELETE FROM {s}.push_targets WHERE user_id = $1 AND device_id = $2`),
		deletePushToken: q(`DELETE FROM {s}.push_targets WHERE user_id = $1 AND device_id = $2 AND token = $3`),

		putFile: q(`INSERT INTO {s}.files (id, owner_id, name, size, content_type, width, height, duration_ms, blurhash,
			blob_key, thumb_key, created_at, attached) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (id) DO NOTHING`),
		updateFile: q(`UPDATE {s}.files SET name = $2, content_type = $3, width = $4, height = $5, duration_ms = $6,
			blurhash = $7, blob_key = $8, thumb_key = $9, attached = $10 WHERE id = $1`),
		getFile:     q(`SELECT ` + fileColumns + ` FROM {s}.files WHERE id = $1`),
		deleteFile:  q(`DELETE FROM {s}.files WHERE id = $1`),
		attachFiles: q(`UPDATE {s}.files SET attached = true WHERE id = ANY($1::text[]) AND NOT attached`),
		unattachedFiles: q(`SELECT ` + fileColumns + ` FROM {s}.files WHERE NOT attached AND created_at < $1
			ORDER BY created_at, id LIMIT $2`),
		mediaUsage: q(`SELECT count(*), coalesce(sum(size), 0)::int8 FROM {s}.files WHERE owner_id = $1`),

		// No conflict target: a report of a message already reported by
		// the reporter (reports_once) and a taken id both insert nothing;
		// reportOf then tells them apart.
		putReport: q(`INSERT INTO {s}.reports (id, reporter, conversation_id, seq, reason, note, message, created_at, status,
			closed_by, closed_at, resolution) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '', NULL, '') ON CONFLICT DO NOTHING`),
		reportOf:     q(`SELECT id FROM {s}.reports WHERE reporter = $1 AND conversation_id = $2 AND seq = $3`),
		getReport:    q(`SELECT ` + reportColumns + ` FROM {s}.reports WHERE id = $1`),
		reportsAfter: q(`SELECT ` + reportColumns + ` FROM {s}.reports WHERE id > $1 ORDER BY id LIMIT $2`),
		reportsByStatus: q(`SELECT ` + reportColumns + ` FROM {s}.reports WHERE status = $1 AND id > $2
			ORDER BY id LIMIT $3`),
		// Whether it was closed and whether it exists, in one statement; a
		// concurrent close of the same report waits for the row and then
		// finds it no longer open.
		closeReport: q(`WITH closed AS (UPDATE {s}.reports SET status = $2, closed_by = $3, resolution = $4, closed_at = $5
				WHERE id = $1 AND status = 1 RETURNING 1)
			SELECT EXISTS (SELECT 1 FROM closed), EXISTS (SELECT 1 FROM {s}.reports WHERE id = $1)`),
		appendAudit: q(`INSERT INTO {s}.audit_log (at, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5) RETURNING id`),
		auditLog: q(`SELECT id, at, actor, action, target, detail FROM {s}.audit_log WHERE id < $1
			ORDER BY id DESC LIMIT $2`),
		getSetting: q(`SELECT value FROM {s}.settings WHERE key = $1`),
		putSetting: q(`INSERT INTO {s}.settings (key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`),
		// SwapSetting's two forms. Under READ COMMITTED a concurrent
		// insert of the key waits for the first and then does nothing, and
		// a concurrent update waits for the row and re-checks its value: of
		// swaps from one old value exactly one affects a row.
		addSetting:  q(`INSERT INTO {s}.settings (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING`),
		swapSetting: q(`UPDATE {s}.settings SET value = $2 WHERE key = $1 AND value = $3`),

		block:     q(`INSERT INTO {s}.blocks (owner_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`),
		unblock:   q(`DELETE FROM {s}.blocks WHERE owner_id = $1 AND user_id = $2`),
		blocked:   q(`SELECT user_id FROM {s}.blocks WHERE owner_id = $1 ORDER BY user_id`),
		isBlocked: q(`SELECT EXISTS (SELECT 1 FROM {s}.blocks WHERE owner_id = $1 AND user_id = $2)`),
		setLastSeen: q(`INSERT INTO {s}.last_seen (user_id, seen_at) VALUES ($1, $2)
			ON CONFLICT (user_id) DO UPDATE SET seen_at = excluded.seen_at`),
		lastSeen: q(`SELECT seen_at FROM {s}.last_seen WHERE user_id = $1`),
		// Rows locked in one order, like bumpSeqs, and always after the
		// conversation rows, so concurrent batches queue rather than deadlock.
		addUsage: q(`INSERT INTO {s}.user_storage AS u (user_id, bytes)
			SELECT id, n FROM unnest($1::text[], $2::int8[]) AS t(id, n) ORDER BY id COLLATE "C"
			ON CONFLICT (user_id) DO UPDATE SET bytes = u.bytes + excluded.bytes`),
		userStorage: q(`SELECT bytes FROM {s}.user_storage WHERE user_id = $1`),

		// The index rows of new messages, seqs derived like insertMessages'
		// (back: how many new messages of the conversation follow).
		insertThreadReplies: q(`INSERT INTO {s}.thread_replies (conversation_id, root, seq)
			SELECT i.conv, i.root, c.last_seq - i.back FROM unnest($1::text[], $2::int8[], $3::int8[]) AS i(conv, back, root)
			JOIN {s}.conversations c ON c.id = i.conv`),
		// One row per thread of the batch (ON CONFLICT cannot update a row
		// twice): its counted replies, and its newest (smallest back).
		upsertThreads: q(`INSERT INTO {s}.threads AS t (conversation_id, root, reply_count, last_reply_seq, last_reply_at)
			SELECT i.conv, i.root, count(*), max(c.last_seq - i.back), (array_agg(i.at ORDER BY i.back))[1]
			FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[]) AS i(conv, back, root, at)
			JOIN {s}.conversations c ON c.id = i.conv
			GROUP BY i.conv, i.root ORDER BY i.conv COLLATE "C", i.root
			ON CONFLICT (conversation_id, root) DO UPDATE SET reply_count = t.reply_count + excluded.reply_count,
				last_reply_seq = excluded.last_reply_seq, last_reply_at = excluded.last_reply_at`),
		insertParticipants: q(`INSERT INTO {s}.thread_participants (conversation_id, root, user_id)
			SELECT DISTINCT * FROM unnest($1::text[], $2::int8[], $3::text[]) ON CONFLICT DO NOTHING`),
		insertMentions: q(`INSERT INTO {s}.mentions (user_id, conversation_id, seq)
			SELECT DISTINCT i.usr, i.conv, c.last_seq - i.back FROM unnest($1::text[], $2::text[], $3::int8[]) AS i(usr, conv, back)
			JOIN {s}.conversations c ON c.id = i.conv`),
		insertMentionsAll: q(`INSERT INTO {s}.mentions_all (conversation_id, seq, sender)
			SELECT i.conv, c.last_seq - i.back, i.sender FROM unnest($1::text[], $2::int8[], $3::text[]) AS i(conv, back, sender)
			JOIN {s}.conversations c ON c.id = i.conv`),
		deleteMentions:    q(`DELETE FROM {s}.mentions WHERE user_id = ANY($1::text[]) AND conversation_id = $2 AND seq = $3`),
		deleteMentionsAll: q(`DELETE FROM {s}.mentions_all WHERE conversation_id = $1 AND seq = $2`),
		upsertPin: q(`INSERT INTO {s}.pins (conversation_id, seq, pinned_by, pinned_at, event_seq) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (conversation_id, seq) DO UPDATE SET pinned_by = excluded.pinned_by, pinned_at = excluded.pinned_at,
				event_seq = excluded.event_seq`),
		deletePin: q(`DELETE FROM {s}.pins WHERE conversation_id = $1 AND seq = $2`),

		// For the rest of a transaction whose joins all probe tables by
		// primary key with a batch's keys: nested loops over the index.
		// Without it a table whose statistics are stale (new, or grown
		// since the last analyze) can get a full scan and sort per
		// statement, ~100 ms at 100k reactions, growing with the table.
		probeJoins: `SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)`,
		// Locks the batch's conversations' version rows (creating missing
		// ones at 0) in id order, so concurrent batches queue rather than
		// deadlock, and returns the versions.
		lockReactionVersions: q(`INSERT INTO {s}.reaction_versions AS v (conversation_id, version)
			SELECT id, 0 FROM unnest($1::text[]) AS t(id) ORDER BY id COLLATE "C"
			ON CONFLICT (conversation_id) DO UPDATE SET version = v.version
			RETURNING conversation_id, version`),
		// A message below its conversation's floor does not exist (see getMessage).
		messagesExist: q(`SELECT m.conversation_id, m.seq FROM unnest($1::text[], $2::int8[]) AS k(c, s)
			JOIN {s}.messages m ON m.conversation_id = k.c AND m.seq = k.s
			WHERE NOT EXISTS (SELECT 1 FROM {s}.message_floors f WHERE f.conversation_id = k.c AND f.floor > k.s)`),
		readReactionCounts: q(`SELECT r.conversation_id, r.seq, r.emoji, r.count, r.first_version
			FROM unnest($1::text[], $2::int8[]) AS k(c, s)
			JOIN {s}.reaction_counts r ON r.conversation_id = k.c AND r.seq = k.s`),
		readReactionMessages: q(`SELECT r.conversation_id, r.seq, r.version FROM unnest($1::text[], $2::int8[]) AS k(c, s)
			JOIN {s}.reaction_messages r ON r.conversation_id = k.c AND r.seq = k.s`),
		readUserReactions: q(`SELECT r.conversation_id, r.seq, r.user_id, r.emoji FROM unnest($1::text[], $2::int8[], $3::text[]) AS k(c, s, u)
			JOIN {s}.reactions r ON r.conversation_id = k.c AND r.seq = k.s AND r.user_id = k.u`),
		insertReactions: q(`INSERT INTO {s}.reactions (conversation_id, seq, user_id, emoji)
			SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[])`),
		deleteReactions: q(`DELETE FROM {s}.reactions r USING unnest($1::text[], $2::int8[], $3::text[], $4::text[]) AS k(c, s, u, e)
			WHERE r.conversation_id = k.c AND r.seq = k.s AND r.user_id = k.u AND r.emoji = k.e`),
		upsertReactionCounts: q(`INSERT INTO {s}.reaction_counts (conversation_id, seq, emoji, count, first_version)
			SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::int8[], $5::int8[])
			ON CONFLICT (conversation_id, seq, emoji) DO UPDATE SET count = excluded.count, first_version = excluded.first_version`),
		deleteReactionCounts: q(`DELETE FROM {s}.reaction_counts r USING unnest($1::text[], $2::int8[], $3::text[]) AS k(c, s, e)
			WHERE r.conversation_id = k.c AND r.seq = k.s AND r.emoji = k.e`),
		upsertReactionMessages: q(`INSERT INTO {s}.reaction_messages (conversation_id, seq, version)
			SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[])
			ON CONFLICT (conversation_id, seq) DO UPDATE SET version = excluded.version`),
		setReactionVersions: q(`UPDATE {s}.reaction_versions v SET version = k.v FROM unnest($1::text[], $2::int8[]) AS k(c, v)
			WHERE v.conversation_id = k.c`),

		// One statement (one snapshot): counts, version and the reader's
		// own. The version and Me are subqueries, run per count row as
		// primary-key probes whatever the statistics say.
		reactions: q(`SELECT r.seq,
				(SELECT m.version FROM {s}.reaction_messages m WHERE m.conversation_id = r.conversation_id AND m.seq = r.seq),
				r.emoji, r.count, r.first_version,
				EXISTS (SELECT 1 FROM {s}.reactions u
					WHERE u.conversation_id = r.conversation_id AND u.seq = r.seq AND u.user_id = $3 AND u.emoji = r.emoji)
			FROM {s}.reaction_counts r
			WHERE r.conversation_id = $1 AND r.seq = ANY($2::int8[])
			ORDER BY r.seq, r.first_version`),
		reactionChanges: q(`SELECT seq, version FROM {s}.reaction_messages WHERE conversation_id = $1 AND version > $2
			ORDER BY version LIMIT $3`),
		reactionVersion: q(`SELECT version FROM {s}.reaction_versions WHERE conversation_id = $1`),
		pins:            q(`SELECT seq, pinned_by, pinned_at FROM {s}.pins WHERE conversation_id = $1 ORDER BY event_seq, seq`),
		threads: q(`SELECT root, reply_count, last_reply_seq, last_reply_at FROM {s}.threads
			WHERE conversation_id = $1 AND root = ANY($2::int8[])`),
		threadAfter: q(`SELECT m.seq, m.body, m.crc FROM {s}.thread_replies t
			JOIN {s}.messages m ON m.conversation_id = t.conversation_id AND m.seq = t.seq
			WHERE t.conversation_id = $1 AND t.root = $2 AND t.seq > $3 ORDER BY t.seq LIMIT $4`),
		threadBefore: q(`SELECT m.seq, m.body, m.crc FROM {s}.thread_replies t
			JOIN {s}.messages m ON m.conversation_id = t.conversation_id AND m.seq = t.seq
			WHERE t.conversation_id = $1 AND t.root = $2 AND t.seq < $3 ORDER BY t.seq DESC LIMIT $4`),
		inThread:       q(`SELECT EXISTS (SELECT 1 FROM {s}.thread_participants WHERE conversation_id = $1 AND root = $2 AND user_id = $3)`),
		backfillLock:   q(`SELECT conversation_id, seq FROM {s}.search_backfill WHERE id = 1 FOR UPDATE SKIP LOCKED`),
		backfillExists: q(`SELECT EXISTS (SELECT 1 FROM {s}.search_backfill)`),
		// Locked, so an edit committed meanwhile is read (and not
		// overwritten with the text before it).
		backfillRows: q(`SELECT conversation_id, seq, body, crc FROM {s}.messages
			WHERE (conversation_id, seq) > ($1::text COLLATE "C", $2::int8) ORDER BY conversation_id, seq LIMIT $3 FOR UPDATE`),
		backfillUpdate: q(`UPDATE {s}.messages m SET search_norm = u.norm, server_time = u.t, content_type = u.ct,
				has_attachment = u.att, sender_only = u.so
			FROM unnest($1::text[], $2::int8[], $3::text[], $4::int8[], $5::text[], $6::bool[], $7::bool[]) AS u(c, s, norm, t, ct, att, so)
			WHERE m.conversation_id = u.c AND m.seq = u.s`),
		backfillDelete: q(`DELETE FROM {s}.search_backfill`),
		backfillMove:   q(`UPDATE {s}.search_backfill SET conversation_id = $1, seq = $2`),
		// Each side bounded by the limit before the merge.
		mentionsAfter: q(`(SELECT seq FROM {s}.mentions WHERE user_id = $1 AND conversation_id = $2 AND seq > $3 ORDER BY seq LIMIT $4)
			UNION
			(SELECT seq FROM {s}.mentions_all WHERE conversation_id = $2 AND seq > $3 AND sender <> $1 ORDER BY seq LIMIT $4)
			ORDER BY seq LIMIT $4`),
	}
}
