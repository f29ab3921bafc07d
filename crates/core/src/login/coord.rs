//! Who may spend the refresh token: a file lock beside `auth.json` for the relays of one
//! machine, or, on Postgres, a row per spent refresh token (keyed by its SHA-256) whose insert
//! is the lock across machines and whose presence tells a latecomer the token is spent.

use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::{PgPool, Postgres, Transaction};

use super::LoginError;

/// Where the lock file of a Codex home's login lives.
pub(crate) fn lock_path(codex_home: &Path) -> PathBuf {
    codex_home.join("auth.json.codex-relay.lock")
}

/// An exclusive `flock` on the lock file; released when dropped (the descriptor closes).
pub(crate) struct FileLock {
    _file: std::fs::File,
}

impl FileLock {
    /// Waits up to `wait` for the lock (polling: a blocked `flock` could not be given up).
    pub async fn acquire(path: &Path, wait: Duration) -> Result<FileLock, LoginError> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|e| LoginError::io("opening the lock file", path, e))?;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(FileLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(LoginError::io("locking", path, err));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(LoginError::Busy {
                    what: format!("the lock {}", path.display()),
                    waited: wait,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// What Postgres says about a refresh token about to be spent.
pub(crate) enum Claim {
    /// Nobody spent it: this transaction holds its row until it commits (with the successor)
    /// or rolls back (the refresh failed, the token is still good).
    Mine(Transaction<'static, Postgres>),
    /// Already spent, by this instance at that time.
    Spent { by: String, at: String },
}

const INSERT: &str = "INSERT INTO relay_login_refreshes (used_fingerprint, account_id, instance_id) \
     VALUES ($1, $2, $3) ON CONFLICT (used_fingerprint) DO NOTHING";
const SPENT_BY: &str = "SELECT instance_id, to_char(refreshed_at AT TIME ZONE 'UTC', \
     'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM relay_login_refreshes WHERE used_fingerprint = $1";
const FINISH: &str = "UPDATE relay_login_refreshes SET next_fingerprint = $2, refreshed_at = now() \
     WHERE used_fingerprint = $1";
/// Spent tokens are worthless after this long; their rows go.
const PRUNE: &str =
    "DELETE FROM relay_login_refreshes WHERE refreshed_at < now() - interval '90 days'";

/// Claims the refresh token with fingerprint `used`. A concurrent claim of the same token
/// waits here until the first one's transaction ends (the unique key), then finds it spent.
pub(crate) async fn claim(
    pool: &PgPool,
    used: &str,
    account: Option<&str>,
    instance: &str,
) -> Result<Claim, LoginError> {
    let mut tx = pool.begin().await.map_err(LoginError::postgres)?;
    let inserted = sqlx::query(INSERT)
        .bind(used)
        .bind(account)
        .bind(instance)
        .execute(&mut *tx)
        .await
        .map_err(LoginError::postgres)?
        .rows_affected();
    if inserted == 1 {
        return Ok(Claim::Mine(tx));
    }
    tx.rollback().await.map_err(LoginError::postgres)?;
    let (by, at): (String, String) = sqlx::query_as(SPENT_BY)
        .bind(used)
        .fetch_one(pool)
        .await
        .map_err(LoginError::postgres)?;
    Ok(Claim::Spent { by, at })
}

/// Records the successor of the claimed token and lets the waiting claims go.
pub(crate) async fn finish(
    pool: &PgPool,
    mut tx: Transaction<'static, Postgres>,
    used: &str,
    next: &str,
) -> Result<(), LoginError> {
    sqlx::query(FINISH)
        .bind(used)
        .bind(next)
        .execute(&mut *tx)
        .await
        .map_err(LoginError::postgres)?;
    tx.commit().await.map_err(LoginError::postgres)?;
    if let Err(e) = sqlx::query(PRUNE).execute(pool).await {
        tracing::debug!("pruning old login refreshes: {e}");
    }
    Ok(())
}
