-- Uploaded files (docs/media.md): their bytes are in the media store under
-- blob_key. files_unattached finds the files never sent in a message, to be
-- collected; files_owner sums a user's media usage.
CREATE TABLE {s}.files (
	id           text COLLATE "C" PRIMARY KEY,
	owner_id     text COLLATE "C" NOT NULL,
	name         text NOT NULL,
	size         bigint NOT NULL CHECK (size >= 0),
	content_type text NOT NULL,
	width        integer NOT NULL,
	height       integer NOT NULL,
	duration_ms  bigint NOT NULL,
	blurhash     text NOT NULL,
	blob_key     text NOT NULL,
	thumb_key    text NOT NULL,
	created_at   timestamptz NOT NULL,
	attached     boolean NOT NULL
);
CREATE INDEX files_owner ON {s}.files (owner_id);
CREATE INDEX files_unattached ON {s}.files (created_at, id) WHERE NOT attached;
