//! Memory and descriptors as the kernel counts them: the resident set of a process group (a
//! Codex app-server and what runs in its group), and this process's own RSS and open files
//! (for soak figures). Read from `/proc`; `None` where it cannot be read.

/// The size of a memory page, in bytes.
fn page_size() -> u64 {
    // SAFETY: sysconf(3) has no memory preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as u64 } else { 4096 }
}

/// Resident bytes of one process (`/proc/<pid>/statm`, its second field), `None` once it is
/// gone.
pub fn process_rss(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

/// Resident bytes of every process of group `pgid` added up (pages two of them share count
/// twice: an upper bound, which is what a limit wants). `None` when no process of the group
/// could be read.
pub fn group_rss(pgid: u32) -> Option<u64> {
    let members = super::tree::group_members(pgid);
    let sizes: Vec<u64> = members.into_iter().filter_map(process_rss).collect();
    if sizes.is_empty() {
        None
    } else {
        Some(sizes.iter().sum())
    }
}

/// This process's resident bytes.
pub fn own_rss() -> Option<u64> {
    process_rss(std::process::id())
}

/// How many file descriptors this process has open.
pub fn own_open_fds() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_resident_set_and_open_files() {
        let rss = own_rss().expect("readable");
        assert!(rss > 1024 * 1024, "{rss}");
        assert!(own_open_fds().expect("readable") >= 3);
        // This test process leads no group of its own necessarily; its group has at least it.
        // SAFETY: getpgrp(2) has no preconditions.
        let pgid = unsafe { libc::getpgrp() } as u32;
        assert!(group_rss(pgid).expect("its own group") >= rss);
        assert_eq!(process_rss(u32::MAX), None);
    }
}
