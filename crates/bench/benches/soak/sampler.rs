//! The engine's process sampled over a soak: RSS and open descriptors every 200 ms beside the
//! turns done so far, and the least-squares slope of RSS against turns.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use codex_relay_codex::platform::memory;

/// One look: turns done, RSS in KB, open descriptors.
type Sample = (u64, u64, u64);

pub struct Sampler {
    stop: Arc<AtomicBool>,
    last_rss: Arc<AtomicU64>,
    last_fds: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<Vec<Sample>>,
}

/// What the samples say.
pub struct Figures {
    pub samples: usize,
    pub rss_start_kb: u64,
    pub rss_end_kb: u64,
    pub rss_peak_kb: u64,
    /// KB per 1000 turns, over every sample.
    pub slope_all: f64,
    /// KB per 1000 turns, over the samples of the second half of the turns (after the
    /// engine's buffers and caches have filled).
    pub slope_second_half: f64,
    pub fds_start: u64,
    pub fds_end: u64,
    pub fds_max: u64,
}

fn look(turns: u64) -> Sample {
    let rss = memory::own_rss().unwrap_or(0) / 1024;
    let fds = memory::own_open_fds().unwrap_or(0) as u64;
    (turns, rss, fds)
}

impl Sampler {
    pub fn start(turns: impl Fn() -> u64 + Send + 'static) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let last_rss = Arc::new(AtomicU64::new(0));
        let last_fds = Arc::new(AtomicU64::new(0));
        let (s, r, f) = (stop.clone(), last_rss.clone(), last_fds.clone());
        let thread = std::thread::spawn(move || {
            let mut out = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let sample = look(turns());
                r.store(sample.1, Ordering::Relaxed);
                f.store(sample.2, Ordering::Relaxed);
                out.push(sample);
                std::thread::sleep(Duration::from_millis(200));
            }
            out.push(look(turns()));
            out
        });
        Sampler {
            stop,
            last_rss,
            last_fds,
            thread,
        }
    }

    pub fn last_rss_kb(&self) -> u64 {
        self.last_rss.load(Ordering::Relaxed)
    }

    pub fn last_fds(&self) -> u64 {
        self.last_fds.load(Ordering::Relaxed)
    }

    pub fn finish(self) -> Figures {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.thread.join().expect("the sampler");
        let half = samples.last().map_or(0, |s| s.0) / 2;
        let second: Vec<Sample> = samples.iter().copied().filter(|s| s.0 >= half).collect();
        Figures {
            samples: samples.len(),
            rss_start_kb: samples.first().map_or(0, |s| s.1),
            rss_end_kb: samples.last().map_or(0, |s| s.1),
            rss_peak_kb: samples.iter().map(|s| s.1).max().unwrap_or(0),
            slope_all: slope(&samples),
            slope_second_half: slope(&second),
            fds_start: samples.first().map_or(0, |s| s.2),
            fds_end: samples.last().map_or(0, |s| s.2),
            fds_max: samples.iter().map(|s| s.2).max().unwrap_or(0),
        }
    }
}

/// Least-squares slope of RSS (KB) against turns, per 1000 turns; 0 when the turns do not
/// vary.
pub fn slope(samples: &[Sample]) -> f64 {
    let n = samples.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mx = samples.iter().map(|s| s.0 as f64).sum::<f64>() / n;
    let my = samples.iter().map(|s| s.1 as f64).sum::<f64>() / n;
    let sxx: f64 = samples.iter().map(|s| (s.0 as f64 - mx).powi(2)).sum();
    let sxy: f64 = samples
        .iter()
        .map(|s| (s.0 as f64 - mx) * (s.1 as f64 - my))
        .sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx * 1000.0 }
}
