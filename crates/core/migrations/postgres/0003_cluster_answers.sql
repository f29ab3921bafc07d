-- The first answer to each request, across instances: the owner records an answer here (under
-- its fence) before Codex is told, so an instance that lost its lease, or a second answer
-- racing the first, never reaches Codex.
CREATE TABLE relay_answers (
    request_id  TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    instance    TEXT NOT NULL,
    answered_by TEXT NOT NULL,
    at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
