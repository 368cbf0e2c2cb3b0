-- Moderation. A shadow-muted user's messages reach only themselves.
ALTER TABLE {s}.users ADD COLUMN shadow_muted boolean NOT NULL DEFAULT false;
