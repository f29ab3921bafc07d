//! Who opened a TCP connection from this machine, and whether it is one of the processes a
//! relay's Codex started. The kernel names the client's socket ([`super::sockets`]); every
//! process whose descriptors the relay can read is searched for it; each holder's parents
//! (by `/proc/<pid>/stat`) say whether it descends from a relay (this one, or another one
//! announced on this machine, [`super::relays`]) or from a process carrying a Codex tree's
//! marker. A connection passes only when every holder found is outside all of them: a socket
//! nobody can be seen to hold (passed over a Unix socket and in flight, closed, held only by
//! a process whose descriptors cannot be read) is refused, and so is a holder whose parents
//! cannot be followed.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

use super::sockets::{self, Client};
use super::tree::{self, MARKER_VAR, Proc};

/// Who opened a connection, as far as this machine can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerOwner {
    /// Not on this machine's network (the kernel knows no client socket): nothing to look up.
    Remote,
    /// A socket another user's process made (a reverse proxy, root): not one of the relay's
    /// trees, which run as the relay's user.
    OtherUser { uid: u32 },
    /// Held only by processes outside every relay's Codex trees: the first of them.
    Outside { pid: u32, command: String },
    /// Held by a process of a relay's Codex tree.
    Inside {
        pid: u32,
        command: String,
        why: String,
    },
    /// Cannot be checked, so refused: why.
    Unchecked(String),
}

impl PeerOwner {
    /// Whether the connection may be served.
    pub fn allowed(&self) -> bool {
        matches!(
            self,
            PeerOwner::Remote | PeerOwner::OtherUser { .. } | PeerOwner::Outside { .. }
        )
    }
}

/// What counts as a relay: this process and the relays announced on this machine; and the
/// Codex daemons this relay attached to, whose commands are as untrusted as its own Codex's.
#[derive(Debug, Clone)]
pub struct Relays {
    pub me: Proc,
    pub others: Vec<Proc>,
    pub daemons: Vec<Proc>,
}

impl Relays {
    /// This process, every relay of this user announced on this machine, and the daemons
    /// this process attached to (those still running).
    pub fn current() -> Relays {
        let me = tree::own();
        let others = super::relays::list()
            .into_iter()
            .filter(|p| *p != me)
            .collect();
        let daemons = DAEMONS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .filter(|&(pid, start)| tree::stat(pid).is_some_and(|(_, s)| s == start))
            .collect();
        Relays {
            me,
            others,
            daemons,
        }
    }
}

/// The Codex daemons this process attached to, as `(pid, start time)`.
static DAEMONS: std::sync::Mutex<Vec<Proc>> = std::sync::Mutex::new(Vec::new());

/// Counts everything process `pid` (a Codex daemon's app-server the relay attached to) runs
/// as started by Codex: the peer check refuses connections from it, as from the relay's own
/// Codex trees. Kept while that process runs.
pub fn watch_daemon(pid: u32) {
    let Some((_, start)) = tree::stat(pid) else {
        return;
    };
    let mut daemons = DAEMONS.lock().unwrap_or_else(|e| e.into_inner());
    daemons.retain(|&(p, s)| tree::stat(p).is_some_and(|(_, now)| now == s));
    if !daemons.contains(&(pid, start)) {
        daemons.push((pid, start));
    }
}

/// For each accepted connection `(peer, local)`, who holds the client's socket (one pass over
/// `/proc` for the whole batch). Blocking: it reads `/proc`.
pub fn owners(conns: &[(SocketAddr, SocketAddr)]) -> Vec<PeerOwner> {
    owners_among(&Relays::current(), conns)
}

/// [`owners`], with the relays given.
pub fn owners_among(relays: &Relays, conns: &[(SocketAddr, SocketAddr)]) -> Vec<PeerOwner> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let clients: Vec<Client> = conns
        .iter()
        .map(|&(peer, local)| sockets::client(peer, local))
        .collect();
    let wanted: HashSet<u64> = clients
        .iter()
        .filter_map(|c| match c {
            Client::Local { inode, uid } if *uid == me => Some(*inode),
            _ => None,
        })
        .collect();
    let scan = (!wanted.is_empty()).then(|| Scan::run(relays, &wanted));
    clients
        .into_iter()
        .map(|c| match c {
            Client::Remote => PeerOwner::Remote,
            Client::Gone(why) => PeerOwner::Unchecked(why),
            Client::Local { uid, .. } if uid != me => PeerOwner::OtherUser { uid },
            Client::Local { inode, .. } => {
                let scan = scan.as_ref().expect("scanned for every local socket");
                judge(relays, scan, inode)
            }
        })
        .collect()
}

/// The processes holding the wanted sockets, and those whose descriptors cannot be read.
struct Scan {
    holders: HashMap<u64, Vec<Proc>>,
    unreadable: Vec<u32>,
}

/// The last processes found holding a socket outside the trees (a browser's network process,
/// say): searched right after the trees, so that a client's next connection is found at once.
static RECENT: std::sync::Mutex<Vec<Proc>> = std::sync::Mutex::new(Vec::new());
const RECENT_KEPT: usize = 8;

impl Scan {
    /// Searches every process that may be of a tree (all of them: a holder there refuses the
    /// connection whoever else holds it), then the others until each wanted socket has a
    /// holder. Those whose descriptors cannot be read are noted.
    fn run(relays: &Relays, wanted: &HashSet<u64>) -> Scan {
        let mut scan = Scan {
            holders: HashMap::new(),
            unreadable: Vec::new(),
        };
        for (pid, start, maybe_inside) in search_order(relays) {
            if !maybe_inside && wanted.iter().all(|i| scan.holders.contains_key(i)) {
                break;
            }
            let fds = match std::fs::read_dir(format!("/proc/{pid}/fd")) {
                Ok(fds) => fds,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(_) => {
                    scan.unreadable.push(pid);
                    continue;
                }
            };
            let held: Vec<u64> = fds
                .flatten()
                .filter_map(|fd| socket_inode(&std::fs::read_link(fd.path()).ok()?))
                .filter(|inode| wanted.contains(inode))
                .collect();
            // What was read belongs to this process only if it is still the same one.
            if held.is_empty() || tree::stat(pid).map(|(_, s)| s) != Some(start) {
                continue;
            }
            for inode in held {
                let at = scan.holders.entry(inode).or_default();
                if !at.contains(&(pid, start)) {
                    at.push((pid, start));
                }
            }
        }
        scan
    }
}

/// Every process, as `(pid, start, may be of a tree)`: first those that may be (everything
/// below a relay by parent pid, the processes carrying a tree's marker and what is below
/// them), then the recent outside holders, then the rest.
fn search_order(relays: &Relays) -> Vec<(u32, u64, bool)> {
    let procs: Vec<(u32, u32, u64)> = pids()
        .into_iter()
        .filter_map(|pid| tree::stat(pid).map(|(ppid, start)| (pid, ppid, start)))
        .collect();
    let mut children: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, &(_, ppid, _)) in procs.iter().enumerate() {
        children.entry(ppid).or_default().push(i);
    }
    let mut inside = vec![false; procs.len()];
    // A relay's own connections are its own: what is below it may be of a tree, and what
    // carries a tree's marker.
    let mut todo: Vec<usize> = Vec::new();
    for (i, &(pid, _, start)) in procs.iter().enumerate() {
        if (pid, start) == relays.me
            || relays.others.contains(&(pid, start))
            || relays.daemons.contains(&(pid, start))
        {
            todo.extend(children.get(&pid).into_iter().flatten());
        } else if carries_marker(pid) {
            todo.push(i);
        }
    }
    while let Some(i) = todo.pop() {
        if std::mem::replace(&mut inside[i], true) {
            continue;
        }
        todo.extend(children.get(&procs[i].0).into_iter().flatten());
    }
    let recent = RECENT.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let rank = |i: usize| -> usize {
        if inside[i] {
            0
        } else if recent.contains(&(procs[i].0, procs[i].2)) {
            1
        } else {
            2
        }
    };
    let mut order: Vec<usize> = (0..procs.len()).collect();
    order.sort_by_key(|&i| rank(i));
    order
        .into_iter()
        .map(|i| (procs[i].0, procs[i].2, inside[i]))
        .collect()
}

fn remember_outside(holder: Proc) {
    let mut recent = RECENT.lock().unwrap_or_else(|e| e.into_inner());
    recent.retain(|p| *p != holder);
    recent.insert(0, holder);
    recent.truncate(RECENT_KEPT);
}

/// The numeric entries of `/proc`.
fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn socket_inode(target: &std::path::Path) -> Option<u64> {
    target
        .to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The verdict on one local socket of this user, from the scan.
fn judge(relays: &Relays, scan: &Scan, inode: u64) -> PeerOwner {
    let Some(holders) = scan.holders.get(&inode).filter(|h| !h.is_empty()) else {
        return PeerOwner::Unchecked(format!(
            "the client's socket is held by no process the relay can read: it is in flight (passed over a Unix socket), closed, or held by a process whose descriptors cannot be read{}",
            unreadable_summary(relays, &scan.unreadable)
        ));
    };
    let mut unknown = None;
    for &(pid, start) in holders {
        match lineage(relays, pid, start) {
            Lineage::Inside(why) => {
                return PeerOwner::Inside {
                    pid,
                    command: command_line(pid),
                    why,
                };
            }
            Lineage::Unknown(why) => unknown = Some(format!("process {pid}: {why}")),
            Lineage::Outside => {}
        }
    }
    if let Some(why) = unknown {
        return PeerOwner::Unchecked(format!(
            "the parents of a process holding the client's socket cannot be followed ({why})"
        ));
    }
    remember_outside(holders[0]);
    let pid = holders[0].0;
    PeerOwner::Outside {
        pid,
        command: command_line(pid),
    }
}

/// Processes of this user among `pids` (the others cannot hold a socket this user made
/// unless one of this user's processes handed it over), named, at most three: those of this
/// relay's trees first, then those of other relays' trees.
fn unreadable_summary(relays: &Relays, pids: &[u32]) -> String {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut mine: Vec<(u8, u32)> = pids
        .iter()
        .copied()
        .filter(|&pid| uid_of(pid) == Some(me))
        .filter_map(|pid| {
            let (_, start) = tree::stat(pid)?;
            let rank = match lineage(relays, pid, start) {
                Lineage::Inside(_) if descends_from(pid, relays.me.0) => 0,
                Lineage::Outside => 2,
                _ => 1,
            };
            Some((rank, pid))
        })
        .collect();
    if mine.is_empty() {
        return String::new();
    }
    mine.sort();
    let named: Vec<String> = mine
        .iter()
        .take(3)
        .map(|&(rank, pid)| {
            let tree = match rank {
                0 => ", in this relay's tree",
                1 => ", in a relay's tree",
                _ => "",
            };
            format!("{pid} {}{tree}", command_line(pid))
        })
        .collect();
    format!(
        " ({} of this user's processes cannot be read, e.g. {})",
        mine.len(),
        named.join("; ")
    )
}

/// Whether `ancestor` is among the parents of `pid` (by `/proc`; for naming, not judging).
fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut at = pid;
    for _ in 0..MAX_DEPTH {
        match tree::stat(at) {
            Some((ppid, _)) if ppid == ancestor => return true,
            Some((ppid, _)) if ppid > 1 => at = ppid,
            _ => return false,
        }
    }
    false
}

fn uid_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    // Real, effective, ...: the effective one is whose the process's sockets are.
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Where a process comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lineage {
    Inside(String),
    Outside,
    Unknown(String),
}

/// How deep a chain of parents may be before it is called broken.
const MAX_DEPTH: usize = 4096;

/// Whether one of the parents of process `(pid, start)` (not the process itself: a relay's own
/// connections are its own) is a relay or carries a Codex tree's marker.
fn lineage(relays: &Relays, pid: u32, start: u64) -> Lineage {
    let mut child = (pid, start);
    let mut retries = 0;
    for _ in 0..MAX_DEPTH {
        let Some((ppid, child_start)) = tree::stat(child.0) else {
            return Lineage::Unknown(format!("process {} exited during the check", child.0));
        };
        if child_start != child.1 {
            return Lineage::Unknown(format!("process {} exited during the check", child.0));
        }
        if ppid == 0 {
            return Lineage::Outside;
        }
        let Some((_, parent_start)) = tree::stat(ppid) else {
            // The parent exited between the two reads: the child has a new parent now.
            retries += 1;
            if retries > 3 {
                return Lineage::Unknown(format!(
                    "the parents of process {} keep exiting",
                    child.0
                ));
            }
            continue;
        };
        // A parent starts before its child: a later one reused a pid that exited meanwhile.
        if parent_start > child.1 {
            retries += 1;
            if retries > 3 {
                return Lineage::Unknown(format!(
                    "the parents of process {} keep exiting",
                    child.0
                ));
            }
            continue;
        }
        let parent = (ppid, parent_start);
        if parent == relays.me {
            return Lineage::Inside(if child.0 == pid {
                // Only Codex and the relay's own helpers are its children otherwise.
                "its parent is this relay, which adopted it when the Codex that ran it died"
                    .to_owned()
            } else {
                format!(
                    "it descends from this relay's process {} ({})",
                    child.0,
                    command_line(child.0)
                )
            });
        }
        if relays.others.contains(&parent) {
            return Lineage::Inside(format!(
                "it descends from process {ppid}, another codex-relay on this machine"
            ));
        }
        if relays.daemons.contains(&parent) {
            return Lineage::Inside(format!(
                "it descends from process {ppid} ({}), the Codex daemon this relay is attached to",
                command_line(ppid)
            ));
        }
        if carries_marker(ppid) {
            return Lineage::Inside(format!(
                "it descends from process {ppid} ({}), of a Codex tree a relay started",
                command_line(ppid)
            ));
        }
        child = parent;
    }
    Lineage::Unknown(format!("process {pid} has more than {MAX_DEPTH} parents"))
}

/// Whether the environment of `pid` carries a Codex tree's marker (unreadable: no).
fn carries_marker(pid: u32) -> bool {
    let needle = format!("{MARKER_VAR}=");
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
        env.split(|b| *b == 0)
            .any(|entry| entry.starts_with(needle.as_bytes()))
    })
}

fn command_line(pid: u32) -> String {
    let line = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .split('\0')
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let mut line = if line.is_empty() {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| c.trim().to_owned())
            .unwrap_or_default()
    } else {
        line
    };
    if line.len() > 200 {
        let mut cut = 200;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push('…');
    }
    line
}

#[cfg(test)]
#[path = "peers_tests.rs"]
mod tests;
