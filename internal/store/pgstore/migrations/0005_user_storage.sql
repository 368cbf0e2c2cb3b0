-- Payload bytes each user has stored, raised in the transaction that stores
-- their messages (per-user storage quota).
CREATE TABLE {s}.user_storage (
	user_id text COLLATE "C" PRIMARY KEY,
	bytes   bigint NOT NULL
);
