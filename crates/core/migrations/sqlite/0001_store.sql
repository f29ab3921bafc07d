-- The relay store, SQLite flavour. Times are Unix milliseconds; JSON is kept as text, verbatim.

CREATE TABLE sessions (
    id          TEXT PRIMARY KEY NOT NULL,
    thread_id   TEXT NOT NULL,
    cwd         TEXT,
    model       TEXT,
    status      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    turn_count  INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL,
    meta        TEXT NOT NULL
);
CREATE INDEX sessions_by_updated_at ON sessions (updated_at DESC);

-- Rows go in rowid order (fast appends, full pages); the unique index finds a session's range.
-- `NOT NULL ON CONFLICT IGNORE` (the writer never binds NULL) keeps multi-row INSERTs from
-- needing a statement journal: no constraint here can abort a statement half-way.
CREATE TABLE events (
    id          INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL ON CONFLICT IGNORE,
    seq         INTEGER NOT NULL ON CONFLICT IGNORE,
    time        INTEGER NOT NULL ON CONFLICT IGNORE,
    json        TEXT NOT NULL ON CONFLICT IGNORE
);
CREATE UNIQUE INDEX events_by_session_seq ON events (session_id, seq);

CREATE TABLE pending (
    id          TEXT PRIMARY KEY NOT NULL,
    session_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    deadline    INTEGER NOT NULL,
    request     TEXT NOT NULL,
    resolution  TEXT
);
CREATE INDEX pending_by_session ON pending (session_id, created_at);

-- `id` only grows (the newest rows are never deleted), so it orders the lines of a session.
-- Same NOT NULL choice as `events`.
CREATE TABLE raw_lines (
    id          INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL ON CONFLICT IGNORE,
    line        TEXT NOT NULL ON CONFLICT IGNORE
);
CREATE INDEX raw_lines_by_session ON raw_lines (session_id, id);
