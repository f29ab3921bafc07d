//! A slow subscriber must not slow anyone else (issue 11): one session on the fake app-server
//! streams agent messages at a steady rate for about 15 s through the HTTP front; subscriber A
//! reads its SSE stream as it comes, subscriber B connects and then stops reading for 10 s
//! (its socket buffers fill), then reads on. Figures: A's delivery latency (fake writes a
//! message → A parses it) while B stalls, against the same run with no B (the baseline, same
//! process, run first), and whether B afterwards received every envelope once and in order.
//!
//! Run: `cargo bench -p codex-relay-bench --bench slow_subscriber`

use std::time::{Duration, Instant};

use codex_relay_bench::sse::{Seen, connect, read_envelopes};
use codex_relay_codex::AppServerConfig;
use codex_relay_core::{CreateOptions, Relay, RelayConfig, SayInput};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FAKE: &str = env!("CARGO_BIN_EXE_fake-app-server");
const RATE: u64 = 1000;
const MESSAGES: u64 = 15_000;
const STALL: Duration = Duration::from_secs(10);

async fn subscribe(addr: String, id: String, stall: Option<Duration>) -> Seen {
    let mut r = connect(&addr, &id).await;
    if let Some(stall) = stall {
        tokio::time::sleep(stall).await;
    }
    read_envelopes(&mut r, MESSAGES as usize).await
}

fn ms(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize] as f64 / 1e6
}

/// One run: A alone, or A with a stalling B. Returns (A, B).
async fn run(with_slow: bool) -> (Seen, Option<Seen>) {
    let dir = tempfile::tempdir().unwrap();
    let mut codex = AppServerConfig::new(FAKE);
    codex
        .env
        .push(("FAKE_EVENTS".into(), Some(MESSAGES.to_string().into())));
    codex
        .env
        .push(("FAKE_RATE".into(), Some(RATE.to_string().into())));
    let config = RelayConfig::new(codex, dir.path().join("bench.db").display().to_string());
    let relay = Relay::open(config).await.expect("relay opens");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let app = codex_relay_http::router(relay.clone(), Default::default());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (h, _) = relay.create(CreateOptions::default()).await.unwrap();
    let id = h.id().to_owned();
    let a = tokio::spawn(subscribe(addr.clone(), id.clone(), None));
    let b = with_slow.then(|| tokio::spawn(subscribe(addr.clone(), id.clone(), Some(STALL))));
    tokio::time::sleep(Duration::from_millis(300)).await;
    relay.say(&id, SayInput::text("go")).await.unwrap();
    let started = Instant::now();
    let a = a.await.unwrap();
    let b = match b {
        Some(b) => Some(b.await.unwrap()),
        None => None,
    };
    eprintln!("  run took {:.1} s", started.elapsed().as_secs_f64());
    relay.shutdown().await;
    (a, b)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (mut alone, _) = run(false).await;
        let (mut a, b) = run(true).await;
        let b = b.expect("the slow subscriber ran");
        alone.latencies.sort_unstable();
        a.latencies.sort_unstable();
        println!(
            "baseline, A alone: {} messages, latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            alone.latencies.len(),
            ms(&alone.latencies, 0.5),
            ms(&alone.latencies, 0.99),
            ms(&alone.latencies, 1.0)
        );
        let extra = ms(&a.latencies, 1.0) - ms(&alone.latencies, 1.0);
        println!(
            "A beside B stalled {} s: {} messages, latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; p99 {:.2}x the baseline's; worst extra delay {:.2} ms (target <= 50 ms)",
            STALL.as_secs(),
            a.latencies.len(),
            ms(&a.latencies, 0.5),
            ms(&a.latencies, 0.99),
            ms(&a.latencies, 1.0),
            ms(&a.latencies, 0.99) / ms(&alone.latencies, 0.99),
            extra.max(0.0),
        );
        println!(
            "B after its stall: {} envelopes, {} texts, {} missing, {} repeated or out of order (A: {} missing, {} out of order)",
            b.envelopes, b.latencies.len(), b.missing, b.disorder, a.missing, a.disorder
        );
    });
}
