-- The delivery trail of notifications (docs/NOTIFY.md): one row per thing that happened to
-- one outbox row (queued, sent, accepted by a push service, failed with its reason, opened,
-- skipped, given up), and the token that makes a notification's open link count as opened.

ALTER TABLE notify_outbox ADD COLUMN open_token TEXT;

CREATE TABLE notify_deliveries (
    id          BIGSERIAL PRIMARY KEY,
    outbox_id   TEXT NOT NULL,
    request_id  TEXT,
    target      TEXT NOT NULL,
    status      TEXT NOT NULL,
    detail      TEXT,
    at          BIGINT NOT NULL
);
CREATE INDEX notify_deliveries_by_request ON notify_deliveries (request_id, at);
CREATE INDEX notify_deliveries_by_outbox ON notify_deliveries (outbox_id, at);
CREATE INDEX notify_outbox_by_request ON notify_outbox (request_id);
