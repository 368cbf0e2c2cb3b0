-- Message search (search.go). A searchable message (search.DocOf: a NORMAL
-- message with search text or a UTF-8 text payload, not recalled) has
-- search_norm, its text as search.Normalized cuts and folds it (" w1 w2 "),
-- and the fields searches filter and sort on; the others have NULLs.
-- Append and Apply write them with the body, so an edit replaces them and a
-- recall clears them.
ALTER TABLE {s}.messages
	ADD COLUMN search_norm    text,
	ADD COLUMN server_time    bigint,
	ADD COLUMN content_type   text COLLATE "C",
	ADD COLUMN has_attachment boolean,
	ADD COLUMN sender_only    boolean;

-- A trigram index serves LIKE '% word %' and substring matches. pg_trgm is
-- a trusted extension (PostgreSQL 13+): the database's owner may create it.
-- The operator class is named in whichever schema holds the extension.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
DO $$
DECLARE ns text;
BEGIN
	SELECT quote_ident(n.nspname) INTO ns FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	WHERE e.extname = 'pg_trgm';
	EXECUTE format('CREATE INDEX messages_search ON {s}.messages USING gin (search_norm %s.gin_trgm_ops) WHERE search_norm IS NOT NULL', ns);
END $$;

-- Messages stored before this migration have no search_norm yet: while
-- this row exists, one node at a time fills them in, in (conversation_id,
-- seq) order from the position recorded here (backfill.go), and deletes the
-- row when done. A new schema has nothing to fill in.
CREATE TABLE {s}.search_backfill (
	id              integer PRIMARY KEY CHECK (id = 1),
	conversation_id text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL
);
INSERT INTO {s}.search_backfill SELECT 1, '', 0 WHERE EXISTS (SELECT 1 FROM {s}.messages);
