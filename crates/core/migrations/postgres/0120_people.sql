-- People (docs/SECURITY.md, "People and roles"): named users with a role, their personal API
-- tokens (only the SHA-256 of each token is kept), one-time invitations (their hashes), and
-- the append-only audit log of who did what. Shared by every relay on the same store.

CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    role        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    created_by  TEXT,
    disabled_at BIGINT
);
CREATE UNIQUE INDEX users_by_name ON users (name);

-- `sessions`: a JSON array of the session ids the token is limited to; NULL: every session.
CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    hash         TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    label        TEXT,
    role         TEXT NOT NULL,
    sessions     TEXT,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE UNIQUE INDEX api_tokens_by_hash ON api_tokens (hash);
CREATE INDEX api_tokens_by_user ON api_tokens (user_id);

CREATE TABLE invitations (
    hash        TEXT PRIMARY KEY,
    id          TEXT NOT NULL,
    name        TEXT NOT NULL,
    role        TEXT NOT NULL,
    sessions    TEXT,
    created_at  BIGINT NOT NULL,
    created_by  TEXT,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT,
    user_id     TEXT
);

-- Append-only: rows are inserted, never updated (retention may prune the oldest).
CREATE TABLE audit_log (
    seq         BIGSERIAL PRIMARY KEY,
    at          BIGINT NOT NULL,
    user_id     TEXT,
    user_name   TEXT NOT NULL,
    role        TEXT NOT NULL,
    front       TEXT NOT NULL,
    device      TEXT,
    ip          TEXT,
    instance    TEXT,
    action      TEXT NOT NULL,
    session_id  TEXT,
    request_id  TEXT,
    decision    TEXT,
    rule        TEXT,
    detail      TEXT
);
CREATE INDEX audit_log_by_at ON audit_log (at);
CREATE INDEX audit_log_by_user ON audit_log (user_id, at);
CREATE INDEX audit_log_by_session ON audit_log (session_id, at);
