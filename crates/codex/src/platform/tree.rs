//! Process trees: the processes one Codex app-server started, found by a marker in their
//! environment (Codex 0.169 runs some children, shell snapshots and sandboxed commands, in
//! sessions of their own, outside its process group), a root's descendants by parent pid,
//! and a watchdog that cleans a tree up if the relay dies without doing it.

/// The environment variable every process of one app-server's tree inherits.
pub const MARKER_VAR: &str = "CODEX_RELAY_TREE";

/// A marker unique to one spawn.
pub(crate) fn new_marker() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!("{:016x}", h.finish())
}

/// Processes whose environment carries `marker` (those this user may read).
pub fn marked(marker: &str) -> Vec<u32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|entry| entry == needle.as_bytes())
            })
        })
        .collect()
}

/// How long a tree asked to stop (SIGTERM) has before what is left is killed (SIGKILL). The
/// user's shell start-up files run inside Codex's tree (its login-shell snapshot): killed at
/// once, some leave locks behind (a `pyenv rehash` killed that way makes every later shell of
/// the user wait 60 s for its lock).
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// A tree asked to stop: what to kill if it is still there after the grace.
#[derive(Debug, Clone)]
pub struct Stopping {
    pgid: u32,
    outside: Vec<Proc>,
}

impl Stopping {
    /// Whether anything of the tree still runs (a process of the group, or one recorded).
    pub fn any_left(&self) -> bool {
        (self.pgid != 0 && !group_members(self.pgid).is_empty())
            || self
                .outside
                .iter()
                .any(|&(pid, start)| stat(pid).is_some_and(|(_, s)| s == start))
    }

    /// SIGKILLs what is left, now.
    pub fn kill_now(&self) {
        super::process::signal_group(self.pgid, libc::SIGKILL);
        signal_all(&self.outside, libc::SIGKILL);
    }
}

/// Asks process group `pgid` (0: none), every process carrying `marker` (if given) and `procs`
/// to stop with SIGTERM and returns at once; after `grace` a short-lived thread SIGKILLs
/// whatever of them is still running (a recorded process only if it is still the same one). A
/// caller that must not return before the tree is gone (the relay shutting down) waits the
/// grace itself and calls [`Stopping::kill_now`].
pub fn stop(
    pgid: u32,
    marker: Option<&str>,
    procs: &[Proc],
    grace: std::time::Duration,
) -> Stopping {
    let mut outside: Vec<Proc> = procs.to_vec();
    if let Some(m) = marker {
        for pid in marked(m) {
            if let Some((_, start)) = stat(pid)
                && !outside.iter().any(|(p, _)| *p == pid)
            {
                outside.push((pid, start));
            }
        }
    }
    super::process::signal_group(pgid, libc::SIGTERM);
    signal_all(&outside, libc::SIGTERM);
    let stopping = Stopping { pgid, outside };
    if !stopping.outside.is_empty() {
        tracing::debug!(
            count = stopping.outside.len(),
            "asked what codex left outside its group to stop"
        );
    }
    let later = stopping.clone();
    let spawned = std::thread::Builder::new()
        .name("codex-relay-stop".into())
        .spawn(move || {
            std::thread::sleep(grace);
            later.kill_now();
        });
    if spawned.is_err() {
        stopping.kill_now();
    }
    stopping
}

/// The processes of group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| {
                    let (_, rest) = t.rsplit_once(')')?;
                    rest.split_whitespace().nth(2)?.parse::<u32>().ok()
                })
                == Some(pgid)
        })
        .collect()
}

/// Signals each process that is still the one recorded.
fn signal_all(procs: &[Proc], signal: i32) {
    for &(pid, start) in procs {
        if stat(pid).is_some_and(|(_, s)| s == start) {
            // SAFETY: kill(2) on a pid we just checked is the recorded process.
            unsafe {
                libc::kill(pid as libc::pid_t, signal);
            }
        }
    }
}

/// Kills a marked tree if the relay dies without doing it (SIGKILL, a crash): a small `sh` that
/// polls the relay's pid once a second and then kills every process carrying the marker. The
/// relay stops it itself when it cleans up normally.
pub(crate) struct Watchdog(Option<std::process::Child>);

const WATCHDOG: &str = r#"r=$1; m="CODEX_RELAY_TREE=$2"
while kill -0 "$r" 2>/dev/null; do sleep 1; done
for f in /proc/[0-9]*/environ; do
  if tr '\0' '\n' < "$f" 2>/dev/null | grep -qxF "$m"; then
    d=${f%/environ}; kill -9 "${d#/proc/}" 2>/dev/null
  fi
done"#;

impl Watchdog {
    pub fn start(marker: &str) -> Watchdog {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", WATCHDOG, "codex-relay-watchdog"])
            .arg(std::process::id().to_string())
            .arg(marker)
            // Commands Codex runs can read this process's environment: nothing of the relay's
            // goes into it (its database URL, its token file's path), only where the tools are.
            .env_clear()
            .envs(std::env::var_os("PATH").map(|p| ("PATH", p)))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0);
        let child = super::reaper::spawn_owned(|| cmd.spawn(), |c| Some(c.id()));
        match child {
            Ok(c) => Watchdog(Some(c)),
            Err(e) => {
                tracing::warn!(
                    "no watchdog for codex's process tree (if the relay is killed, what codex started may outlive it): {e}"
                );
                Watchdog(None)
            }
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            // Its whole group: the `sleep` it may be in would otherwise outlive it by a second.
            // SAFETY: kill(2) on the watchdog's own process group (it leads it); no memory
            // preconditions.
            unsafe {
                libc::kill(-(c.id() as libc::pid_t), libc::SIGKILL);
            }
            let _ = c.wait();
        }
    }
}

/// A process: its pid and its start time (so a reused pid is never killed by mistake).
pub type Proc = (u32, u64);

/// What `/proc/<pid>/stat` says of a process (readable for every process, whoever owns it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub ppid: u32,
    /// Clock ticks after boot: with the pid, names one process for good.
    pub start: u64,
    /// `R`, `S`, ..., `Z` (a zombie).
    pub state: u8,
}

pub(crate) fn read_stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state, ppid, ..., starttime is the 20th.
    Some(Stat {
        state: *fields.first()?.as_bytes().first()?,
        ppid: fields.get(1)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// `(ppid, starttime)` from `/proc/<pid>/stat`.
pub(crate) fn stat(pid: u32) -> Option<(u32, u64)> {
    read_stat(pid).map(|s| (s.ppid, s.start))
}

/// This process.
pub fn own() -> Proc {
    let pid = std::process::id();
    (pid, stat(pid).map_or(0, |(_, start)| start))
}

/// Every live descendant of `root` (children, grandchildren, ...), whatever their group or
/// session. Empty where there is no `/proc`.
pub fn descendants(root: u32) -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let all: Vec<(u32, u32, u64)> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| stat(pid).map(|(ppid, start)| (pid, ppid, start)))
        .collect();
    let mut out: Vec<Proc> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid, start) in &all {
            if ppid == parent && !out.iter().any(|(p, _)| *p == pid) {
                out.push((pid, start));
                frontier.push(pid);
            }
        }
    }
    out
}

/// SIGKILLs each process that is still the one recorded.
pub fn kill_all(procs: &[Proc]) {
    signal_all(procs, libc::SIGKILL);
}

#[cfg(test)]
mod stop_tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    fn spawn_group(script: &str) -> std::process::Child {
        std::process::Command::new("sh")
            .args(["-c", script])
            .process_group(0)
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_tree_is_asked_first_and_killed_only_if_it_does_not_go() {
        let dir = tempfile::tempdir().unwrap();
        let note = dir.path().join("stopped");
        // Asked with SIGTERM, it cleans up (its trap runs) and leaves.
        let mut polite = spawn_group(&format!(
            "trap 'echo asked > {}; exit 0' TERM; while :; do sleep 0.05; done",
            note.display()
        ));
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let s = stop(polite.id(), None, &[], Duration::from_secs(5));
        let status = polite.wait().unwrap();
        assert!(status.success(), "it exited by its own trap: {status:?}");
        assert!(t.elapsed() < Duration::from_secs(4), "it went when asked");
        assert_eq!(std::fs::read_to_string(&note).unwrap().trim(), "asked");
        std::thread::sleep(Duration::from_millis(300));
        assert!(!s.any_left());
        // One that ignores SIGTERM is killed after the grace.
        let mut stubborn = spawn_group("trap '' TERM; while :; do sleep 0.05; done");
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        stop(stubborn.id(), None, &[], Duration::from_millis(500));
        let status = stubborn.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        assert!(
            t.elapsed() >= Duration::from_millis(450),
            "not before the grace"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grandchild_in_its_own_session_is_found_and_killed() {
        // sh → setsid sleep: the sleep leaves sh's group and session, as Codex's sandbox does.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 & wait"])
            .spawn()
            .unwrap();
        let mut found = Vec::new();
        for _ in 0..100 {
            found = descendants(child.id());
            if !found.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!found.is_empty(), "the grandchild is found");
        kill_all(&found);
        // sh waits for the sleep: it ends at once only if the sleep was killed.
        let mut ended = false;
        for _ in 0..250 {
            if child.try_wait().unwrap().is_some() {
                ended = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(ended, "the grandchild was not killed");
        for (pid, start) in found {
            assert!(
                stat(pid).is_none_or(|(_, s)| s != start),
                "{pid} still runs"
            );
        }
    }
}
