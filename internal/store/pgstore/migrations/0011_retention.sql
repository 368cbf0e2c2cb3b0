-- Retention and disappearing messages (retention.go, docs/retention.md).
-- A conversation's floor: its lowest seq that may still be stored; every
-- message below it expired and is never served.
CREATE TABLE {s}.message_floors (
	conversation_id text COLLATE "C" PRIMARY KEY,
	floor           bigint NOT NULL CHECK (floor >= 0)
);

-- A message sent while disappearing messages were on carries its expiry
-- (unix ms); the partial index lets the sweeper find the expired ones
-- without scanning messages.
ALTER TABLE {s}.messages ADD COLUMN expires_at bigint;
CREATE INDEX messages_expiry ON {s}.messages (expires_at) WHERE expires_at IS NOT NULL;
