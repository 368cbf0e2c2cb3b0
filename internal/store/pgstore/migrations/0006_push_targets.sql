-- Where each device of a user gets offline push notifications.
CREATE TABLE {s}.push_targets (
	user_id    text COLLATE "C" NOT NULL,
	device_id  text COLLATE "C" NOT NULL,
	kind       text NOT NULL,
	token      text NOT NULL,
	topic      text NOT NULL,
	sandbox    boolean NOT NULL,
	p256dh     text NOT NULL,
	auth       text NOT NULL,
	token_id   text NOT NULL,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (user_id, device_id)
);
