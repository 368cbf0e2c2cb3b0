-- Usernames are unique on a normalized (case-folded) form, name_key. Users
-- from before it are keyed by lower(id) (on the ASCII id alphabet, the
-- normalized form); of look-alikes ("alice", "Alice") the oldest (by
-- created_at, then id) keeps the name and the others get none: they still
-- log in by their exact id. NULLs do not collide in a unique index.
ALTER TABLE {s}.users ADD COLUMN name_key text COLLATE "C";

UPDATE {s}.users AS u SET name_key = lower(u.id)
FROM (SELECT DISTINCT ON (lower(id)) id FROM {s}.users
      ORDER BY lower(id), created_at NULLS FIRST, id) AS oldest
WHERE u.id = oldest.id;

CREATE UNIQUE INDEX users_name_key ON {s}.users (name_key);
