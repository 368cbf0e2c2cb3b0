-- Moderation: shadow muting (a shadow-muted user's messages reach only
-- themselves), users' reports of messages, the audit log of admin and
-- moderation actions, and server-wide settings.
ALTER TABLE {s}.users ADD COLUMN shadow_muted boolean NOT NULL DEFAULT false;

-- message is the reported message's protobuf encoding as it was when
-- reported (NULL: none). reports_once lets a reporter report a message
-- once, across nodes; reports_status serves the queue of one status in id
-- order. Status: 1 open, 2 resolved, 3 dismissed.
CREATE TABLE {s}.reports (
	id              text COLLATE "C" PRIMARY KEY,
	reporter        text COLLATE "C" NOT NULL,
	conversation_id text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL,
	reason          text NOT NULL,
	note            text NOT NULL,
	message         bytea,
	created_at      timestamptz,
	status          smallint NOT NULL CHECK (status BETWEEN 1 AND 3),
	closed_by       text NOT NULL,
	closed_at       timestamptz,
	resolution      text NOT NULL
);
CREATE UNIQUE INDEX reports_once ON {s}.reports (reporter, conversation_id, seq);
CREATE INDEX reports_status ON {s}.reports (status, id);

-- Append-only. ids come from the sequence: increasing in insertion order
-- across nodes, never reused.
CREATE TABLE {s}.audit_log (
	id     bigserial PRIMARY KEY,
	at     timestamptz,
	actor  text NOT NULL,
	action text NOT NULL,
	target text NOT NULL,
	detail text NOT NULL
);

CREATE TABLE {s}.settings (
	key   text COLLATE "C" PRIMARY KEY,
	value bytea NOT NULL
);
