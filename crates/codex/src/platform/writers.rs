//! Which process writes a Codex thread: a Codex app-server keeps the rollout file of every
//! thread it has loaded open (`…/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`), and a
//! second app-server's `thread/resume` of it fails with "already has an active writer". The
//! holders are found from `/proc/<pid>/fd` (only what this user may read: root sees all).

/// A process that holds a thread's rollout file open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// Its command line, as `/proc/<pid>/cmdline` has it (arguments joined by spaces, cut at
    /// 300 characters).
    pub command: String,
}

impl Holder {
    /// Whether it is the Codex daemon the terminal uses (`codex app-server daemon start` runs
    /// `app-server --listen unix://… --managed-daemon`), which a relay can attach to.
    pub fn is_daemon(&self) -> bool {
        self.command.contains("--managed-daemon")
            || (self.command.contains("app-server") && self.command.contains("unix://"))
    }
}

/// The processes (other than this one) holding the rollout file of `thread_id` open, by pid.
pub fn holders_of_thread(thread_id: &str) -> Vec<Holder> {
    let suffix = format!("-{thread_id}.jsonl");
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<Holder> = procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|target| {
                        target
                            .file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.ends_with(&suffix))
                    })
                })
            })
        })
        .map(|pid| Holder {
            pid,
            command: command_line(pid),
        })
        .collect();
    found.sort_by_key(|h| h.pid);
    found
}

fn command_line(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let text = String::from_utf8_lossy(&raw)
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_holding_the_rollout_file_is_found_with_its_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let id = "01a21e47-0d83-7812-acd5-64e677a2d7fb";
        let path = dir
            .path()
            .join(format!("rollout-2026-11-27T18-31-42-{id}.jsonl"));
        std::fs::write(&path, b"{}\n").unwrap();
        // A child that holds it open (this process is left out of the search).
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec 3<\"$1\"; read _ ")
            .arg("sh")
            .arg(&path)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let found = loop {
            let found = holders_of_thread(id);
            if !found.is_empty() || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].pid, child.id());
        assert!(found[0].command.starts_with("sh -c"), "{found:?}");
        assert!(!found[0].is_daemon());
        assert!(holders_of_thread("no-such-thread").is_empty());
    }
}
