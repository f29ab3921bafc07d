//! Memory under a flood (issue 11): 200k events from the fake app-server through a store made
//! deliberately slow, once with the store's write-queue bound (backpressure on) and once with it
//! out of reach, each in a fresh process so peak RSS (VmHWM) is its own. Checks every event
//! landed, in order; prints the figures. `FLOOD_MAX_QUEUED_BYTES` overrides the bound.
//!
//! Run: `cargo bench -p codex-relay-bench --bench flood`

use std::time::{Duration, Instant};

use codex_relay_codex::AppServerConfig;
use codex_relay_core::{CreateOptions, Ev, Relay, RelayConfig, SayInput, SessionStatus};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FAKE: &str = env!("CARGO_BIN_EXE_fake-app-server");
const EVENTS: u64 = 200_000;
/// Each store commit waits this long: a store well behind a fast Codex.
const SLOW_COMMIT: Duration = Duration::from_millis(25);

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

async fn flood(bounded: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut codex = AppServerConfig::new(FAKE);
    codex
        .env
        .push(("FAKE_EVENTS".into(), Some(EVENTS.to_string().into())));
    let mut config = RelayConfig::new(codex, dir.path().join("flood.db").display().to_string());
    config.store_options.commit_delay = SLOW_COMMIT;
    if let Some(n) = std::env::var("FLOOD_MAX_QUEUED_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.store_options.max_queued_bytes = n;
    }
    if !bounded {
        config.store_options.max_queued_bytes = usize::MAX / 4;
    }
    let relay = Relay::open(config).await.expect("relay opens");
    let (h, _) = relay.create(CreateOptions::default()).await.unwrap();
    let id = h.id().to_owned();
    let started = Instant::now();
    relay.say(&id, SayInput::text("go")).await.unwrap();
    while relay.status(&id).unwrap().status != SessionStatus::Idle {
        relay.wait(&id, 0, Duration::from_millis(200)).await.ok();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    relay.store().flush().await.unwrap();
    let took = started.elapsed();
    // The peak of the flood itself, before the check below reads the log back.
    let peak = peak_rss_mb();
    // Every event is in the store, contiguous and in the order the fake sent them.
    let mut last_counter = None;
    let mut stored = 0i64;
    loop {
        let page = relay.store().events(&id, stored, 10_000).await.unwrap();
        if page.is_empty() {
            break;
        }
        for e in &page {
            stored += 1;
            assert_eq!(e.seq, stored, "contiguous");
            let env: codex_relay_core::Envelope = serde_json::from_str(&e.json).unwrap();
            if let Ev::Text { text, .. } = &env.ev
                && let Some(n) = text.strip_prefix("t=").and_then(|n| n.parse::<u128>().ok())
            {
                assert!(last_counter <= Some(n), "in order");
                last_counter = Some(n);
            }
        }
    }
    println!(
        "flood {}: {} events stored in {:.1} s through a store committing every {} ms; peak RSS {:.1} MB (target < 80 MB: {:.2}x); ingest paused {} times",
        if bounded {
            "with the store queue bounded"
        } else {
            "store queue unbounded (as before)"
        },
        stored,
        took.as_secs_f64(),
        SLOW_COMMIT.as_millis(),
        peak,
        peak / 80.0,
        relay.store().stats().pauses(),
    );
    relay.shutdown().await;
}

fn main() {
    let which = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    match which.as_deref() {
        Some("bounded") => rt.block_on(flood(true)),
        Some("unbounded") => rt.block_on(flood(false)),
        _ => {
            // Each in a fresh process: peak RSS is per process.
            let me = std::env::current_exe().unwrap();
            for arg in ["bounded", "unbounded"] {
                let status = std::process::Command::new(&me).arg(arg).status().unwrap();
                assert!(status.success(), "{arg} run failed");
            }
        }
    }
}
