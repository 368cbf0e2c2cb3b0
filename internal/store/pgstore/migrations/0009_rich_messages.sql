-- Rich messages (docs/rich-messages.md): bots, who may mention everyone,
-- reactions, pins, threads and mentions. Every table is new, so rows from
-- before need nothing: their messages simply have none of these.
ALTER TABLE {s}.users ADD COLUMN bot boolean NOT NULL DEFAULT false;
ALTER TABLE {s}.groups ADD COLUMN members_mention_all boolean NOT NULL DEFAULT false;

-- Reactions have their own per-conversation version, raised by one for
-- every change. React locks the conversation's reaction_versions row (in
-- id order) for its whole transaction, so versions are gap-free across
-- nodes; it is not the conversations row, so reactions never wait for
-- messages being appended.
CREATE TABLE {s}.reaction_versions (
	conversation_id text COLLATE "C" PRIMARY KEY,
	version         bigint NOT NULL CHECK (version >= 0)
);

-- One row per user, message and emoji: user-major, so what one user has on
-- a message (Reaction.me) is one index range.
CREATE TABLE {s}.reactions (
	conversation_id text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL,
	user_id         text COLLATE "C" NOT NULL,
	emoji           text COLLATE "C" NOT NULL,
	PRIMARY KEY (conversation_id, seq, user_id, emoji)
);

-- Each emoji's count on a message (rows of count 0 are deleted), so
-- reading counts never scans the reactions. first_version is the version
-- at which the emoji appeared: emojis list in that order.
CREATE TABLE {s}.reaction_counts (
	conversation_id text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL,
	emoji           text COLLATE "C" NOT NULL,
	count           bigint NOT NULL CHECK (count > 0),
	first_version   bigint NOT NULL,
	PRIMARY KEY (conversation_id, seq, emoji)
);

-- Each message's reaction version (kept when its last reaction goes).
-- reaction_messages_version is the change index: the messages changed
-- after a version, each once, at its newest.
CREATE TABLE {s}.reaction_messages (
	conversation_id text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL,
	version         bigint NOT NULL,
	PRIMARY KEY (conversation_id, seq)
);
CREATE UNIQUE INDEX reaction_messages_version ON {s}.reaction_messages (conversation_id, version);

-- Pinned messages; event_seq (the seq of the event that pinned) orders
-- them, whatever the nodes' clocks.
CREATE TABLE {s}.pins (
	conversation_id text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL,
	pinned_by       text COLLATE "C" NOT NULL,
	pinned_at       timestamptz,
	event_seq       bigint NOT NULL,
	PRIMARY KEY (conversation_id, seq)
);

-- Thread replies (SenderOnly ones too), the summary of each thread with
-- counted replies (last_reply_at: unix ms), and who replied (counted
-- replies only). Written with the messages, under the conversation's
-- counter row lock, so a thread's rows are never written concurrently.
CREATE TABLE {s}.thread_replies (
	conversation_id text COLLATE "C" NOT NULL,
	root            bigint NOT NULL,
	seq             bigint NOT NULL,
	PRIMARY KEY (conversation_id, root, seq)
);
CREATE TABLE {s}.threads (
	conversation_id text COLLATE "C" NOT NULL,
	root            bigint NOT NULL,
	reply_count     bigint NOT NULL,
	last_reply_seq  bigint NOT NULL,
	last_reply_at   bigint NOT NULL,
	PRIMARY KEY (conversation_id, root)
);
CREATE TABLE {s}.thread_participants (
	conversation_id text COLLATE "C" NOT NULL,
	root            bigint NOT NULL,
	user_id         text COLLATE "C" NOT NULL,
	PRIMARY KEY (conversation_id, root, user_id)
);

-- Mentions of a user by name, and of everyone (sender: left out when
-- read). A recall deletes the message's rows.
CREATE TABLE {s}.mentions (
	user_id         text COLLATE "C" NOT NULL,
	conversation_id text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL,
	PRIMARY KEY (user_id, conversation_id, seq)
);
CREATE TABLE {s}.mentions_all (
	conversation_id text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL,
	sender          text COLLATE "C" NOT NULL,
	PRIMARY KEY (conversation_id, seq)
);
