-- Group settings: who may add members (add_policy) and what new and
-- re-added members read (history_visibility), as protocol enum numbers; 0
-- (unset, every group from before) means admins only / since their join.
-- join_seq is the seq of the event that last added a member; 0 for members
-- from before, who keep reading from the start.
ALTER TABLE {s}.groups ADD COLUMN add_policy integer NOT NULL DEFAULT 0;
ALTER TABLE {s}.groups ADD COLUMN history_visibility integer NOT NULL DEFAULT 0;
ALTER TABLE {s}.members ADD COLUMN join_seq bigint NOT NULL DEFAULT 0;
