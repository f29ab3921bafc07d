//! The store's error: what can go wrong opening, reading or writing it; every message names
//! what failed and where (its helpers are in store/error.rs).

use std::path::PathBuf;
use std::sync::Arc;

/// What can go wrong opening, reading or writing the store. Cheap to clone (the writer hands
/// one error to every waiting `flush()`).
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The target string names no backend we know, or does not parse.
    #[error("invalid store target {target:?}: {reason}")]
    InvalidTarget { target: String, reason: String },
    /// The parent directory of the SQLite file could not be created.
    #[error("cannot create the directory {path} for the SQLite store: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The database could not be reached or opened (the target's password is redacted).
    #[error("cannot open the {backend} store at {target}: {reason}")]
    Open {
        backend: &'static str,
        target: String,
        reason: String,
    },
    /// The database is there but refuses to start a write (read-only, locked by another
    /// connection, a standby): found by [`probe`](super::probe).
    #[error("the {backend} store at {target} cannot take writes: {reason}")]
    CannotWrite {
        backend: &'static str,
        target: String,
        reason: String,
    },
    /// The schema migrations failed.
    #[error("cannot migrate the {backend} store at {target}: {reason}")]
    Migrate {
        backend: &'static str,
        target: String,
        reason: String,
    },
    /// A read query failed.
    #[error("store query failed ({what}): {source}")]
    Query {
        what: &'static str,
        #[source]
        source: Arc<sqlx::Error>,
    },
    /// The background writer could not commit some queued writes; they are lost.
    #[error(
        "store write failed: {lost} queued write(s) could not be committed; first error: {source}"
    )]
    Write {
        lost: usize,
        #[source]
        source: Arc<sqlx::Error>,
    },
    /// The store was closed with [`Store::close`](super::Store::close).
    #[error("the store is closed")]
    Closed,
}
