//! The process tree under Codex's app-server: Codex 0.169 runs commands in a sandbox helper with its own session, outside the app-server's process group, so stopping Codex also stops that tree.

/// A process: its pid and its start time (so a reused pid is never killed by mistake).
pub(crate) type Proc = (u32, u64);

/// `(pid, ppid, starttime)` from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state, ppid, ..., starttime is the 20th.
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((ppid, start))
}

/// Every live descendant of `root` (children, grandchildren, ...), whatever their group or
/// session. Empty where there is no `/proc`.
pub(crate) fn descendants(root: u32) -> Vec<Proc> {
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
pub(crate) fn kill_all(procs: &[Proc]) {
    for &(pid, start) in procs {
        if stat(pid).is_some_and(|(_, s)| s == start) {
            // SAFETY: kill(2) on a pid we just checked is the recorded process.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
        }
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
