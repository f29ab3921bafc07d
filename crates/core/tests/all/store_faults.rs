//! Store faults over the real Codex: the database stops taking writes in the middle of a turn
//! (its filesystem fills up; another process locks the file), the session's live view goes on,
//! the store reports the fault while it keeps the writes and retries, and once the fault
//! clears the stored log is complete and contiguous, the same as what clients were shown.
//!
//! With a tiny bound on the writes held, the locked database also closes the store's gate:
//! the session's snapshot shows the fault and that Codex is paused, and the running session is
//! told once, with an `error`.
//!
//! Postgres is a private server of this test (the shared test server is never stopped),
//! stopped (`pg_ctl stop -m fast`) while a command runs and started again; skipped with the
//! reason when no PostgreSQL binaries are installed.
//!
//! The full disk is a size-limited tmpfs, so that scenario needs root (to mount it); without
//! root it is skipped and says so. A read-only remount of that tmpfs is refused by Linux while
//! SQLite holds the file open for writing (EBUSY), so "read-only" is staged by ext4's error
//! path in `store_readonly.rs`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{Backend, Env, assert_contiguous};
use codex_relay_core::{Ev, Relay, SessionStatus};
use codex_relay_testkit::skip::skip;
use codex_relay_testkit::{NEWEST, Reply};

const LONG: Duration = Duration::from_secs(300);

/// A size-limited tmpfs mounted for one test, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            skip(
                "mounting a size-limited tmpfs failed (needs root); the full-disk scenario did not run",
            );
            return None;
        }
        Some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fills the filesystem of `dir` until a write fails for lack of space.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    for size in [64 * 1024, 4096, 512, 1] {
        let chunk = vec![0u8; size];
        while f.write_all(&chunk).is_ok() {}
    }
    let _ = f.sync_all();
    path
}

/// Starts a turn that runs a command for a while; returns the relay, the session id, and the
/// scripted model's environment.
async fn turn_with_a_fault(
    store: String,
    inject: impl FnOnce(),
    clear: impl FnOnce(),
) -> (Relay, String) {
    turn_on(NEWEST, store, inject, clear).await
}

/// [`turn_with_a_fault`] on one Codex version.
async fn turn_on(
    version: &'static str,
    store: String,
    inject: impl FnOnce(),
    clear: impl FnOnce(),
) -> (Relay, String) {
    let env = Env::start(version, Backend::Sqlite, LONG).await.unwrap();
    env.relay.shutdown().await;
    env.model.route(
        "FAULT-ME",
        [
            Reply::exec("sleep 2; echo slept", "call_fault"),
            Reply::text("done despite the store"),
        ],
    );
    let mut config = env.config.clone();
    config.store = store;
    // A relay alone on its database (as `--no-cluster`): it keeps its sessions through a fault
    // of any length. In a cluster, even of one, an instance that cannot confirm its lease for
    // three quarters of it stops them (docs/CLUSTER.md).
    config.cluster.enabled = false;
    let relay = Relay::open(config).await.expect("relay opens");
    let id = common::start_read_only(&relay, env.cwd(), "FAULT-ME sleep a little").await;
    common::until(&relay, &id, "the command starts", |s| {
        s.status == SessionStatus::Active
    })
    .await;
    common::until_logged(&relay, &id, "the command's start", |ev| {
        matches!(ev, Ev::ToolCallStart { .. })
    })
    .await;
    relay.store().flush().await.unwrap();
    inject();
    // The live view goes on: the turn completes while the store cannot take its events.
    let done = common::until(&relay, &id, "the turn ends during the fault", |s| {
        s.status == SessionStatus::Idle
    })
    .await;
    assert_eq!(
        done.result,
        Some(serde_json::json!("done despite the store"))
    );
    // The writer meets the fault when it commits the turn's events (a locked database answers
    // only after its busy timeout).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let fault = loop {
        if let Some(fault) = relay.store().stats().fault() {
            break fault;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the store reports the fault while it lasts"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("fault reported: {fault}");
    clear();
    tokio::time::timeout(Duration::from_secs(30), relay.store().flush())
        .await
        .expect("the kept writes commit once the fault clears")
        .expect("no write was lost");
    assert_eq!(relay.store().stats().fault(), None, "the fault is over");
    drop(env);
    (relay, id)
}

/// The stored log is exactly what clients were shown.
async fn assert_log_complete(relay: &Relay, id: &str) {
    let shown = relay.events(id, 0, 100_000).await.unwrap();
    // Codex may still send a late notification after the turn ended (0.98 does): whatever
    // was shown before this flush is committed after it.
    relay.store().flush().await.unwrap();
    let mut stored: Vec<_> = relay
        .store()
        .events(id, 0, 100_000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| std::sync::Arc::new(serde_json::from_str(&e.json).unwrap()))
        .collect();
    assert_contiguous(&stored);
    assert!(stored.len() >= shown.len(), "every event shown is stored");
    stored.truncate(shown.len());
    let kinds = |l: &[std::sync::Arc<codex_relay_core::Envelope>]| {
        l.iter()
            .map(|e| format!("{}:{}", e.seq, e.ev.kind()))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        kinds(&stored),
        kinds(&shown),
        "the stored log is what clients saw"
    );
    assert_eq!(stored, shown, "the stored log is what clients saw");
    assert!(
        stored.iter().any(|e| matches!(&e.ev, Ev::TurnEnd { .. })),
        "the end of the turn is stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_disk_fills_mid_turn_and_nothing_is_lost_once_it_has_room() {
    let Some(fs) = Tmpfs::mount("48m") else {
        return;
    };
    let db = fs.path().join("relay.db").display().to_string();
    let filler = std::sync::Mutex::new(None);
    let (relay, id) = turn_with_a_fault(
        db,
        || *filler.lock().unwrap() = Some(fill(fs.path())),
        || {
            let _ = std::fs::remove_file(filler.lock().unwrap().take().unwrap());
        },
    )
    .await;
    assert_log_complete(&relay, &id).await;
    relay.shutdown().await;
}

/// The disk fills while a command runs and the relay is killed before it has room again. The
/// spool is on the same disk, so neither it nor the database kept what clients were shown after
/// that; the note beside the store (in the fallback directory) did. The next start appends an
/// `error` naming exactly those seqs, numbers the session's next events after them (never
/// reusing a seq a client saw), and the session continues.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_disk_fills_mid_turn_and_the_relay_is_killed_then_the_next_start_says_what_was_lost() {
    use codex_relay_core::SayInput;
    let Some(fs) = Tmpfs::mount("48m") else {
        return;
    };
    let notes = tempfile::tempdir().unwrap();
    let env = common::Env::start(NEWEST, Backend::Sqlite, LONG)
        .await
        .unwrap();
    env.relay.shutdown().await;
    env.model.route(
        "KILL-ME",
        [
            Reply::exec("sleep 2; echo slept", "call_kill"),
            Reply::text("done on a full disk"),
            Reply::text("here again"),
        ],
    );
    let mut config = env.config.clone();
    config.store = fs.path().join("relay.db").display().to_string();
    config.store_options.loss_notes = Some(notes.path().to_owned());
    let (cwd, disk) = (env.cwd(), fs.path().to_owned());
    let (id, shown, filler) = common::crash_after(config.clone(), move |relay| async move {
        let id = common::start_read_only(&relay, cwd, "KILL-ME run it").await;
        common::until_logged(&relay, &id, "the command's start", |ev| {
            matches!(ev, Ev::ToolCallStart { .. })
        })
        .await;
        relay.store().flush().await.unwrap();
        let filler = fill(&disk);
        common::until(&relay, &id, "the turn ends on a full disk", |s| {
            s.status == SessionStatus::Idle
        })
        .await;
        let shown = relay.events(&id, 0, 100_000).await.unwrap();
        (id, shown, filler)
    })
    .await;
    let last_shown = shown.last().unwrap().seq;
    assert!(
        std::fs::read_dir(notes.path()).unwrap().count() == 1,
        "the killed relay left a note in the fallback directory"
    );
    std::fs::remove_file(filler).unwrap();

    let relay = Relay::open(config).await.expect("the next start");
    let log = relay.events(&id, 0, 100_000).await.unwrap();
    let stored_through = log
        .iter()
        .take_while(
            |e| !matches!(&e.ev, Ev::Error { message, .. } if message.contains("were not stored")),
        )
        .map(|e| e.seq)
        .max()
        .unwrap();
    assert!(
        stored_through < last_shown,
        "the full disk cost events: stored through {stored_through}, shown through {last_shown}"
    );
    assert_eq!(
        &log[..stored_through as usize],
        &shown[..stored_through as usize],
        "what was stored is what clients saw"
    );
    let after = &log[stored_through as usize..];
    let Ev::Error { message, .. } = &after[0].ev else {
        panic!("an error opens what follows the stored log: {:?}", after[0]);
    };
    assert!(
        message.contains(&format!(
            "seqs {} to {last_shown} were shown live but are not in this log",
            stored_through + 1
        )),
        "{message}"
    );
    assert!(
        after[0].seq > last_shown,
        "no seq a client saw is used again: {} after {last_shown}",
        after[0].seq
    );
    for pair in after.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1, "contiguous after the gap");
    }
    assert_eq!(
        std::fs::read_dir(notes.path()).unwrap().count(),
        0,
        "the note is gone once the log says what it said"
    );

    // The session goes on.
    relay
        .say(&id, SayInput::text("KILL-ME are you there?"))
        .await
        .unwrap();
    common::until(&relay, &id, "the next turn", |s| {
        s.status == SessionStatus::Idle && s.result == Some(serde_json::json!("here again"))
    })
    .await;
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_locks_the_database_mid_turn_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    // The lock is held by a connection of this test (another pool: SQLite sees another
    // connection, as it would another process).
    let locker: std::sync::Arc<tokio::sync::Mutex<Option<Locker>>> = Default::default();
    let rt = tokio::runtime::Handle::current();
    let (l1, l2) = (locker.clone(), locker.clone());
    let (relay, id) = turn_with_a_fault(
        db.display().to_string(),
        || {
            tokio::task::block_in_place(|| {
                rt.block_on(async { *l1.lock().await = Some(Locker::lock(&db).await) })
            })
        },
        || {
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current()
                    .block_on(async { l2.lock().await.take().unwrap().release().await })
            })
        },
    )
    .await;
    assert_log_complete(&relay, &id).await;
    relay.shutdown().await;
}

/// Postgres stopped while a command runs, then started again: the live view goes on, the
/// fault is reported while it lasts, and once the server is back the log in Postgres is
/// complete, contiguous and what the client saw.
async fn postgres_restarts_mid_turn(version: &'static str) {
    let Some(pg) = codex_relay_testkit::postgres::Private::start() else {
        return;
    };
    let (relay, id) = turn_on(
        version,
        pg.url(),
        || tokio::task::block_in_place(|| pg.stop()),
        || tokio::task::block_in_place(|| pg.start_again()),
    )
    .await;
    assert_log_complete(&relay, &id).await;
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_is_stopped_and_started_mid_turn_codex_0_169_0() {
    postgres_restarts_mid_turn(codex_relay_testkit::NEWEST).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_is_stopped_and_started_mid_turn_codex_0_98_0() {
    postgres_restarts_mid_turn("0.98.0").await
}

/// A store closing while its Postgres is down gives up what it holds (there is no spool for
/// Postgres unless one is set) instead of hanging, counts the events, and leaves a note that
/// the next open reads: which events of which session were never stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_while_postgres_is_down_notes_exactly_which_events_were_lost() {
    use codex_relay_core::store::{LostEvents, Store, StoreOptions, StoredEvent};
    let Some(pg) = codex_relay_testkit::postgres::Private::start() else {
        return;
    };
    let notes = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        loss_notes: Some(notes.path().to_owned()),
        ..Default::default()
    };
    let store = Store::open_with(&pg.url(), options.clone()).await.unwrap();
    let event = |seq: i64| StoredEvent {
        session_id: "s1".into(),
        seq,
        time: seq,
        json: format!("{{\"seq\":{seq}}}"),
    };
    for seq in 1..=5 {
        store.append_event(event(seq));
    }
    store.flush().await.unwrap();
    tokio::task::block_in_place(|| pg.stop());
    for seq in 6..=8 {
        store.append_event(event(seq));
    }
    let started = std::time::Instant::now();
    let closed = store.close().await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "close does not wait for the database to come back: {:?}",
        started.elapsed()
    );
    assert!(
        closed
            .as_ref()
            .is_err_and(|e| e.to_string().contains("3 queued write(s)")),
        "{closed:?}"
    );
    assert_eq!(store.unstored_events(), 3);

    tokio::task::block_in_place(|| pg.start_again());
    let store = Store::open_with(&pg.url(), options).await.unwrap();
    assert_eq!(store.last_seq("s1").await.unwrap(), 5);
    let note = store.loss_note().expect("the next open finds the note");
    assert!(note.fault.contains("Connection refused"), "{}", note.fault);
    assert_eq!(
        note.sessions,
        vec![LostEvents {
            session_id: "s1".into(),
            first_seq: 6,
            last_seq: 8,
            count: 3
        }]
    );
    store.forget_loss_note();
    assert_eq!(std::fs::read_dir(notes.path()).unwrap().count(), 0);
    store.close().await.unwrap();
}

/// Holds SQLite's write lock on `db` from another connection until dropped or released.
struct Locker(sqlx::pool::PoolConnection<sqlx::Sqlite>);

impl Locker {
    async fn lock(db: &Path) -> Locker {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", db.display()))
            .await
            .unwrap();
        let mut conn = pool.acquire().await.unwrap();
        sqlx::query("BEGIN EXCLUSIVE")
            .execute(&mut *conn)
            .await
            .unwrap();
        Locker(conn)
    }

    async fn release(mut self) {
        sqlx::query("ROLLBACK").execute(&mut *self.0).await.unwrap();
    }
}

/// The errors of the log that say Codex is paused for the store.
async fn pause_errors(relay: &Relay, id: &str) -> Vec<String> {
    relay
        .events(id, 0, 100_000)
        .await
        .unwrap()
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::Error {
                message,
                retrying: true,
            } if message.contains("Codex is paused") => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// With a tiny bound on the writes held in memory, the store's gate closes while another
/// connection locks the database mid-turn: the session's snapshot shows the fault (and that
/// Codex is paused) while it lasts, the running session gets exactly one `error` saying so, and
/// once the lock is released the turn completes, the fault is gone from the snapshot and the
/// stored log is what was shown.
async fn the_queue_fills_during_a_lock(version: &'static str) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    let env = Env::start(version, Backend::Sqlite, LONG).await.unwrap();
    env.relay.shutdown().await;
    env.model.route(
        "PAUSE-ME",
        [
            Reply::exec("sleep 2; echo slept", "call_pause"),
            Reply::text("done after the pause"),
        ],
    );
    let mut config = env.config.clone();
    config.store = db.display().to_string();
    // Any write held closes the gate.
    config.store_options.max_queued_bytes = 1;
    let relay = Relay::open(config).await.expect("relay opens");
    let id = common::start_read_only(&relay, env.cwd(), "PAUSE-ME sleep a little").await;
    common::until_logged(&relay, &id, "the command's start", |ev| {
        matches!(ev, Ev::ToolCallStart { .. })
    })
    .await;
    relay.store().flush().await.unwrap();
    assert!(relay.status(&id).unwrap().store_fault.is_none());
    let locker = Locker::lock(&db).await;

    let during = common::until(
        &relay,
        &id,
        "the snapshot shows the fault and the pause",
        |s| s.store_fault.as_ref().is_some_and(|f| f.codex_paused),
    )
    .await;
    let fault = during.store_fault.clone().unwrap();
    assert!(fault.message.contains("locked"), "{fault:?}");
    assert!(fault.queued_writes > 0, "{fault:?}");
    assert!(
        during.status.is_running(),
        "Codex waits: {:?}",
        during.status
    );
    let health = relay.store_health();
    assert_eq!(health.backend, "sqlite");
    assert!(health.codex_paused, "{health:?}");
    assert_eq!(health.fault.map(|f| f.message), Some(fault.message.clone()));
    common::until_logged(&relay, &id, "the error saying Codex is paused", |ev| {
        matches!(ev, Ev::Error { message, retrying: true } if message.contains("Codex is paused"))
    })
    .await;
    // No more of them while the same closing lasts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let told = pause_errors(&relay, &id).await;
    assert_eq!(told.len(), 1, "one error per closing: {told:#?}");
    assert!(
        told[0].contains("cannot take writes") && told[0].contains("locked"),
        "{}",
        told[0]
    );
    assert!(relay.status(&id).unwrap().status.is_running());

    locker.release().await;
    let done = common::until(&relay, &id, "the turn ends once the lock is gone", |s| {
        s.status == SessionStatus::Idle
    })
    .await;
    assert_eq!(done.result, Some(serde_json::json!("done after the pause")));
    tokio::time::timeout(Duration::from_secs(30), relay.store().flush())
        .await
        .expect("the kept writes commit once the lock is gone")
        .expect("no write was lost");
    assert!(
        relay.status(&id).unwrap().store_fault.is_none(),
        "the fault is gone"
    );
    assert_eq!(relay.store_health().fault, None);
    assert_eq!(pause_errors(&relay, &id).await.len(), 1, "still one error");
    assert_log_complete(&relay, &id).await;
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_fills_during_a_lock_and_the_session_says_codex_is_paused_codex_0_169_0() {
    the_queue_fills_during_a_lock(codex_relay_testkit::NEWEST).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_fills_during_a_lock_and_the_session_says_codex_is_paused_codex_0_98_0() {
    the_queue_fills_during_a_lock("0.98.0").await
}
