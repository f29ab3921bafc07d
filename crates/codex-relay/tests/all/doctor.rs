//! `codex-relay doctor` against the real pinned binaries, and against something that is not Codex;
//! its store check on a fresh path, a store another connection has locked, a read-only one, and
//! Postgres (writable, read-only, absent).

use std::path::Path;
use std::process::Command;

use codex_relay_testkit::skip::skip;

fn doctor(codex: &Path, home: &Path) -> (bool, String) {
    // A store of this test's own, so the check never looks at the machine's.
    doctor_on(codex, home, &home.join("relay.db").display().to_string())
}

fn doctor_on(codex: &Path, home: &Path, db: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_codex-relay"))
        .arg("doctor")
        .arg("--codex")
        .arg(codex)
        .arg("--codex-home")
        .arg(home)
        .arg("--db")
        .arg(db)
        .output()
        .expect("run codex-relay doctor");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn doctor_reports_each_pinned_codex_as_tested_and_starting() {
    for version in codex_relay_testkit::PINNED_VERSIONS {
        let bin = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
        let home = tempfile::tempdir().unwrap();
        let (ok, text) = doctor(&bin, home.path());
        assert!(ok, "{text}");
        assert!(
            text.contains(&format!("codex version:   {version}")),
            "{text}"
        );
        assert!(text.contains("compatibility:   Tested"), "{text}");
        assert!(text.contains("started and initialized"), "{text}");
        assert!(
            text.contains(
                "auth:            not logged in (the model provider needs OpenAI credentials)"
            ),
            "{text}"
        );
    }
}

#[test]
fn doctor_reports_an_api_key_login() {
    for version in codex_relay_testkit::PINNED_VERSIONS {
        let bin = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
        let home = tempfile::tempdir().unwrap();
        // What `codex login --with-api-key` (or the relay's API-key login) leaves behind.
        std::fs::write(
            home.path().join("auth.json"),
            r#"{"OPENAI_API_KEY": "sk-doctor-test"}"#,
        )
        .unwrap();
        let (ok, text) = doctor(&bin, home.path());
        assert!(ok, "{text}");
        assert!(
            text.contains("auth:            API key"),
            "{version}: {text}"
        );
        assert!(
            !text.contains("sk-doctor-test"),
            "the key is not printed: {text}"
        );
    }
}

#[test]
fn doctor_refuses_a_binary_without_app_server_v2() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("codex");
    std::fs::write(&fake, "#!/bin/sh\necho 'codex-cli 0.40.0'\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (ok, text) = doctor(&fake, dir.path());
    assert!(!ok, "{text}");
    assert!(
        text.contains("Unsupported") && text.contains("0.58.0"),
        "{text}"
    );
}

/// A store as a relay leaves it: created, migrated, closed.
async fn make_store(db: &Path) {
    let store = codex_relay_core::store::Store::open(&db.display().to_string())
        .await
        .unwrap();
    store.close().await.unwrap();
    std::fs::remove_dir_all(format!("{}.spool", db.display())).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_passes_a_fresh_store_path_and_fails_a_store_another_connection_locked() {
    use sqlx::Connection;
    let bin =
        codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST).expect("pinned Codex installs");
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("data/relay.db");
    let run =
        || tokio::task::block_in_place(|| doctor_on(&bin, home.path(), &db.display().to_string()));

    let (ok, text) = run();
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!(
            "store:           sqlite at {}: takes writes (the file does not exist yet",
            db.display()
        )),
        "{text}"
    );
    assert!(text.contains(" free"), "the free space is shown: {text}");
    assert!(
        !db.exists() && !db.parent().unwrap().exists(),
        "doctor creates nothing"
    );

    make_store(&db).await;
    let (ok, text) = run();
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!(
            "store:           sqlite at {}: takes writes;",
            db.display()
        )),
        "{text}"
    );

    // Another connection holds the write lock (this stops root as well as anyone).
    let mut locker = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();
    let (ok, text) = run();
    assert!(!ok, "a locked store fails doctor: {text}");
    assert!(
        text.contains("store:           FAILED: the sqlite store at")
            && text.contains("cannot take writes")
            && text.contains("locked"),
        "{text}"
    );
    assert!(
        !text.contains("app-server:"),
        "doctor stops at the failed check: {text}"
    );
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    let (ok, text) = run();
    assert!(
        ok,
        "once the lock is gone the store takes writes again: {text}"
    );
}

/// A directory that takes no writes: a read-only bind mount for root (whom permissions do not
/// stop), else mode 0555 on the directory and 0444 on the file. Undone on drop.
struct ReadOnly {
    dir: std::path::PathBuf,
    mounted: bool,
}

impl ReadOnly {
    fn make(dir: &Path) -> Option<ReadOnly> {
        use std::os::unix::fs::PermissionsExt;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o444))
                    .unwrap();
            }
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
            return Some(ReadOnly {
                dir: dir.to_owned(),
                mounted: false,
            });
        }
        let mount = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .arg(dir)
                .arg(dir)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !mount(&["--bind"]) {
            skip(
                "a read-only bind mount failed (root, but no mount here); the read-only store scenario did not run",
            );
            return None;
        }
        let ro = ReadOnly {
            dir: dir.to_owned(),
            mounted: true,
        };
        if !Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success())
        {
            skip(
                "remounting the bind mount read-only failed; the read-only store scenario did not run",
            );
            return None;
        }
        Some(ro)
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if self.mounted {
            let _ = Command::new("umount").arg(&self.dir).status();
        } else {
            let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o755));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_fails_a_read_only_store_and_a_new_one_in_a_read_only_directory() {
    let bin =
        codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST).expect("pinned Codex installs");
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("ro");
    std::fs::create_dir(&dir).unwrap();
    let db = dir.join("relay.db");
    make_store(&db).await;
    let Some(_ro) = ReadOnly::make(&dir) else {
        return;
    };
    for (target, why) in [
        (db.clone(), "an existing store"),
        (dir.join("new.db"), "a new store in a read-only directory"),
    ] {
        let (ok, text) = tokio::task::block_in_place(|| {
            doctor_on(&bin, home.path(), &target.display().to_string())
        });
        assert!(!ok, "{why} fails doctor: {text}");
        assert!(
            text.contains("store:           FAILED: the sqlite store at")
                && text.contains("cannot take writes"),
            "{why}: {text}"
        );
        eprintln!(
            "{why}: {}",
            text.lines()
                .find(|l| l.starts_with("store:"))
                .unwrap_or_default()
        );
    }
}

/// `url` with its user (and any password) replaced by `user:password`.
fn as_user(url: &str, user: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
    let host = rest.split_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{user}:{password}@{host}")
}

/// Postgres: the test database takes writes (its password never printed); a role whose
/// transactions are read-only by default, as on a standby, fails with that reason; a server
/// that is not there fails promptly with a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_on_postgres_passes_a_writable_database_and_fails_a_read_only_or_absent_one() {
    use sqlx::Connection;
    let Some(url) = codex_relay_testkit::postgres::url("doctor on Postgres") else {
        return;
    };
    let bin =
        codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST).expect("pinned Codex installs");
    let home = tempfile::tempdir().unwrap();
    let run = |db: &str| tokio::task::block_in_place(|| doctor_on(&bin, home.path(), db));

    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    let role = format!("doctor_ro_{}", std::process::id());
    for sql in [
        format!("DROP ROLE IF EXISTS {role}"),
        format!("CREATE ROLE {role} LOGIN PASSWORD 'hunter2'"),
        format!("ALTER ROLE {role} SET default_transaction_read_only = on"),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut admin)
            .await
            .unwrap();
    }

    let (ok, text) = run(&url);
    assert!(ok, "{text}");
    assert!(
        text.contains("store:           postgres at ") && text.contains(": takes writes"),
        "{text}"
    );

    let (ok, text) = run(&as_user(&url, &role, "hunter2"));
    assert!(!ok, "a read-only database fails doctor: {text}");
    assert!(
        text.contains(&format!(
            "store:           FAILED: the postgres store at postgres://{role}:***@"
        )) && text.contains("cannot take writes")
            && text.contains("transaction_read_only = on"),
        "the reason, and the URL without its password: {text}"
    );
    assert!(!text.contains("hunter2"), "{text}");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = std::time::Instant::now();
    let (ok, text) = run(&format!(
        "postgres://postgres:hunter2@127.0.0.1:{port}/nothing"
    ));
    assert!(!ok, "a server that is not there fails doctor: {text}");
    assert!(
        text.contains("store:           FAILED: cannot open the postgres store at")
            && !text.contains("hunter2"),
        "{text}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "doctor gives up promptly: {:?}",
        started.elapsed()
    );

    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP ROLE {role}")))
        .execute(&mut admin)
        .await
        .unwrap();
}
