//! Wall time and peak RSS of a whole process tree: a sampler thread sums the resident memory
//! of the root and every descendant (found through `/proc/*/stat` parent links) each tick.

use std::collections::HashMap;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the tree is sampled.
pub const TICK: Duration = Duration::from_millis(10);

/// One measured run.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub wall: Duration,
    /// The largest sum of RSS over the tree seen in one sample, in bytes.
    pub peak_rss: u64,
    /// Processes seen in the tree at once, at most.
    pub peak_procs: usize,
}

pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(u64, usize)>,
}

impl Sampler {
    pub fn watch(root: u32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let (mut peak, mut procs) = (0u64, 0usize);
            while !flag.load(Ordering::Relaxed) {
                let (rss, n) = tree_rss(root);
                peak = peak.max(rss);
                procs = procs.max(n);
                std::thread::sleep(TICK);
            }
            (peak, procs)
        });
        Sampler { stop, handle }
    }

    pub fn finish(self) -> (u64, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("sampler thread")
    }
}

/// Waits for `child` (started at `started`) under a sampler; `drive` runs meanwhile (talking
/// to the child's pipes, for instance) and must leave the child on its way out.
pub fn measure(
    mut child: Child,
    started: Instant,
    drive: impl FnOnce(&mut Child),
) -> (Measured, std::process::ExitStatus) {
    let sampler = Sampler::watch(child.id());
    drive(&mut child);
    let status = child.wait().expect("wait for the measured process");
    let wall = started.elapsed();
    let (peak_rss, peak_procs) = sampler.finish();
    (
        Measured {
            wall,
            peak_rss,
            peak_procs,
        },
        status,
    )
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as u64 } else { 4096 }
}

/// The summed RSS (bytes) of `root` and its descendants, and how many processes that is.
pub fn tree_rss(root: u32) -> (u64, usize) {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = parent_of(pid) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let page = page_size();
    let (mut total, mut n) = (0u64, 0usize);
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if let Some(pages) = resident_pages(pid) {
            total += pages * page;
            n += 1;
        }
        if let Some(kids) = children.get(&pid) {
            stack.extend(kids);
        }
    }
    (total, n)
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

fn resident_pages(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    statm.split_whitespace().nth(1)?.parse().ok()
}
