//! Picks the backend from the target string and opens (and migrates) it.

use super::error::{StoreError, redact};
use super::{Pool, postgres, sqlite};

/// Which backend a target selects.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Target<'a> {
    Postgres(&'a str),
    /// A `sqlite:` URL.
    SqliteUrl(&'a str),
    /// A plain file path.
    SqlitePath(&'a str),
}

/// `postgres://` / `postgresql://` → Postgres; `sqlite:` → SQLite URL; any other `scheme://` is
/// refused; anything else is a SQLite file path.
pub(crate) fn classify(target: &str) -> Result<Target<'_>, StoreError> {
    let invalid = |reason: String| StoreError::InvalidTarget {
        target: redact(target),
        reason,
    };
    if target.trim().is_empty() {
        return Err(invalid(
            "it is empty; give a SQLite file path or a postgres:// URL".into(),
        ));
    }
    let lower = target.to_ascii_lowercase();
    if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        return Ok(Target::Postgres(target));
    }
    if lower.starts_with("sqlite:") {
        return Ok(Target::SqliteUrl(target));
    }
    if let Some(scheme_end) = target.find("://") {
        let scheme = &target[..scheme_end];
        if !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        {
            return Err(invalid(format!(
                "unsupported scheme {scheme:?}; use postgres://, postgresql://, sqlite:// or a file path"
            )));
        }
    }
    Ok(Target::SqlitePath(target))
}

pub(crate) async fn open(target: &str) -> Result<Pool, StoreError> {
    match classify(target)? {
        Target::Postgres(url) => postgres::open(url).await.map(Pool::Postgres),
        Target::SqliteUrl(url) => sqlite::open(url, true).await.map(Pool::Sqlite),
        Target::SqlitePath(path) => sqlite::open(path, false).await.map(Pool::Sqlite),
    }
}

/// The spool a store gets unless one is configured: beside a SQLite file (`<file>.spool`).
pub(crate) fn default_spool(target: &str) -> Option<std::path::PathBuf> {
    match classify(target).ok()? {
        Target::SqlitePath(path) => Some(format!("{path}.spool").into()),
        Target::Postgres(_) | Target::SqliteUrl(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{Target, classify};

    #[test]
    fn the_target_picks_the_backend() {
        assert_eq!(
            classify("postgres://u@h/db").unwrap(),
            Target::Postgres("postgres://u@h/db")
        );
        assert_eq!(
            classify("postgresql://h/db").unwrap(),
            Target::Postgres("postgresql://h/db")
        );
        assert_eq!(
            classify("sqlite:///tmp/x.db").unwrap(),
            Target::SqliteUrl("sqlite:///tmp/x.db")
        );
        assert_eq!(
            classify("sqlite::memory:").unwrap(),
            Target::SqliteUrl("sqlite::memory:")
        );
        assert_eq!(
            classify("data/relay.db").unwrap(),
            Target::SqlitePath("data/relay.db")
        );
        assert!(
            classify("mysql://h/db")
                .unwrap_err()
                .to_string()
                .contains("unsupported scheme \"mysql\"")
        );
        assert!(classify("  ").unwrap_err().to_string().contains("empty"));
    }
}
