//! The store's error type; every message names what failed and where.

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

impl StoreError {
    /// Maps a read error, turning "pool closed" into [`StoreError::Closed`].
    pub(crate) fn query(what: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |e| match e {
            sqlx::Error::PoolClosed => StoreError::Closed,
            e => StoreError::Query {
                what,
                source: Arc::new(e),
            },
        }
    }
}

/// `target` with the password of a URL (`user:password@`) replaced by `***`.
pub(crate) fn redact(target: &str) -> String {
    let Some(scheme_end) = target.find("://") else {
        return target.to_owned();
    };
    let rest = &target[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return target.to_owned();
    };
    let Some(colon) = authority[..at].find(':') else {
        return target.to_owned();
    };
    let password_start = scheme_end + 3 + colon + 1;
    let password_end = scheme_end + 3 + at;
    format!(
        "{}***{}",
        &target[..password_start],
        &target[password_end..]
    )
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redacts_only_the_password() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("postgres://h/db?x=a:b@c"), "postgres://h/db?x=a:b@c");
        assert_eq!(redact("/var/lib/relay.db"), "/var/lib/relay.db");
    }
}
