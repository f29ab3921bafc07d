//! Process settings: a Codex child in its own process group, killed with the relay, keeping its
//! orphans; group signals; and the relay's own hardening against processes of the same user.

use std::ffi::OsStr;

/// Sets up `cmd` so the child leads a new process group, receives SIGKILL when the thread that
/// spawned it dies (the relay was killed), and becomes the subreaper of its descendants: a
/// command that daemonizes (double fork, `setsid`) is re-parented to Codex, not to init, so it
/// stays in Codex's tree, where [`super::sockets`] and [`super::tree`] find it.
pub fn configure_child(cmd: &mut tokio::process::Command) {
    cmd.process_group(0);
    // SAFETY: prctl is async-signal-safe and touches only the calling (child) process; both
    // settings survive the execve that follows (PDEATHSIG is kept for a non-setuid binary,
    // the subreaper flag always).
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
            Ok(())
        });
    }
}

/// Sends `signal` to every process in group `pgid` (0 does nothing).
pub fn signal_group(pgid: u32, signal: i32) {
    if pgid == 0 {
        return;
    }
    // SAFETY: killpg has no memory-safety preconditions; a stale group id gives ESRCH.
    unsafe {
        libc::killpg(pgid as libc::pid_t, signal);
    }
}

/// Whether a variable of the relay's environment is one of its own secrets or settings, never
/// passed to Codex (and so never seen by the commands the model runs): every `CODEX_RELAY_*`.
pub fn is_relay_variable(name: &OsStr) -> bool {
    name.as_encoded_bytes().starts_with(b"CODEX_RELAY_")
}

/// Makes this process's memory and environment unreadable by other processes of the same user
/// (`/proc/<pid>/environ`, `mem`, `fd`; ptrace), and overwrites the values of the variables
/// `names` in the environment block the process started with, where `/proc/<pid>/environ`
/// would otherwise show them for the life of the process even after `remove_var`. Call it
/// first thing in `main`, before any other thread exists, after reading those variables; they
/// are removed from the environment too. Root can still read everything.
pub fn harden_self(names: &[&str]) {
    // SAFETY: prctl on the calling process only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
    }
    for name in names {
        let Ok(c_name) = std::ffi::CString::new(*name) else {
            continue;
        };
        // SAFETY: getenv returns a pointer into the environment block (or null); no other
        // thread runs yet (the caller's contract), so nothing reads or changes the environment
        // meanwhile. The value's bytes are overwritten in place, never past its terminator.
        unsafe {
            let value = libc::getenv(c_name.as_ptr());
            if !value.is_null() {
                let len = libc::strlen(value);
                std::ptr::write_bytes(value, b'x', len);
            }
            std::env::remove_var(name);
        }
    }
}

/// Asks for SIGTERM when this process's parent dies, if that parent is `expected` (the npm
/// launcher passes its own pid): a launcher killed with SIGKILL cannot pass a signal on, and
/// the relay would live on until its stdin closed. The SIGTERM is then handled as any stop
/// (Codex stopped, the store flushed). If the parent died already, SIGTERM comes at once.
/// Call before any thread exists. Returns whether it was set.
pub fn stop_with_parent(expected: u32) -> bool {
    // SAFETY: getppid, prctl and raise act on the calling process only.
    unsafe {
        if libc::getppid() as u32 != expected {
            return false;
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        // The parent may have died before prctl: then no signal would come.
        if libc::getppid() as u32 != expected {
            libc::raise(libc::SIGTERM);
        }
    }
    true
}

/// Raises this process's soft limit on open files to its hard limit (at most `cap`): a server
/// holds a descriptor per connection, and many systems start processes at 1,024. Returns the
/// limit in effect.
pub fn raise_fd_limit(cap: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read the struct passed, nothing else.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        let wanted = lim.rlim_max.min(cap);
        if wanted > lim.rlim_cur {
            let raised = libc::rlimit {
                rlim_cur: wanted,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return wanted;
            }
        }
        lim.rlim_cur
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_variables_are_told_from_others() {
        assert!(is_relay_variable(OsStr::new("CODEX_RELAY_TOKEN")));
        assert!(is_relay_variable(OsStr::new("CODEX_RELAY_TREE")));
        assert!(!is_relay_variable(OsStr::new("CODEX_HOME")));
        assert!(!is_relay_variable(OsStr::new("PATH")));
    }
}
