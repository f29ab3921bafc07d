//! Process-table helpers for tests: which processes are in a process group, is a pid alive.

/// Pids of live (non-zombie) processes whose process group is `pgid`, read from `/proc`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // Fields after the parenthesised command name: state ppid pgrp ...
            let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.len() > 2 && fields[0] != "Z" && fields[2].parse::<u32>().ok() == Some(pgid)
        })
        .collect()
}

/// Polls `pids` until it is empty or `timeout` passes; returns what is left.
async fn wait_empty(timeout: std::time::Duration, pids: impl Fn() -> Vec<u32>) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let left = pids();
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Waits up to `timeout` for the group to be empty; returns what is left.
pub async fn wait_group_gone(pgid: u32, timeout: std::time::Duration) -> Vec<u32> {
    wait_empty(timeout, || group_members(pgid)).await
}

/// Pids of live processes whose command line contains `needle`.
pub fn pids_with_cmdline(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
            !zombie
                && String::from_utf8_lossy(&raw)
                    .replace('\0', " ")
                    .contains(needle)
        })
        .collect()
}

/// Pids of live (non-zombie) processes whose environment holds exactly `entry` (`KEY=value`),
/// e.g. every process started with one test's `CODEX_HOME`.
pub fn pids_with_env(entry: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
            !zombie
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|e| e == entry.as_bytes()))
        })
        .collect()
}

/// Waits up to `timeout` until no process has `entry` in its environment; returns what is left.
pub async fn wait_env_gone(entry: &str, timeout: std::time::Duration) -> Vec<u32> {
    wait_empty(timeout, || pids_with_env(entry)).await
}
