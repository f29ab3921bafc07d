//! Engine benchmarks against the fake app-server (figures are printed, not asserted):
//! 1. relay RSS with 100 idle sessions on one app-server (measured first, in a fresh process);
//! 2. events/s through ingest → log → store → one subscriber, as fast as the fake can stream;
//! 3. latency from the fake writing an event to the subscriber holding it, at 10k events/s.
//!
//! Run: `cargo bench -p codex-relay-bench --bench pipeline`

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use codex_relay_codex::AppServerConfig;
use codex_relay_core::{CreateOptions, Ev, Relay, RelayConfig, SessionStatus};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FAKE: &str = env!("CARGO_BIN_EXE_fake-app-server");

async fn relay(dir: &std::path::Path, events: u64, rate: u64) -> Relay {
    let mut codex = AppServerConfig::new(FAKE);
    codex
        .env
        .push(("FAKE_EVENTS".into(), Some(events.to_string().into())));
    codex
        .env
        .push(("FAKE_RATE".into(), Some(rate.to_string().into())));
    let mut config = RelayConfig::new(codex, dir.join("bench.db").display().to_string());
    config.max_sessions = 1000;
    if let Some(n) = std::env::var("BENCH_EVENT_BUFFER")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.event_buffer = n;
    }
    Relay::open(config).await.expect("relay opens")
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

async fn idle_sessions(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let relay = relay(dir.path(), 0, 0).await;
    let before = rss_kib();
    for _ in 0..n {
        relay
            .create(CreateOptions::default())
            .await
            .expect("create");
    }
    relay.store().flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib();
    println!(
        "idle sessions: {n} on one app-server: relay RSS {:.1} MB (target <= 60 MB; {:.1} MB before creating them)",
        after as f64 / 1024.0,
        before as f64 / 1024.0
    );
    relay.shutdown().await;
}

/// Drives one turn and consumes every event as one subscriber; returns (events, elapsed, latencies).
async fn one_turn(relay: &Relay, measure_latency: bool) -> (u64, Duration, Vec<Duration>) {
    let (h, _) = relay
        .create(CreateOptions::default())
        .await
        .expect("create");
    let id = h.id().to_owned();
    let started = Instant::now();
    relay
        .say(&id, codex_relay_core::SayInput::text("go"))
        .await
        .expect("say");
    let mut seen = 0u64;
    let mut latencies = Vec::new();
    loop {
        let events = relay.events(&id, seen, 10_000).await.expect("events");
        let now_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let mut done = false;
        for e in &events {
            seen = e.seq;
            match &e.ev {
                Ev::Text { text, .. } if measure_latency => {
                    if let Some(t) = text.strip_prefix("t=").and_then(|t| t.parse::<u128>().ok()) {
                        latencies.push(Duration::from_nanos(now_ns.saturating_sub(t) as u64));
                    }
                }
                Ev::TurnEnd { .. } => done = true,
                _ => {}
            }
        }
        if done && relay.status(&id).unwrap().status == SessionStatus::Idle {
            break;
        }
        if events.is_empty() {
            relay.wait(&id, seen, Duration::from_secs(5)).await.unwrap();
        }
    }
    let observed = started.elapsed();
    relay.store().flush().await.unwrap();
    if std::env::var_os("BENCH_VERBOSE").is_some() {
        eprintln!(
            "  subscriber saw the turn end after {:.2} s; store flushed after {:.2} s",
            observed.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
    }
    (seen, started.elapsed(), latencies)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Runs are noisy on a 2-core machine shared with the fake app-server and SQLite's thread:
/// the figure is the median of several, with the spread.
const THROUGHPUT_RUNS: usize = 5;

async fn throughput(events: u64) {
    let mut rates = Vec::new();
    let mut logged = 0;
    for _ in 0..THROUGHPUT_RUNS {
        let dir = tempfile::tempdir().unwrap();
        let relay = relay(dir.path(), events, 0).await;
        let (n, took, _) = one_turn(&relay, false).await;
        logged = n;
        rates.push(n as f64 / took.as_secs_f64());
        relay.shutdown().await;
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "throughput: {logged} events through ingest -> log -> SQLite -> subscriber, median of {THROUGHPUT_RUNS} runs {median:.0} events/s (min {:.0}, max {:.0}; target >= 200000/s; median {:.2}x the target)",
        rates[0],
        rates[rates.len() - 1],
        median / 200_000.0
    );
}

async fn latency(rate: u64, events: u64) {
    let dir = tempfile::tempdir().unwrap();
    let relay = relay(dir.path(), events, rate).await;
    let (_, _, mut lat) = one_turn(&relay, true).await;
    lat.sort();
    let p99 = pct(&lat, 0.99);
    println!(
        "latency at {rate} events/s over {} events: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (target p99 < 2 ms; p99 is {:.2}x the target)",
        lat.len(),
        pct(&lat, 0.5).as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        lat.last().unwrap().as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3 / 2.0
    );
    relay.shutdown().await;
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    rt.block_on(async {
        if only.as_deref().is_none_or(|o| o == "idle") {
            idle_sessions(100).await;
        }
        if only.as_deref().is_none_or(|o| o == "throughput") {
            throughput(200_000).await;
        }
        if only.as_deref().is_none_or(|o| o == "latency") {
            latency(10_000, 30_000).await;
        }
    });
}
