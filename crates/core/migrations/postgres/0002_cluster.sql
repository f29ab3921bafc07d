-- Many relays on one Postgres (docs/CLUSTER.md). Lease times are Postgres's own clock, so the
-- instances' clocks never have to agree.

-- Every registration takes a new epoch; a write carries its instance's epoch and is refused
-- once the instance was taken over (fencing).
CREATE SEQUENCE relay_epochs;

CREATE TABLE relay_instances (
    id          TEXT PRIMARY KEY,
    epoch       BIGINT NOT NULL,
    -- Where other instances or a load balancer reach it (informational).
    url         TEXT,
    -- `live` while it renews its lease; `gone` once it left or was taken over.
    state       TEXT NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    renewed_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    lease_until TIMESTAMPTZ NOT NULL,
    -- Sessions it runs (its load), as of its last renewal.
    sessions    BIGINT NOT NULL DEFAULT 0,
    -- The instance that adopted its sessions once it was gone.
    taken_by    TEXT,
    version     TEXT
);

-- Which instance runs each session (holds its Codex process and writes its log).
CREATE TABLE relay_owners (
    session_id  TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    since       TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX relay_owners_by_owner ON relay_owners (owner);

-- Commands for a session's owner from the instance a client called (say, interrupt, close,
-- respond, create): the owner takes, runs and answers each once.
CREATE TABLE relay_commands (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    target      TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    taken_at    TIMESTAMPTZ,
    result      TEXT,
    done_at     TIMESTAMPTZ
);
CREATE INDEX relay_commands_waiting ON relay_commands (target, id) WHERE taken_at IS NULL;
