-- The files stored messages carry (filerefs.go, docs/retention.md): written
-- with the message, deleted with it (or when it is recalled or erased), in
-- the same transaction. Deleting the last row of a file adds the file to
-- file_orphans, which the retention sweeper consumes: it deletes the files
-- that no message carries any more. Messages stored before this migration
-- have no rows: their files are kept, as before.
CREATE TABLE {s}.message_files (
	file_id         text COLLATE "C" NOT NULL,
	conversation_id text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL,
	PRIMARY KEY (file_id, conversation_id, seq)
);
CREATE INDEX message_files_message ON {s}.message_files (conversation_id, seq);

CREATE TABLE {s}.file_orphans (
	file_id text COLLATE "C" PRIMARY KEY
);
