-- End-to-end encryption with MLS (e2ee.go, docs/e2ee.md): the KeyPackages
-- devices publish (one-time packages are deleted as they are claimed; a
-- device's last-resort package stays) and the epoch of each encrypted
-- group, moved by one accepted Commit at a time in the transaction that
-- stores the Commit.
CREATE TABLE {s}.mls_key_packages (
	id        bigserial PRIMARY KEY,
	user_id   text COLLATE "C" NOT NULL,
	device_id text COLLATE "C" NOT NULL,
	data      bytea NOT NULL
);
CREATE INDEX mls_key_packages_device ON {s}.mls_key_packages (user_id, device_id, id);

CREATE TABLE {s}.mls_last_resort (
	user_id   text COLLATE "C" NOT NULL,
	device_id text COLLATE "C" NOT NULL,
	data      bytea NOT NULL,
	PRIMARY KEY (user_id, device_id)
);

CREATE TABLE {s}.mls_groups (
	conversation_id text COLLATE "C" PRIMARY KEY,
	epoch           bigint NOT NULL
);
