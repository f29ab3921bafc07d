//! Everything codex-relay asks of the operating system, in one place. Linux is the only
//! implementation today; a port (macOS, say) provides the same items with the same contract:
//!
//! - [`process::configure_child`]: a child spawned for Codex leads a process group of its own,
//!   dies when the relay dies (Linux: `PR_SET_PDEATHSIG`), and keeps its orphaned descendants
//!   (Linux: `PR_SET_CHILD_SUBREAPER`), so everything Codex starts stays in its tree.
//! - [`process::signal_group`]: a signal to a whole process group.
//! - [`process::harden_self`]: the relay's own memory and environment out of reach of other
//!   processes of the same user (Linux: not dumpable, secret values overwritten in place).
//! - [`process::raise_fd_limit`]: room for one descriptor per connection.
//! - [`reaper`]: the relay as the subreaper of what its Codex processes leave when they die, so
//!   it stays in the relay's tree; it reaps and stops those, never its own children.
//! - [`tree`]: a tree's processes found by a marker in their environment and by parent pid,
//!   killed together; a watchdog process that kills a tree if the relay dies without doing it.
//! - [`memory`]: resident memory of a process group (the pool's limit per Codex), and this
//!   process's own RSS and open files.
//! - [`relays`]: every relay on the machine announced to the others (so each refuses the
//!   others' sessions too).
//! - [`sockets`]: for an accepted TCP connection, the client's socket as the kernel knows it
//!   (another machine, a local socket, or one nobody holds), over [`diag`] (socket
//!   diagnostics).
//! - [`daemon_socket`]: whether a Codex daemon's control socket may be trusted (this user's,
//!   in a directory only this user can enter; served by a process of this user).
//! - [`peers`]: whether the process holding a local client's socket descends from a relay or a
//!   Codex tree; anything that cannot be checked counts as if it did.
//! - [`writers`]: which processes hold a Codex thread's rollout file open (who is its active
//!   writer).
//!
//! Each function documents what it guarantees; callers rely on nothing else.

#[cfg(not(target_os = "linux"))]
compile_error!(
    "codex-relay runs on Linux only: a port implements the items of crates/codex/src/platform (see its module documentation)"
);

pub mod daemon_socket;
pub mod diag;
pub mod memory;
pub mod peers;
pub mod process;
pub mod reaper;
pub mod relays;
pub mod sockets;
pub mod tree;
pub mod writers;
