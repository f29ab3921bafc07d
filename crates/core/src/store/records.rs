//! Rows the store keeps: sessions, events, pending requests, raw Codex lines.

use serde::{Deserialize, Serialize};

/// One session as stored. `meta` is the engine's JSON (create options, usage, result, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
pub struct SessionRecord {
    /// Our session id (also used by every front).
    pub id: String,
    /// The Codex thread id (stable across Codex restarts; used to resume).
    pub thread_id: String,
    pub cwd: Option<String>,
    pub model: Option<String>,
    /// The session status as a lower-case word (`active`, `idle`, ...).
    pub status: String,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds.
    pub updated_at: i64,
    pub turn_count: i64,
    /// Highest event seq written for this session (0 = none).
    pub last_seq: i64,
    /// Engine-defined JSON text.
    pub meta: String,
}

/// One event of a session's log, already serialized.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StoredEvent {
    pub session_id: String,
    /// Contiguous per session, starting at 1 (but for seqs a relay showed and could not store
    /// before it stopped; docs/EVENTS.md).
    pub seq: i64,
    /// Unix milliseconds.
    pub time: i64,
    /// The envelope as JSON text.
    pub json: String,
}

/// A pending (or resolved) server request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
pub struct PendingRecord {
    pub id: String,
    pub session_id: String,
    /// `command_approval`, `file_change_approval`, `question`, ...
    pub kind: String,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds.
    pub deadline: i64,
    /// The request as the engine describes it (JSON text).
    pub request: String,
    /// The resolution (JSON text) once resolved.
    pub resolution: Option<String>,
}
