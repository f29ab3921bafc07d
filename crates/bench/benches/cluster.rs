//! One relay against three on one Postgres (docs/CLUSTER.md), the same total load (figures
//! printed, not asserted): 30 sessions on the fake app-server, each streaming one turn of 100
//! agent messages at `CLUSTER_RATE` per second (default 50), read by 3 SSE subscribers each.
//!
//! - One instance: every subscriber reads through the instance that runs the session (local).
//! - Three instances (A, B, C in this process, each with its own HTTP listener, as three
//!   `serve`s would be): sessions start round-robin through the three; each session has one
//!   subscriber on its owner (local) and one on each other instance (remote: the owner commits,
//!   `NOTIFY` wakes the mirror, which reads the rows).
//!
//! Latency is from the fake app-server writing a message (`t=<unix nanos>`) to a subscriber
//! parsing it. The target: a remote reader's p99 within 20 ms of a local reader's, in the same
//! run; no loss (every subscriber gets every event once and in order).
//!
//! Needs Postgres: `CODEX_RELAY_TEST_POSTGRES` (a schema of its own is made and left behind
//! for inspection). Run: `cargo bench -p codex-relay-bench --bench cluster`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use codex_relay_bench::sse::{Seen, connect, read_envelopes};
use codex_relay_codex::AppServerConfig;
use codex_relay_core::{CreateOptions, Relay, RelayConfig, SayInput};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FAKE: &str = env!("CARGO_BIN_EXE_fake-app-server");
const SESSIONS: usize = 30;
const READERS: usize = 3;
const MESSAGES: usize = 100;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize] as f64 / 1e6
}

async fn fresh_schema(base: &str, name: &str) -> String {
    let pool = sqlx::PgPool::connect(base).await.expect("Postgres");
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        % 1_000_000_000;
    let schema = format!("bench_{name}_{}_{nanos}", std::process::id());
    // The name is made here of letters, digits and underscores.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&pool)
        .await
        .expect("create schema");
    pool.close().await;
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-c%20search_path%3D{schema}")
}

/// An instance: the engine and the HTTP front on a loopback port.
async fn instance(db: &str, id: &str, rate: u64) -> (Relay, String) {
    let mut codex = AppServerConfig::new(FAKE);
    codex
        .env
        .push(("FAKE_EVENTS".into(), Some(MESSAGES.to_string().into())));
    codex
        .env
        .push(("FAKE_RATE".into(), Some(rate.to_string().into())));
    let mut config = RelayConfig::new(codex, db);
    config.max_sessions = 1000;
    config.cluster.instance_id = Some(id.into());
    let relay = Relay::open(config).await.expect("relay opens");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let app = codex_relay_http::secure(
        codex_relay_http::router(relay.clone(), Default::default()),
        codex_relay_http::Security {
            credentials: std::sync::Arc::new(codex_relay_http::auth::Credentials::new(None, None)),
            allowed_hosts: vec!["127.0.0.1".into(), "localhost".into()],
            cors_origins: vec![],
            body_limit: codex_relay_http::security::DEFAULT_BODY_LIMIT,
            trusted_proxies: vec![],
            streams: codex_relay_http::streams::StreamLimits {
                total: 4096,
                per_caller: 4096,
            },
        },
    );
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
    (relay, addr)
}

/// What one round measured.
struct Round {
    started_per_s: f64,
    events_per_s: f64,
    local: Vec<u64>,
    remote: Vec<u64>,
    exact: bool,
    missing: u64,
    disorder: u64,
}

/// Starts `SESSIONS` round-robin through `relays`, subscribes `READERS` readers to each (the
/// first on the owner, the others on the next instances round the ring), runs one turn in
/// every session at once and collects what the readers saw.
async fn round(relays: &[(Relay, String)]) -> Round {
    let started = Instant::now();
    let mut owned = Vec::new();
    for i in 0..SESSIONS {
        let (relay, _) = &relays[i % relays.len()];
        let (h, _) = relay
            .create(CreateOptions::default())
            .await
            .expect("create");
        owned.push((i % relays.len(), h.id().to_owned()));
    }
    let started_per_s = SESSIONS as f64 / started.elapsed().as_secs_f64();
    for (relay, _) in relays {
        relay.store().flush().await.unwrap();
    }
    let mut readers = Vec::new();
    for (owner, id) in &owned {
        for k in 0..READERS {
            let at = (owner + k) % relays.len();
            let addr = relays[at].1.clone();
            let id = id.clone();
            let mut r = connect(&addr, &id).await;
            let remote = at != *owner;
            readers.push(tokio::spawn(async move {
                (remote, read_envelopes(&mut r, MESSAGES).await)
            }));
        }
    }
    let t0 = Instant::now();
    for (owner, id) in &owned {
        relays[*owner]
            .0
            .say(id, SayInput::text("go"))
            .await
            .expect("say");
    }
    let mut out = Round {
        started_per_s,
        events_per_s: 0.0,
        local: Vec::new(),
        remote: Vec::new(),
        exact: true,
        missing: 0,
        disorder: 0,
    };
    let mut delivered = 0;
    for r in readers {
        let (remote, seen): (bool, Seen) = tokio::time::timeout(Duration::from_secs(300), r)
            .await
            .expect("a reader finishes")
            .unwrap();
        delivered += seen.envelopes;
        out.missing += seen.missing;
        out.disorder += seen.disorder;
        out.exact &= seen.latencies.len() == MESSAGES && seen.missing == 0 && seen.disorder == 0;
        if remote {
            out.remote.extend(seen.latencies);
        } else {
            out.local.extend(seen.latencies);
        }
    }
    out.events_per_s = delivered as f64 / t0.elapsed().as_secs_f64();
    out.local.sort_unstable();
    out.remote.sort_unstable();
    out
}

fn report(name: &str, r: &Round) {
    println!(
        "{name}: {SESSIONS} sessions started at {:.1}/s; {:.0} events/s to {} SSE readers; every reader got every event once and in order: {} (missing {}, repeated or out of order {})",
        r.started_per_s,
        r.events_per_s,
        SESSIONS * READERS,
        r.exact,
        r.missing,
        r.disorder
    );
    println!(
        "{name}: local readers p50 {:.2} ms, p99 {:.2} ms ({} samples)",
        pct(&r.local, 0.5),
        pct(&r.local, 0.99),
        r.local.len()
    );
    if !r.remote.is_empty() {
        println!(
            "{name}: remote readers p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} samples)",
            pct(&r.remote, 0.5),
            pct(&r.remote, 0.99),
            r.remote.last().copied().unwrap_or(0) as f64 / 1e6,
            r.remote.len()
        );
    }
}

fn main() {
    let Some(base) = std::env::var("CODEX_RELAY_TEST_POSTGRES")
        .ok()
        .filter(|v| !v.is_empty())
    else {
        println!("cluster bench skipped: it needs Postgres (set CODEX_RELAY_TEST_POSTGRES)");
        return;
    };
    let rate = env_u64("CLUSTER_RATE", 50);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        println!("load average before: {} (2 cores, shared)", codex_relay_bench::load_average());
        let one_db = fresh_schema(&base, "one").await;
        let one = vec![instance(&one_db, "solo", rate).await];
        let alone = round(&one).await;
        report("one instance", &alone);
        for (r, _) in &one {
            r.shutdown().await;
        }
        drop(one);

        let three_db = fresh_schema(&base, "three").await;
        let mut three = Vec::new();
        for id in ["A", "B", "C"] {
            three.push(instance(&three_db, id, rate).await);
        }
        let spread = round(&three).await;
        report("three instances", &spread);
        let extra = pct(&spread.remote, 0.99) - pct(&spread.local, 0.99);
        println!(
            "remote vs local p99 in the three-instance run: +{extra:.2} ms (target within 20 ms: {:.2}x the allowance); remote p99 vs the one-instance local p99: {:.2}x",
            extra / 20.0,
            pct(&spread.remote, 0.99) / pct(&alone.local, 0.99)
        );
        for (r, _) in &three {
            r.shutdown().await;
        }
        println!("load average after: {}", codex_relay_bench::load_average());
    });
}
