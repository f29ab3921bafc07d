//! Retention under load (issue 35): a store filled with a week of synthetic events (60
//! sessions, `RETENTION_EVENTS`, default 210,000, evenly spread), then writers committing as
//! fast as the store takes them (bursts of 20 events, each followed by a flush), first alone
//! and then while one pass of a one-day retention prunes six days of it. Prints how long the
//! pass took and the writers' throughput and commit latency without and with it, and their
//! ratio, all from the same run. SQLite always; Postgres too when CODEX_RELAY_TEST_POSTGRES is
//! set (a schema of its own, left behind).
//!
//! Run: `cargo bench -p codex-relay-bench --bench retention`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use codex_relay_core::store::{Retention, SessionRecord, Store, StoreOptions, StoredEvent};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DAY: i64 = 24 * 3600 * 1000;
const SESSIONS: usize = 60;
const WRITERS: usize = 4;
const BURST: i64 = 20;
const ALONE: Duration = Duration::from_secs(6);

use codex_relay_core::time::now_ms;

fn session(id: &str, status: &str) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        thread_id: format!("thread-{id}"),
        cwd: None,
        model: None,
        status: status.into(),
        created_at: now_ms() - 7 * DAY,
        updated_at: now_ms(),
        turn_count: 1,
        last_seq: 0,
        meta: "{}".into(),
    }
}

/// An event about the size of a streamed agent message's (400 bytes of JSON).
fn event(session_id: &str, seq: i64, time: i64) -> StoredEvent {
    StoredEvent {
        session_id: session_id.into(),
        seq,
        time,
        json: format!(
            r#"{{"id":"{session_id}:{seq}","seq":{seq},"time":{time},"role":"agent","turn":"t","ev":{{"t":"text","text":"{}"}}}}"#,
            "lorem ipsum ".repeat(28)
        ),
    }
}

/// A week of events, oldest first, as a relay would have written them.
async fn fill(store: &Store, events: i64) -> Duration {
    let started = Instant::now();
    let week_start = now_ms() - 7 * DAY;
    for s in 0..SESSIONS {
        store.upsert_session(session(&format!("old-{s}"), "idle"));
    }
    let mut seqs = [0i64; SESSIONS];
    let mut burst = Vec::new();
    for i in 0..events {
        let s = (i as usize * 7919) % SESSIONS;
        seqs[s] += 1;
        let time = week_start + i * (7 * DAY) / events;
        burst.push(event(&format!("old-{s}"), seqs[s], time));
        if burst.len() == 1000 {
            store.append_events(std::mem::take(&mut burst));
        }
        if i % 20_000 == 19_999 {
            store.flush().await.unwrap();
        }
    }
    store.append_events(burst);
    store.flush().await.unwrap();
    started.elapsed()
}

/// What the writers did in one phase.
struct Phase {
    events: u64,
    took: Duration,
    latencies: Vec<Duration>,
}

impl Phase {
    fn rate(&self) -> f64 {
        self.events as f64 / self.took.as_secs_f64()
    }
    fn pct(&self, p: f64) -> f64 {
        let mut l = self.latencies.clone();
        l.sort();
        l.get(((l.len().max(1) - 1) as f64 * p).round() as usize)
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
    }
}

/// Writers commit bursts until `stop` is set; what they did.
async fn write_until(
    store: &Store,
    first_seq: &mut [i64; WRITERS],
    stop: Arc<AtomicBool>,
) -> Phase {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (w, first) in first_seq.iter().enumerate() {
        let (store, stop, first) = (store.clone(), stop.clone(), *first);
        tasks.push(tokio::spawn(async move {
            let id = format!("live-{w}");
            let (mut seq, mut latencies) = (first, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                store.append_events((1..=BURST).map(|k| event(&id, seq + k, now_ms())).collect());
                store.flush().await.unwrap();
                latencies.push(t.elapsed());
                seq += BURST;
            }
            (seq, latencies)
        }));
    }
    let mut phase = Phase {
        events: 0,
        took: Duration::ZERO,
        latencies: Vec::new(),
    };
    for (w, t) in tasks.into_iter().enumerate() {
        let (seq, latencies) = t.await.unwrap();
        phase.events += (seq - first_seq[w]) as u64;
        first_seq[w] = seq;
        phase.latencies.extend(latencies);
    }
    phase.took = started.elapsed();
    phase
}

async fn run(name: &str, target: &str, events: i64) {
    let store = Store::open_with(target, StoreOptions::default())
        .await
        .expect("store opens");
    for w in 0..WRITERS {
        store.upsert_session(session(&format!("live-{w}"), "active"));
    }
    let filled = fill(&store, events).await;
    let size = store.size().await.unwrap();
    println!(
        "{name}: filled a week of {events} events in {:.1} s; store {:.0} MiB in use, {:.0} MiB on disk",
        filled.as_secs_f64(),
        size.used as f64 / 1048576.0,
        size.on_disk as f64 / 1048576.0
    );
    let mut seqs = [0i64; WRITERS];

    let stop = Arc::new(AtomicBool::new(false));
    let stopper = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ALONE).await;
            stop.store(true, Ordering::Relaxed);
        })
    };
    let alone = write_until(&store, &mut seqs, stop).await;
    stopper.await.unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let pruner = {
        let (store, stop) = (store.clone(), stop.clone());
        tokio::spawn(async move {
            let retention = Retention {
                max_age: Some(Duration::from_millis(DAY as u64)),
                ..Retention::default()
            };
            let report = store.prune(&retention).await.unwrap();
            stop.store(true, Ordering::Relaxed);
            report
        })
    };
    let pruning = write_until(&store, &mut seqs, stop).await;
    let report = pruner.await.unwrap();
    let after = store.size().await.unwrap();

    println!(
        "{name}: pruning {} events (and {} other rows) took {:.2} s in {} batches ({:.0} events/s); store {:.0} MiB in use after",
        report.events,
        report.rows() - report.events,
        report.took.as_secs_f64(),
        report.batches,
        report.events as f64 / report.took.as_secs_f64(),
        after.used as f64 / 1048576.0
    );
    for (label, p) in [("without pruning", &alone), ("while pruning  ", &pruning)] {
        println!(
            "{name}: writers {label}: {:>8.0} events/s committed; commit p50 {:.1} ms, p99 {:.1} ms ({} bursts of {BURST})",
            p.rate(),
            p.pct(0.5),
            p.pct(0.99),
            p.latencies.len()
        );
    }
    println!(
        "{name}: writer throughput while pruning / without: {:.2}",
        pruning.rate() / alone.rate()
    );
    let kept = store.events("old-0", 0, 1_000_000).await.unwrap();
    let cutoff = now_ms() - DAY;
    assert!(
        kept.iter().all(|e| e.time >= cutoff - 60_000),
        "an event past the limit is left"
    );
    store.close().await.unwrap();
}

#[tokio::main]
async fn main() {
    let events: i64 = std::env::var("RETENTION_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(210_000);
    println!("load average: {}", codex_relay_bench::load_average());
    let dir = tempfile::tempdir().unwrap();
    run(
        "sqlite",
        &dir.path().join("week.db").display().to_string(),
        events,
    )
    .await;
    match std::env::var("CODEX_RELAY_TEST_POSTGRES") {
        Ok(base) => {
            run(
                "postgres",
                &codex_relay_bench::fresh_schema(&base, "retention").await,
                events,
            )
            .await
        }
        Err(_) => println!("postgres: skipped (set CODEX_RELAY_TEST_POSTGRES)"),
    }
}
