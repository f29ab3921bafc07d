//! Whether a store can take writes, checked without opening it as a relay does (no migrations, no spool replay: a live relay may own it), for `codex-relay doctor`.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};

use super::LossNote;
use super::error::{StoreError, redact};
use super::lost::NotePlaces;
use super::open::{Target, classify, default_spool};

/// How long the probe waits for a lock another connection holds, or for Postgres to answer.
const PROBE_WAIT: Duration = Duration::from_secs(3);

/// What [`probe`] found: the store takes writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// The SQLite file, or the Postgres URL without its password.
    pub location: String,
    /// SQLite: the file exists (when it does not, the relay creates it; its directory, or the
    /// nearest one that exists, takes files). Always true for Postgres.
    pub exists: bool,
    /// SQLite: bytes free (to unprivileged users) on the filesystem that holds the file.
    pub free_bytes: Option<u64>,
    /// SQLite: the spool beside the file (`<file>.spool`), when it holds writes: a live
    /// relay's, or those of one that died, which the next open replays.
    pub spool: Option<SpoolReport>,
    /// The note a relay that stopped on a failing store left for the next open: events it
    /// showed and could not store.
    pub loss_note: Option<LossNote>,
}

/// Writes waiting in a spool directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolReport {
    pub dir: PathBuf,
    /// Spool files that hold anything.
    pub files: usize,
    pub bytes: u64,
}

/// Checks that the store at `target` (as `serve --db` takes it) can take writes: SQLite opens
/// one connection (creating nothing), `BEGIN IMMEDIATE` then `ROLLBACK` (a read-only file or
/// directory, or a lock held by another connection, fails here), or, for a file that does not
/// exist yet, that its directory takes files; Postgres connects and asks
/// `SHOW transaction_read_only`.
pub async fn probe(target: &str) -> Result<ProbeReport, StoreError> {
    match classify(target)? {
        Target::Postgres(url) => probe_postgres(url).await,
        Target::SqliteUrl(url) => {
            let options =
                SqliteConnectOptions::from_str(url).map_err(|e| StoreError::InvalidTarget {
                    target: redact(url),
                    reason: e.to_string(),
                })?;
            if url.contains(":memory:") || url.contains("mode=memory") {
                return Ok(ProbeReport {
                    backend: "sqlite",
                    location: "memory (nothing outlives the relay)".into(),
                    exists: false,
                    free_bytes: None,
                    spool: None,
                    loss_note: None,
                });
            }
            probe_sqlite(target, options.get_filename().to_owned(), None).await
        }
        Target::SqlitePath(path) => {
            probe_sqlite(target, PathBuf::from(path), default_spool(target)).await
        }
    }
}

fn cannot_write(backend: &'static str, target: &str, reason: String) -> StoreError {
    StoreError::CannotWrite {
        backend,
        target: redact(target),
        reason,
    }
}

async fn probe_sqlite(
    target: &str,
    file: PathBuf,
    spool: Option<PathBuf>,
) -> Result<ProbeReport, StoreError> {
    let location = file.display().to_string();
    let exists = file.exists();
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // The directory, or (when the relay would still create it) the nearest one that exists.
    let nearest = dir.ancestors().find(|d| d.is_dir()).unwrap_or(dir);
    if exists {
        let options = SqliteConnectOptions::new()
            .filename(&file)
            .create_if_missing(false)
            .busy_timeout(PROBE_WAIT);
        let fail = |e: sqlx::Error| {
            // SQLite may say only that it cannot open the file; a directory that takes no new
            // files (for the WAL and its index) is the usual reason.
            let why = match tempfile::NamedTempFile::new_in(dir) {
                Ok(_) => e.to_string(),
                Err(io) => format!("{e} ({} takes no new files: {io})", dir.display()),
            };
            cannot_write("sqlite", &location, why)
        };
        let mut conn = SqliteConnection::connect_with(&options)
            .await
            .map_err(fail)?;
        let began = sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await;
        let result = match began {
            Ok(_) => sqlx::query("ROLLBACK")
                .execute(&mut conn)
                .await
                .map(|_| ())
                .map_err(fail),
            Err(e) => Err(fail(e)),
        };
        let _ = conn.close().await;
        result?;
    } else {
        // The relay creates the file and any missing directories: the nearest one that exists
        // must take files.
        tempfile::NamedTempFile::new_in(nearest).map_err(|e| {
            cannot_write(
                "sqlite",
                &location,
                format!(
                    "the file does not exist and {} does not take new files: {e}",
                    nearest.display()
                ),
            )
        })?;
    }
    let spool_report = spool.as_deref().and_then(spool_contents);
    let loss_note = NotePlaces::new(target, spool.as_deref().filter(|d| d.is_dir()), None)
        .and_then(|places| places.read());
    Ok(ProbeReport {
        backend: "sqlite",
        location,
        exists,
        free_bytes: free_bytes(nearest),
        spool: spool_report,
        loss_note,
    })
}

/// The spool files in `dir` that hold anything.
fn spool_contents(dir: &Path) -> Option<SpoolReport> {
    let (mut files, mut bytes) = (0, 0);
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let is_spool = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.ends_with(".spool"));
        let len = entry.metadata().map_or(0, |m| m.len());
        if is_spool && len > 0 {
            files += 1;
            bytes += len;
        }
    }
    (files > 0).then(|| SpoolReport {
        dir: dir.to_owned(),
        files,
        bytes,
    })
}

/// Bytes free to unprivileged users on the filesystem of `dir` (`statvfs`).
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `st` points to writable memory the size of
    // a `statvfs`, which the call fills when it returns 0.
    let rc = unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it initialized `st`.
    let st = unsafe { st.assume_init() };
    #[allow(clippy::useless_conversion)]
    let (blocks, size) = (u64::from(st.f_bavail), u64::from(st.f_frsize));
    Some(blocks.saturating_mul(size))
}

async fn probe_postgres(url: &str) -> Result<ProbeReport, StoreError> {
    let shown = redact(url);
    let (mut conn, _) = super::postgres::connect(url, PROBE_WAIT).await?;
    let read_only: Result<String, sqlx::Error> = tokio::time::timeout(PROBE_WAIT, async {
        sqlx::query_scalar("SHOW transaction_read_only")
            .fetch_one(&mut conn)
            .await
    })
    .await
    .unwrap_or_else(|_| Err(sqlx::Error::PoolTimedOut));
    let _ = conn.close().await;
    match read_only {
        Ok(v) if v == "off" => {}
        Ok(v) => {
            return Err(cannot_write(
                "postgres",
                url,
                format!(
                    "the server takes no writes (transaction_read_only = {v}: a standby, or default_transaction_read_only is on)"
                ),
            ));
        }
        Err(e) => {
            return Err(StoreError::Query {
                what: "SHOW transaction_read_only",
                source: Arc::new(e),
            });
        }
    }
    Ok(ProbeReport {
        backend: "postgres",
        location: shown,
        exists: true,
        free_bytes: None,
        spool: None,
        loss_note: NotePlaces::new(url, None, None).and_then(|places| places.read()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_fresh_path_takes_writes_and_a_locked_file_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sub/relay.db").display().to_string();
        let report = probe(&db).await.unwrap();
        assert!(!report.exists);
        assert!(report.free_bytes.is_some_and(|b| b > 0), "{report:?}");
        assert!(
            !dir.path().join("sub").exists(),
            "the probe creates nothing"
        );

        let store = super::super::Store::open(&db).await.unwrap();
        store.close().await.unwrap();
        let report = probe(&db).await.unwrap();
        assert!(report.exists, "{report:?}");
        assert_eq!(report.spool, None, "{report:?}");

        let mut locker = SqliteConnection::connect_with(&SqliteConnectOptions::new().filename(&db))
            .await
            .unwrap();
        sqlx::query("BEGIN EXCLUSIVE")
            .execute(&mut locker)
            .await
            .unwrap();
        let err = probe(&db).await.unwrap_err().to_string();
        assert!(
            err.contains("cannot take writes") && err.contains("locked"),
            "{err}"
        );
        sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
        probe(&db).await.unwrap();
    }
}
