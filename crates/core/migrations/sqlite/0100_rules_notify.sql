-- Approval rules, the notification outbox, answer links (their hashes) and Web Push
-- subscriptions. Numbered high on purpose: migrations of other work take the low numbers.

CREATE TABLE rules (
    name        TEXT PRIMARY KEY NOT NULL,
    spec        TEXT NOT NULL,
    source      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- One row per notification and target; `id` is the message id receivers deduplicate on
-- (the Standard Webhooks `webhook-id`). `state`: pending, delivered, skipped, failed.
CREATE TABLE notify_outbox (
    id           TEXT PRIMARY KEY NOT NULL,
    target       TEXT NOT NULL,
    event        TEXT NOT NULL,
    session_id   TEXT,
    request_id   TEXT,
    payload      TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    attempts     INTEGER NOT NULL,
    next_at      INTEGER NOT NULL,
    state        TEXT NOT NULL,
    done_at      INTEGER,
    last_error   TEXT
);
CREATE INDEX notify_outbox_due ON notify_outbox (state, next_at);
CREATE INDEX notify_outbox_by_created ON notify_outbox (created_at DESC);

-- Only the SHA-256 of each link's token; `used_at` makes it single-use.
CREATE TABLE answer_links (
    hash        TEXT PRIMARY KEY NOT NULL,
    request_id  TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER,
    created_at  INTEGER NOT NULL
);

CREATE TABLE push_subscriptions (
    endpoint    TEXT PRIMARY KEY NOT NULL,
    p256dh      TEXT NOT NULL,
    auth        TEXT NOT NULL,
    label       TEXT,
    created_at  INTEGER NOT NULL
);
