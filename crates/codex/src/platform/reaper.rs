//! The relay as the subreaper of what its Codex processes leave when they die. Codex is the
//! subreaper of the commands it runs, so a command that daemonizes stays under it; but a
//! command can kill its Codex (same user), and its orphans would then be re-parented to init,
//! out of every tree the peer check recognises. With the relay a subreaper too they come to
//! the relay instead: still inside. The relay then reaps those that exit and stops those still
//! running (they belong to a Codex that is gone). Its own children, spawned through
//! [`spawn_owned`], are never touched: their owners wait for them.

use std::collections::HashMap;
use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::tree::{self, Proc};

/// The children this process spawned itself (pid, start time).
static OWNED: Mutex<Vec<Proc>> = Mutex::new(Vec::new());
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// How often adopted children are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Makes this process the subreaper of its descendants and starts a thread that reaps the
/// children it adopts once they exit, and stops those still running (SIGTERM, SIGKILL after
/// [`tree::STOP_GRACE`]). Only for a program all of whose children are spawned through
/// [`spawn_owned`] (the codex-relay binary): another child could be reaped under its owner's
/// feet. Later calls do nothing.
pub fn adopt_orphans() -> io::Result<()> {
    if ADOPTING.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    // SAFETY: prctl on the calling process only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) } != 0 {
        ADOPTING.store(false, Ordering::Release);
        return Err(io::Error::last_os_error());
    }
    std::thread::Builder::new()
        .name("codex-relay-reaper".into())
        .spawn(|| {
            let mut asked = HashMap::new();
            loop {
                std::thread::sleep(SWEEP_EVERY);
                sweep(&mut asked, false);
            }
        })?;
    Ok(())
}

/// Spawns a child with `spawn` and records it as this process's own (`pid` names it), so the
/// reaper leaves it to its owner. Every child of a program that calls [`adopt_orphans`] is
/// spawned through it.
pub fn spawn_owned<T>(
    spawn: impl FnOnce() -> io::Result<T>,
    pid: impl FnOnce(&T) -> Option<u32>,
) -> io::Result<T> {
    // Held across the spawn: the reaper cannot see the child before it is recorded.
    let mut owned = OWNED.lock().unwrap_or_else(|e| e.into_inner());
    let child = spawn()?;
    if let Some(pid) = pid(&child)
        && let Some((_, start)) = tree::stat(pid)
    {
        owned.push((pid, start));
    }
    Ok(child)
}

/// Kills every adopted child at once and reaps it: the relay is on its way out, and what a
/// dead Codex left must not outlive it.
pub fn stop_adopted() {
    if ADOPTING.load(Ordering::Acquire) {
        sweep(&mut HashMap::new(), true);
    }
}

/// One pass over this process's children: adopted ones that exited are reaped; running ones
/// are asked to stop, and killed once asked more than the grace ago (at once if `now`).
fn sweep(asked: &mut HashMap<Proc, Instant>, now: bool) {
    let mut owned = OWNED.lock().unwrap_or_else(|e| e.into_inner());
    owned.retain(|&(pid, start)| tree::stat(pid).is_some_and(|(_, s)| s == start));
    let mut seen = Vec::new();
    for pid in children() {
        let Some(stat) = tree::read_stat(pid) else {
            continue;
        };
        let child = (pid, stat.start);
        if owned.contains(&child) {
            continue;
        }
        seen.push(child);
        if stat.state == b'Z' {
            // SAFETY: waitpid on a child of ours that no owner waits for (not spawned by us).
            unsafe {
                libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG);
            }
            continue;
        }
        let signal = match asked.get(&child) {
            _ if now => libc::SIGKILL,
            Some(when) if when.elapsed() >= tree::STOP_GRACE => libc::SIGKILL,
            Some(_) => continue,
            None => {
                tracing::debug!(pid, "stopping a process left by a Codex that is gone");
                asked.insert(child, Instant::now());
                libc::SIGTERM
            }
        };
        // SAFETY: kill(2) on a child of ours just read as this very process.
        unsafe {
            libc::kill(pid as libc::pid_t, signal);
        }
        if now {
            // SAFETY: waiting for the child just killed (not one an owner waits for).
            unsafe {
                libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
        }
    }
    asked.retain(|p, _| seen.contains(p));
}

/// The pids of this process's children (those of all its threads).
fn children() -> Vec<u32> {
    let me = std::process::id();
    let mut out = Vec::new();
    let listed = std::fs::read_dir("/proc/self/task").ok().and_then(|tasks| {
        for task in tasks.flatten() {
            let text = std::fs::read_to_string(task.path().join("children")).ok()?;
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
        Some(())
    });
    if listed.is_some() {
        return out;
    }
    // Without /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN): every process's parent.
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|&pid| tree::stat(pid).is_some_and(|(ppid, _)| ppid == me))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scenario runs in a child process of its own (this test binary again, running only
    /// it): a subreaper that reaps what it adopts must not share a process with other tests.
    #[test]
    fn orphans_are_adopted_and_stopped_while_own_children_are_left_to_their_owners() {
        if std::env::var_os("CODEX_RELAY_REAPER_SCENARIO").is_some() {
            return scenario();
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "platform::reaper::tests::orphans_are_adopted_and_stopped_while_own_children_are_left_to_their_owners",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CODEX_RELAY_REAPER_SCENARIO", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "the scenario failed:\n{text}"
        );
    }

    fn scenario() {
        adopt_orphans().unwrap();
        // An owned child that starts a daemon and exits 7: the daemon (a `sleep` in a session
        // of its own) is re-parented to us.
        let mut sh = spawn_owned(
            || {
                std::process::Command::new("sh")
                    .args(["-c", "setsid sleep 300 & echo $! > \"$0\"; exit 7"])
                    .arg(pid_file())
                    .spawn()
            },
            |c| Some(c.id()),
        )
        .unwrap();
        // Its owner gets its status: the reaper did not take it.
        assert_eq!(sh.wait().unwrap().code(), Some(7));
        let daemon: u32 = std::fs::read_to_string(pid_file())
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // It came to us, not to init (unless the reaper already took it).
        let parent = tree::stat(daemon).map(|(ppid, _)| ppid);
        assert!(
            parent.is_none_or(|p| p == std::process::id()),
            "the daemon's parent is {parent:?}"
        );
        // The reaper stops it and reaps it: its pid goes away entirely (no zombie left).
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut wait = Duration::from_millis(50);
        while tree::stat(daemon).is_some_and(|(ppid, _)| ppid == std::process::id()) {
            assert!(Instant::now() < deadline, "the daemon is still there");
            std::thread::sleep(wait);
            wait = (wait * 2).min(Duration::from_millis(500));
        }
        let _ = std::fs::remove_file(pid_file());
    }

    fn pid_file() -> std::path::PathBuf {
        std::env::temp_dir().join(format!("codex-relay-reaper-{}", std::process::id()))
    }
}
