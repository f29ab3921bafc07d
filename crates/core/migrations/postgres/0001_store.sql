-- The relay store, Postgres flavour. Times are Unix milliseconds; JSON is kept as text, verbatim.

CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    thread_id   TEXT NOT NULL,
    cwd         TEXT,
    model       TEXT,
    status      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    turn_count  BIGINT NOT NULL,
    last_seq    BIGINT NOT NULL,
    meta        TEXT NOT NULL
);
CREATE INDEX sessions_by_updated_at ON sessions (updated_at DESC);

CREATE TABLE events (
    session_id  TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    time        BIGINT NOT NULL,
    json        TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE pending (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    deadline    BIGINT NOT NULL,
    request     TEXT NOT NULL,
    resolution  TEXT
);
CREATE INDEX pending_by_session ON pending (session_id, created_at);

-- One writer inserts in order, so `id` orders the lines of a session.
CREATE TABLE raw_lines (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id  TEXT NOT NULL,
    line        TEXT NOT NULL
);
CREATE INDEX raw_lines_by_session ON raw_lines (session_id, id);
