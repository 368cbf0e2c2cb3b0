-- When a file was last marked as maybe carried by no message
-- (filerefs.go): its bytes are deleted only once the mark is old enough
-- that no send which attached it before can still be committing.
-- Marks written before this migration start their wait now.
ALTER TABLE {s}.file_orphans ADD COLUMN marked_at timestamptz NOT NULL DEFAULT now();
