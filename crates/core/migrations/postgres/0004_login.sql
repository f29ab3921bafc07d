-- One ChatGPT login, many Codex processes (docs/CLUSTER.md, "One login, many Codex processes").
-- A row per refresh token the cluster spent, keyed by the token's SHA-256 (never the token):
-- inserting it is the lock (a second instance's insert waits for the first one's transaction),
-- and finding it tells an instance that the token it holds is spent and the new tokens are in
-- the shared CODEX_HOME/auth.json. No token is stored here.
CREATE TABLE relay_login_refreshes (
    used_fingerprint TEXT PRIMARY KEY,
    -- The SHA-256 of the refresh token the refresh got (set when it committed).
    next_fingerprint TEXT,
    account_id       TEXT,
    instance_id      TEXT NOT NULL,
    refreshed_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
