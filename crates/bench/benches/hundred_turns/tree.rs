//! Memory of a process tree, sampled from /proc: the summed RSS (and PSS, which splits shared
//! pages such as Codex's own binary between the processes mapping them) of every descendant of
//! this bench process, at its peak; and a process's own CPU time.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Peak memory of the tree below this process while a sampler ran, in KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Peak {
    pub rss_kib: u64,
    pub pss_kib: u64,
    /// The most processes seen at once in the tree.
    pub processes: usize,
}

pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Peak>,
}

/// `(pid, ppid)` of every process.
fn parents() -> HashMap<u32, u32> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(ppid) = stat_fields(pid).and_then(|f| f.get(1).and_then(|s| s.parse().ok())) {
            out.insert(pid, ppid);
        }
    }
    out
}

/// The fields of /proc/PID/stat after the command name (field 3 onwards, 0-based from state).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// The direct children of `root`.
pub fn children(root: u32) -> Vec<u32> {
    parents()
        .into_iter()
        .filter_map(|(pid, ppid)| (ppid == root).then_some(pid))
        .collect()
}

/// Every descendant of `root` (not `root` itself).
pub fn descendants(root: u32) -> Vec<u32> {
    let parents = parents();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (pid, ppid) in parents {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for c in children.get(&p).into_iter().flatten() {
            out.push(*c);
            todo.push(*c);
        }
    }
    out
}

fn rss_kib(pid: u32) -> u64 {
    // statm: size resident shared ... in pages.
    let page_kib = 4;
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page_kib)
}

fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

impl Sampler {
    /// Samples the tree below this process every `every` until stopped; PSS (costlier to read)
    /// every fifth sample.
    pub fn start(every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let me = std::process::id();
        let thread = std::thread::spawn(move || {
            let mut peak = Peak::default();
            let mut tick = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let tree = descendants(me);
                peak.processes = peak.processes.max(tree.len());
                peak.rss_kib = peak.rss_kib.max(tree.iter().map(|p| rss_kib(*p)).sum());
                if tick.is_multiple_of(5) {
                    peak.pss_kib = peak.pss_kib.max(tree.iter().map(|p| pss_kib(*p)).sum());
                }
                tick += 1;
                std::thread::sleep(every);
            }
            peak
        });
        Sampler { stop, thread }
    }

    pub fn finish(self) -> Peak {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// User + system CPU time of one process (all its threads, not its children).
pub fn cpu_time(pid: u32) -> Duration {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let ticks = stat_fields(pid).map_or(0, |f| {
        // utime and stime are fields 14 and 15 of stat; `f` starts at field 3.
        let get = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        get(11) + get(12)
    });
    Duration::from_secs_f64(ticks as f64 / hz)
}

/// Voluntary and involuntary context switches of every thread of a process (wake-ups).
pub fn context_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// Threads of a process.
pub fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

/// User + system CPU time of the threads of `pid` whose name starts with `prefix` (e.g.
/// `sqlx-sqlite` for the store's SQLite connection threads), of the threads alive now.
pub fn thread_cpu_time(pid: u32, prefix: &str) -> Duration {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    let ticks: u64 = tasks
        .flatten()
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            let name = &stat[stat.find('(')? + 1..stat.rfind(')')?];
            if !name.starts_with(prefix) {
                return None;
            }
            let f: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .sum();
    Duration::from_secs_f64(ticks as f64 / hz)
}
