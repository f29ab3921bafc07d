-- Passkeys (docs/SECURITY.md, "Passkeys and step-up"): a named user's WebAuthn credentials
-- (public keys only: the private key never leaves the authenticator), and the short-lived,
-- one-use state of a WebAuthn ceremony (its challenge), so that a ceremony started on one relay
-- can finish on another of the same store. Binary values are base64url text.

CREATE TABLE passkeys (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL,
    name          TEXT NOT NULL,
    user_handle   TEXT NOT NULL,
    static_state  TEXT NOT NULL,
    dynamic_state TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT
);
CREATE INDEX passkeys_by_user ON passkeys (user_id);

-- `kind`: register, login or step-up; `request_id`: the request a step-up answers.
CREATE TABLE passkey_ceremonies (
    challenge   TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    user_id     TEXT,
    request_id  TEXT,
    state       TEXT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX passkey_ceremonies_by_expiry ON passkey_ceremonies (expires_at);
