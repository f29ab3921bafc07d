//! Server-Sent Events fan-out through the HTTP front (figures are printed, not asserted):
//! 50 sessions on the fake app-server, 20 SSE subscribers each (1,000 connections to
//! `GET /api/sessions/{id}/stream`), then one turn of 200 agent messages in every session at
//! once. Every subscriber must receive every envelope of its session exactly once and in order
//! (seq 1, 2, 3, ...); the bench counts misses, repeats and reorderings.
//!
//! The relay (engine + HTTP front, with its security layers) runs in this process; the 1,000
//! subscribers run in a child process (this binary again, `SSE_BENCH_CLIENT=1`), so the relay's
//! RSS and CPU seconds are its own. Latency is from the fake app-server writing a message
//! (`t=<unix nanos>` in its text) to a subscriber parsing it: an upper bound on append →
//! subscriber, as it also includes Codex-side ingest.
//!
//! Baseline, in the same run: the same 50 x 200 x 20 fan-out read in-process through the
//! engine (`Relay::events` + `Relay::wait`, no HTTP), so the SSE figures are also given as a
//! ratio against what the engine alone delivers on this machine at this moment (its load
//! average is printed too: the machine is shared).
//!
//! Run: `cargo bench -p codex-relay-bench --bench sse_fanout`. `SSE_RATE` sets the messages per
//! second each session's turn streams (default 100; 0 = as fast as the fake can).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use codex_relay_bench::sse::{Seen, connect, read_envelopes};
use codex_relay_codex::AppServerConfig;
use codex_relay_core::{CreateOptions, Relay, RelayConfig, SayInput};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FAKE: &str = env!("CARGO_BIN_EXE_fake-app-server");
const SESSIONS: usize = 50;
const SUBSCRIBERS: usize = 20;
const MESSAGES: usize = 200;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU seconds of this process.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the command name.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks as f64 / hz
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize] as f64 / 1e6
}

fn main() {
    let client = std::env::var_os("SSE_BENCH_CLIENT").is_some();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if client {
        rt.block_on(subscribers());
    } else {
        rt.block_on(relay_side());
    }
}

async fn open_relay(dir: &std::path::Path, rate: u64) -> Relay {
    let mut codex = AppServerConfig::new(FAKE);
    codex
        .env
        .push(("FAKE_EVENTS".into(), Some(MESSAGES.to_string().into())));
    codex
        .env
        .push(("FAKE_RATE".into(), Some(rate.to_string().into())));
    let mut config = RelayConfig::new(codex, dir.join("bench.db").display().to_string());
    config.max_sessions = 1000;
    Relay::open(config).await.expect("relay opens")
}

async fn sessions(relay: &Relay) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..SESSIONS {
        let (h, _) = relay
            .create(CreateOptions::default())
            .await
            .expect("create");
        ids.push(h.id().to_owned());
    }
    relay.store().flush().await.unwrap();
    ids
}

/// One in-process reader of a session's log: what it saw, like an SSE subscriber.
async fn engine_reader(relay: Relay, id: String) -> Seen {
    let mut seen = Seen::default();
    let mut last = 0u64;
    while seen.latencies.len() < MESSAGES {
        let events = relay.events(&id, last, 256).await.expect("events");
        if events.is_empty() {
            relay
                .wait(&id, last, Duration::from_secs(30))
                .await
                .unwrap();
            continue;
        }
        let now = now_ns();
        for e in events {
            seen.envelopes += 1;
            if e.seq != last + 1 {
                seen.missing += e.seq.saturating_sub(last + 1);
                seen.disorder += u64::from(e.seq <= last);
            }
            last = last.max(e.seq);
            if let codex_relay_core::Ev::Text { text, .. } = &e.ev
                && let Some(t) = text.strip_prefix("t=").and_then(|t| t.parse::<u128>().ok())
            {
                seen.latencies.push(now.saturating_sub(t) as u64);
            }
        }
    }
    seen
}

/// The baseline: the same fan-out through the engine alone; returns (events/s, p50, p99).
async fn engine_baseline(rate: u64) -> (f64, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let relay = open_relay(dir.path(), rate).await;
    let ids = sessions(&relay).await;
    let mut readers = Vec::new();
    for id in &ids {
        for _ in 0..SUBSCRIBERS {
            readers.push(tokio::spawn(engine_reader(relay.clone(), id.clone())));
        }
    }
    let started = Instant::now();
    let cpu0 = cpu_seconds();
    for id in &ids {
        relay.say(id, SayInput::text("go")).await.expect("say");
    }
    let (mut delivered, mut bad, mut all) = (0, 0, Vec::new());
    for r in readers {
        let seen = r.await.unwrap();
        delivered += seen.envelopes;
        bad += seen.missing + seen.disorder;
        all.extend(seen.latencies);
    }
    let took = started.elapsed();
    let cpu = cpu_seconds() - cpu0;
    all.sort_unstable();
    let rate_delivered = delivered as f64 / took.as_secs_f64();
    let (p50, p99) = (pct(&all, 0.5), pct(&all, 0.99));
    println!(
        "engine baseline (1,000 in-process readers, no HTTP): {delivered} events in {:.2} s = {rate_delivered:.0} events/s; p50 {p50:.3} ms, p99 {p99:.3} ms; misses or repeats: {bad}; CPU {cpu:.2} s (readers included)",
        took.as_secs_f64()
    );
    relay.shutdown().await;
    (rate_delivered, p50, p99)
}

async fn relay_side() {
    let rate = env_u64("SSE_RATE", 100);
    println!(
        "load average before: {} (2 cores, shared)",
        codex_relay_bench::load_average()
    );
    let dir = tempfile::tempdir().unwrap();
    let relay = open_relay(dir.path(), rate).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = codex_relay_http::secure(
        codex_relay_http::router(relay.clone(), Default::default()),
        codex_relay_http::Security {
            credentials: std::sync::Arc::new(codex_relay_http::auth::Credentials::new(None, None)),
            allowed_hosts: vec!["127.0.0.1".into(), "localhost".into()],
            cors_origins: vec![],
            body_limit: codex_relay_http::security::DEFAULT_BODY_LIMIT,
            trusted_proxies: vec![],
            // One caller holds all 1,000 subscriptions here.
            streams: codex_relay_http::streams::StreamLimits {
                total: 4096,
                per_caller: 4096,
            },
        },
    );
    // As `codex-relay serve` serves it (its server loop, no Nagle delay on small writes).
    let limits = codex_relay_http::server::ServerLimits {
        max_connections: 4096,
        ..Default::default()
    };
    tokio::spawn(codex_relay_http::server::serve(
        listener,
        app,
        limits,
        None,
        std::future::pending(),
    ));
    let ids = sessions(&relay).await;
    let rss_idle = proc_status_kib("VmRSS:");
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env("SSE_BENCH_CLIENT", "1")
        .env("SSE_ADDR", addr.to_string())
        .env("SSE_SESSIONS", ids.join(","))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the subscribers");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.next_line().await.unwrap().unwrap_or_default();
    assert_eq!(ready, "READY", "the subscribers connect");
    let rss_connected = proc_status_kib("VmRSS:");
    let cpu0 = cpu_seconds();
    let started = Instant::now();
    // Each `say` returns as soon as Codex accepted the turn; the turns then run together.
    for id in &ids {
        relay.say(id, SayInput::text("go")).await.expect("say");
    }
    let result: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    let took = started.elapsed();
    let cpu = cpu_seconds() - cpu0;
    let rss_now = proc_status_kib("VmRSS:");
    let hwm = proc_status_kib("VmHWM:");
    let _ = child.wait().await;
    let delivered = result["delivered"].as_u64().unwrap();
    let p99 = result["p99Ms"].as_f64().unwrap();
    println!(
        "sse fan-out: {SESSIONS} sessions x {MESSAGES} messages at {rate}/s each, {} SSE subscribers: \
         {delivered} envelopes delivered in {:.2} s = {:.0} events/s; every subscriber got every \
         event once and in order: {} (missing {}, repeated or out of order {})",
        SESSIONS * SUBSCRIBERS,
        took.as_secs_f64(),
        delivered as f64 / took.as_secs_f64(),
        result["exact"],
        result["missing"],
        result["disorder"],
    );
    println!(
        "sse latency (fake writes -> subscriber parses), over {} messages: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (target p99 < 5 ms; p99 is {:.2}x the target)",
        result["samples"],
        result["p50Ms"].as_f64().unwrap(),
        p99,
        result["maxMs"].as_f64().unwrap(),
        p99 / 5.0,
    );
    println!(
        "sse relay: RSS {:.1} MB with 1,000 streams after the turns (peak {:.1} MB; {:.1} MB with 50 idle sessions, {:.1} MB with the streams connected; target < 100 MB: peak is {:.2}x the target); CPU {:.2} s for the turns",
        rss_now as f64 / 1024.0,
        hwm as f64 / 1024.0,
        rss_idle as f64 / 1024.0,
        rss_connected as f64 / 1024.0,
        hwm as f64 / 1024.0 / 100.0,
        cpu
    );
    relay.shutdown().await;
    drop(relay);
    // The baseline runs after the relay's memory was measured, so it does not inflate it.
    let (base_rate, _, base_p99) = engine_baseline(rate).await;
    println!(
        "sse vs the engine baseline: p99 latency {:.2}x, delivery rate {:.2}x",
        p99 / base_p99,
        delivered as f64 / took.as_secs_f64() / base_rate
    );
    println!("load average after: {}", codex_relay_bench::load_average());
}

async fn subscribe(addr: String, id: String, ready: Arc<AtomicUsize>) -> Seen {
    let mut r = connect(&addr, &id).await;
    ready.fetch_add(1, Ordering::SeqCst);
    read_envelopes(&mut r, MESSAGES).await
}

async fn subscribers() {
    let addr = std::env::var("SSE_ADDR").unwrap();
    let ids: Vec<String> = std::env::var("SSE_SESSIONS")
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    let ready = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for id in &ids {
        for _ in 0..SUBSCRIBERS {
            tasks.push(tokio::spawn(subscribe(
                addr.clone(),
                id.clone(),
                ready.clone(),
            )));
        }
    }
    while ready.load(Ordering::SeqCst) < tasks.len() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("READY");
    let mut all = Vec::new();
    let (mut delivered, mut missing, mut disorder) = (0, 0, 0);
    for t in tasks {
        let seen = tokio::time::timeout(Duration::from_secs(300), t)
            .await
            .expect("a subscriber finishes")
            .unwrap();
        delivered += seen.envelopes;
        missing += seen.missing;
        disorder += seen.disorder;
        all.extend(seen.latencies);
    }
    all.sort_unstable();
    let exact = missing == 0 && disorder == 0 && all.len() == ids.len() * SUBSCRIBERS * MESSAGES;
    println!(
        "{}",
        json!({"delivered": delivered, "missing": missing, "disorder": disorder, "exact": exact,
            "samples": all.len(), "p50Ms": pct(&all, 0.5), "p99Ms": pct(&all, 0.99),
            "maxMs": *all.last().unwrap_or(&0) as f64 / 1e6})
    );
}
