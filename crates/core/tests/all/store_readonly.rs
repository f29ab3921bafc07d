//! The SQLite store's filesystem turns read-only in the middle of a turn over the real Codex,
//! by ext4's own error path (`errors=remount-ro` and the `trigger_fs_error` switch on a loop
//! device): the turn completes live, the fault is reported, the relay's shutdown gives up on
//! the dead store within its bound and counts what it could not store, and once the filesystem
//! is repaired the next relay's log says exactly what was lost, goes on after the last seq
//! clients saw, and carries what Codex persisted of the cut turn.
//!
//! A read-only remount is refused (EBUSY) while SQLite holds the file open for writing, hence
//! the error path. Needs root, a loop device, `mkfs.ext4` and the sysfs switch; without them the
//! test is skipped and says why. Recovery reads Codex's record with `thread/read` on 0.169;
//! 0.98 does not have it, so there the cut turn is closed as cancelled instead.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Backend, Env};
use codex_relay_core::{Ev, Relay, RelayConfig, SayInput, SessionStatus};
use codex_relay_testkit::skip::skip;
use codex_relay_testkit::{NEWEST, Reply};

const LONG: Duration = Duration::from_secs(300);

/// A 32 MiB ext4 image on a loop device, mounted with `errors=remount-ro`; unmounted and
/// detached on drop, also when the test panics.
struct Ext4 {
    dir: tempfile::TempDir,
    device: Option<String>,
    mounted: bool,
}

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Ext4 {
    fn new() -> Option<Ext4> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            skip("not root (a loop device and a mount are needed)");
            return None;
        }
        let mut fs = Ext4 {
            dir: tempfile::tempdir().unwrap(),
            device: None,
            mounted: false,
        };
        let image = fs.dir.path().join("image").display().to_string();
        std::fs::create_dir(fs.mnt()).unwrap();
        let made = run("truncate", &["-s", "32M", &image])
            .and_then(|_| run("mkfs.ext4", &["-q", "-F", &image]))
            .and_then(|_| run("losetup", &["-f", "--show", &image]));
        match made {
            Ok(device) => fs.device = Some(device),
            Err(e) => {
                skip(format_args!("no ext4 image on a loop device ({e})"));
                return None;
            }
        }
        if let Err(e) = fs.mount() {
            skip(format_args!("cannot mount the ext4 image ({e})"));
            return None;
        }
        if !fs.sysfs_switch().exists() {
            skip(format_args!(
                "{} does not exist (this kernel cannot trigger an ext4 error)",
                fs.sysfs_switch().display()
            ));
            return None;
        }
        Some(fs)
    }

    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    fn device(&self) -> &str {
        self.device.as_deref().expect("attached")
    }

    fn sysfs_switch(&self) -> PathBuf {
        let name = Path::new(self.device()).file_name().unwrap().to_owned();
        Path::new("/sys/fs/ext4")
            .join(name)
            .join("trigger_fs_error")
    }

    fn mount(&mut self) -> Result<(), String> {
        let mnt = self.mnt().display().to_string();
        run(
            "mount",
            &[
                "-o",
                "errors=remount-ro",
                self.device().to_owned().as_str(),
                &mnt,
            ],
        )?;
        self.mounted = true;
        Ok(())
    }

    fn switch(&self) -> Switch {
        Switch {
            mnt: self.mnt(),
            sysfs: self.sysfs_switch(),
        }
    }

    /// Unmount, `e2fsck -fy`, mount read-write again.
    fn repair(&mut self) {
        let mnt = self.mnt().display().to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Err(e) = run("umount", &[&mnt]) {
            assert!(
                Instant::now() < deadline,
                "the old relay let go of the files: {e}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        self.mounted = false;
        // 1 and 2 mean "errors were fixed". Right after the unmount something else (udev's
        // probe) may hold the device for a moment: e2fsck then says it is in use. On a loaded
        // machine that moment was seen to last past 10 s.
        let deadline = Instant::now() + Duration::from_secs(60);
        let fsck = loop {
            let fsck = Command::new("e2fsck")
                .args(["-fy", self.device()])
                .output()
                .unwrap();
            let busy = String::from_utf8_lossy(&fsck.stdout).contains("is in use");
            if !busy || Instant::now() >= deadline {
                break fsck;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(
            matches!(fsck.status.code(), Some(0..=2)),
            "e2fsck repaired the filesystem: {}",
            String::from_utf8_lossy(&fsck.stdout)
        );
        self.mount().expect("mounted read-write again");
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg("-l").arg(self.mnt()).status();
        }
        if let Some(device) = &self.device {
            let _ = Command::new("losetup").args(["-d", device]).status();
        }
    }
}

/// What makes the mounted filesystem fail, and what says it did.
#[derive(Clone)]
struct Switch {
    mnt: PathBuf,
    sysfs: PathBuf,
}

impl Switch {
    /// Makes the filesystem fail: from now on every write gets EROFS. What was committed
    /// before is synced first (ext4 drops dirty pages when it turns read-only, as a power loss
    /// would lose SQLite's unsynced WAL under `synchronous=NORMAL`).
    fn fail(&self) {
        run("sync", &["-f", &self.mnt.display().to_string()]).unwrap();
        std::fs::write(&self.sysfs, "1").expect("trigger the ext4 error");
    }

    fn mount_options(&self) -> String {
        let mnt = self.mnt.display().to_string();
        std::fs::read_to_string("/proc/mounts")
            .unwrap()
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(mnt.as_str()))
            .and_then(|l| l.split(' ').nth(3))
            .unwrap_or_default()
            .to_owned()
    }
}

/// What the first relay saw before it shut down.
struct FirstRun {
    id: String,
    shown: Vec<std::sync::Arc<codex_relay_core::Envelope>>,
    unstored: usize,
    shutdown_took: Duration,
}

/// The scripted model, a relay config whose SQLite store is on the ext4 image, and the
/// directory loss notes go to.
async fn setup(fs: &Ext4, version: &'static str) -> (Env, RelayConfig, tempfile::TempDir) {
    let env = Env::start(version, Backend::Sqlite, LONG).await.unwrap();
    env.relay.shutdown().await;
    env.model.route(
        "READ-ONLY",
        [
            Reply::exec("sleep 2; echo slept", "call_ro"),
            Reply::text("done on a read-only store"),
        ],
    );
    env.model
        .route("AFTER-REPAIR", [Reply::text("back on a good disk")]);
    let notes = tempfile::tempdir().unwrap();
    let mut config = env.config.clone();
    config.store = fs.mnt().join("relay.db").display().to_string();
    config.store_options.loss_notes = Some(notes.path().to_owned());
    (env, config, notes)
}

/// Runs the turn, fails the filesystem while its command runs, and shuts the relay down.
async fn first_run(fs: &Ext4, config: RelayConfig, cwd: String) -> FirstRun {
    // The first relay runs on a runtime of its own: when it ends, every file it held on the
    // broken filesystem is closed, so the filesystem can be unmounted and repaired.
    let switch = fs.switch();
    let first = common::crash_after(config.clone(), move |relay: Relay| async move {
        let id = common::start_read_only(&relay, cwd, "READ-ONLY run something").await;
        common::until_logged(&relay, &id, "the command's start", |ev| {
            matches!(ev, Ev::ToolCallStart { .. })
        })
        .await;
        relay.store().flush().await.unwrap();
        switch.fail();
        let done = common::until(&relay, &id, "the turn ends on a read-only store", |s| {
            s.status == SessionStatus::Idle
        })
        .await;
        assert_eq!(
            done.result,
            Some(serde_json::json!("done on a read-only store")),
            "the live view goes on"
        );
        assert!(
            switch.mount_options().contains("ro"),
            "the filesystem is read-only: {}",
            switch.mount_options()
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        let fault = loop {
            if let Some(fault) = relay.store().stats().fault() {
                break fault;
            }
            assert!(Instant::now() < deadline, "the store reports the fault");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        eprintln!("fault reported: {fault}");
        let started = Instant::now();
        let unstored = relay.shutdown_counting().await;
        let shutdown_took = started.elapsed();
        FirstRun {
            shown: relay.events(&id, 0, 100_000).await.unwrap(),
            id,
            unstored,
            shutdown_took,
        }
    })
    .await;
    let shown_head = first.shown.last().unwrap().seq;
    eprintln!(
        "shutdown took {:?}; {} events not stored; clients saw up to seq {shown_head}",
        first.shutdown_took, first.unstored
    );
    assert!(
        first.shutdown_took < codex_relay_core::relay::STORE_FAULT_AT_SHUTDOWN * 3,
        "shutdown does not hang on the dead store: {:?}",
        first.shutdown_took
    );
    first
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_turns_read_only_mid_turn_and_the_next_start_says_exactly_what_was_lost() {
    read_only_mid_turn(NEWEST).await
}

/// Codex 0.98 has no `thread/read`: the loss is reported the same way, and the cut turn is
/// closed as cancelled instead of with Codex's record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_turns_read_only_mid_turn_codex_0_98_0() {
    read_only_mid_turn("0.98.0").await
}

async fn read_only_mid_turn(version: &'static str) {
    let Some(mut fs) = Ext4::new() else {
        return;
    };
    let (env, config, notes) = setup(&fs, version).await;
    let first = first_run(&fs, config.clone(), env.cwd()).await;
    let shown_head = first.shown.last().unwrap().seq;
    fs.repair();
    let relay = Relay::open(config.clone())
        .await
        .expect("the next relay opens");
    let id = first.id.as_str();
    let stored: Vec<codex_relay_core::Envelope> = relay
        .store()
        .events(id, 0, 100_000)
        .await
        .unwrap()
        .iter()
        .map(|e| serde_json::from_str(&e.json).unwrap())
        .collect();
    // The log: what the store held (exactly what clients saw up to there), then a gap over
    // the seqs clients saw that were never stored, then the error that says so.
    let kept = stored.iter().take_while(|e| e.seq <= shown_head).count();
    for (i, e) in stored[..kept].iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "the stored part is contiguous");
        assert_eq!(*e, *first.shown[i], "the stored part is what clients saw");
    }
    let head = kept as u64;
    assert!(head < shown_head, "the fault cut the stored log short");
    assert!(
        first.unstored > 0 && first.unstored as u64 <= shown_head - head,
        "shutdown counted the events it gave up: {} of {}",
        first.unstored,
        shown_head - head
    );
    let after_gap = &stored[kept..];
    assert_eq!(
        after_gap[0].seq,
        shown_head + 1,
        "no seq a client saw is reused"
    );
    let Ev::Error { message, .. } = &after_gap[0].ev else {
        panic!("the log goes on with an error: {:?}", after_gap[0].ev)
    };
    assert!(
        message.starts_with(&format!("events after seq {head} were not stored"))
            && message.contains(&format!("seqs {} to {shown_head}", head + 1)),
        "the error says exactly what was lost: {message}"
    );
    assert!(message.contains("could not take writes ("), "{message}");
    eprintln!("stored head {head}, shown head {shown_head}; the log says: {message}");
    for (i, e) in after_gap.iter().enumerate() {
        assert_eq!(e.seq, shown_head + 1 + i as u64, "contiguous after the gap");
    }
    // What Codex persisted of the cut turn is appended (0.169: thread/read), and the turn is
    // closed.
    assert_eq!(
        after_gap.iter().any(|e| matches!(&e.ev,
            Ev::Text { text, thinking: false } if text == "done on a read-only store")),
        version == NEWEST,
        "Codex's record of the turn is in the log: {after_gap:#?}"
    );
    assert!(
        after_gap
            .iter()
            .any(|e| matches!(&e.ev, Ev::TurnEnd { .. })),
        "the cut turn is closed"
    );
    // A client whose cursor is anywhere in the gap, or at the last seq it saw, reads on from
    // the error.
    for cursor in [head, head + 1, shown_head] {
        let next = relay.events(id, cursor, 1).await.unwrap();
        assert_eq!(next[0].seq, shown_head + 1, "cursor {cursor}");
    }
    // The status's last error is the loss, unless the turn had to be closed without Codex's
    // record (0.98): then it is the later error that says so.
    let snap = relay.status(id).unwrap();
    let last = if version == NEWEST {
        "were not stored"
    } else {
        "the relay restarted while this turn was running"
    };
    assert!(
        snap.last_error.as_deref().is_some_and(|e| e.contains(last)),
        "the status says so: {:?}",
        snap.last_error
    );
    assert_eq!(relay.store().loss_note(), None, "the note was used up");
    assert_eq!(std::fs::read_dir(notes.path()).unwrap().count(), 0);

    // The session continues on the repaired store.
    relay
        .say(
            id,
            SayInput {
                text: "AFTER-REPAIR hello".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let done = common::until(&relay, id, "the next turn ends", |s| {
        s.status == SessionStatus::Idle && s.turn_count >= 2
    })
    .await;
    assert_eq!(done.result, Some(serde_json::json!("back on a good disk")));
    relay.shutdown().await;
    drop(env);
}

/// The same fault with the spool on another filesystem: the writes the database never took
/// are still in the spool, so shutdown loses nothing and the next open replays them: the log
/// is exactly what clients saw, with no gap and nothing to report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_spool_on_another_disk_a_read_only_database_loses_nothing() {
    let Some(mut fs) = Ext4::new() else {
        return;
    };
    let (env, mut config, notes) = setup(&fs, NEWEST).await;
    let spool = tempfile::tempdir().unwrap();
    config.store_options.spool = Some(spool.path().to_owned());
    let first = first_run(&fs, config.clone(), env.cwd()).await;
    assert_eq!(first.unstored, 0, "the spool holds every write");

    fs.repair();
    let relay = Relay::open(config).await.expect("the next relay opens");
    let stored: Vec<std::sync::Arc<codex_relay_core::Envelope>> = relay
        .store()
        .events(&first.id, 0, 100_000)
        .await
        .unwrap()
        .iter()
        .map(|e| std::sync::Arc::new(serde_json::from_str(&e.json).unwrap()))
        .collect();
    common::assert_contiguous(&stored);
    assert_eq!(stored, first.shown, "the stored log is what clients saw");
    assert_eq!(relay.store().loss_note(), None);
    assert_eq!(std::fs::read_dir(notes.path()).unwrap().count(), 0);
    relay.shutdown().await;
    drop(env);
}
