//! The store's error type; every message names what failed and where.

use std::sync::Arc;

pub use crate::error::StoreError;

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
