-- Single sign-on (docs/SECURITY.md, "Single sign-on"): which identity at an OpenID provider
-- signs in as which user, the sign-ins under way (one row per browser that left for the
-- provider: single use, about ten minutes), and an expiry for the personal tokens an SSO
-- sign-in makes (a browser login that ends on its own, on the server, not only in the cookie).

-- An identity is the provider's issuer and its `sub` claim: stable, never reassigned.
CREATE TABLE user_identities (
    issuer          TEXT NOT NULL,
    subject         TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    email           TEXT,
    created_at      BIGINT NOT NULL,
    created_by      TEXT,
    last_sign_in_at BIGINT,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX user_identities_by_user ON user_identities (user_id);

-- `state_hash`: the SHA-256 of the state sent to the provider (the browser's cookie holds
-- the state itself). `verifier` is the PKCE code verifier, `nonce` the ID token's nonce.
CREATE TABLE sso_pending (
    state_hash  TEXT PRIMARY KEY,
    nonce       TEXT NOT NULL,
    verifier    TEXT NOT NULL,
    next        TEXT NOT NULL,
    invite_hash TEXT,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX sso_pending_by_expiry ON sso_pending (expires_at);

ALTER TABLE api_tokens ADD COLUMN expires_at BIGINT;
