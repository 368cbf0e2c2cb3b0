-- Parley's initial schema. {s} is replaced by the quoted schema name.
-- Every text key is COLLATE "C": ids are ordered (and compared) bytewise,
-- as in the embedded store, and "C" comparisons are memcmp, the cheapest.

-- One row per conversation: the newest seq, the counter Append and Apply
-- raise (and so lock) in the transaction that stores the messages.
CREATE TABLE {s}.conversations (
	id       text COLLATE "C" PRIMARY KEY,
	last_seq bigint NOT NULL CHECK (last_seq >= 0)
);

-- The message log. body is the protobuf encoding of the message with Seq
-- zero (the seq column is authoritative); crc is its CRC-32C, so a damaged
-- body is detected and never served. client_msg_id is NULL when the message
-- has none (never a duplicate); messages_dedup makes (sender, client id)
-- unique across every node.
CREATE TABLE {s}.messages (
	conversation_id text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL,
	sender          text COLLATE "C" NOT NULL,
	client_msg_id   text COLLATE "C",
	body            bytea NOT NULL,
	crc             integer NOT NULL,
	PRIMARY KEY (conversation_id, seq)
);
CREATE UNIQUE INDEX messages_dedup ON {s}.messages (sender, client_msg_id);

-- Each user's conversation list.
CREATE TABLE {s}.user_conversations (
	user_id         text COLLATE "C" NOT NULL,
	conversation_id text COLLATE "C" NOT NULL,
	PRIMARY KEY (user_id, conversation_id)
);

CREATE TABLE {s}.cursors (
	conversation_id text COLLATE "C" NOT NULL,
	user_id         text COLLATE "C" NOT NULL,
	delivered_seq   bigint NOT NULL,
	read_seq        bigint NOT NULL,
	PRIMARY KEY (conversation_id, user_id)
);

CREATE TABLE {s}.users (
	id            text COLLATE "C" PRIMARY KEY,
	password_hash text NOT NULL,
	token_epoch   bigint NOT NULL,
	disabled      boolean NOT NULL,
	created_at    timestamptz
);

CREATE TABLE {s}.revoked_tokens (
	id         text COLLATE "C" PRIMARY KEY,
	expires_at timestamptz NOT NULL
);
CREATE INDEX revoked_tokens_expiry ON {s}.revoked_tokens (expires_at);

CREATE TABLE {s}.groups (
	conversation_id text COLLATE "C" PRIMARY KEY,
	name            text NOT NULL,
	avatar_url      text NOT NULL,
	announcement    text NOT NULL,
	owner_id        text COLLATE "C" NOT NULL,
	open_join       boolean NOT NULL,
	mute_all        boolean NOT NULL,
	dissolved       boolean NOT NULL,
	created_at      timestamptz
);

-- Members, current and past (has_left). members_current serves Members'
-- paging without stepping over those who left.
CREATE TABLE {s}.members (
	conversation_id text COLLATE "C" NOT NULL,
	user_id         text COLLATE "C" NOT NULL,
	role            integer NOT NULL,
	muted_until     timestamptz,
	joined_at       timestamptz,
	has_left        boolean NOT NULL,
	left_seq        bigint NOT NULL,
	PRIMARY KEY (conversation_id, user_id)
);
CREATE INDEX members_current ON {s}.members (conversation_id, user_id) WHERE NOT has_left;

CREATE TABLE {s}.conversation_settings (
	user_id         text COLLATE "C" NOT NULL,
	conversation_id text COLLATE "C" NOT NULL,
	pinned          boolean NOT NULL,
	muted           boolean NOT NULL,
	cleared_seq     bigint NOT NULL,
	PRIMARY KEY (user_id, conversation_id)
);

CREATE TABLE {s}.hidden_messages (
	user_id         text COLLATE "C" NOT NULL,
	conversation_id text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL,
	PRIMARY KEY (user_id, conversation_id, seq)
);

CREATE TABLE {s}.contacts (
	owner_id   text COLLATE "C" NOT NULL,
	user_id    text COLLATE "C" NOT NULL,
	state      integer NOT NULL,
	note       text NOT NULL,
	updated_at timestamptz,
	PRIMARY KEY (owner_id, user_id)
);

CREATE TABLE {s}.blocks (
	owner_id text COLLATE "C" NOT NULL,
	user_id  text COLLATE "C" NOT NULL,
	PRIMARY KEY (owner_id, user_id)
);

CREATE TABLE {s}.last_seen (
	user_id text COLLATE "C" PRIMARY KEY,
	seen_at timestamptz NOT NULL
);
