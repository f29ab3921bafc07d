//! Appends events of ~300 bytes of JSON to a store, flushes, and prints events/s.
//!
//! `cargo run --release -p codex-relay-core --example store_throughput [TARGET] [EVENTS]`
//! (TARGET defaults to a fresh SQLite file in a temp dir; EVENTS to 500000).

use std::time::Instant;

use codex_relay_core::store::{Store, StoredEvent};

const SESSIONS: usize = 16;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = tempfile::tempdir()?;
    let target = args
        .next()
        .unwrap_or_else(|| dir.path().join("relay.db").display().to_string());
    let total: usize = args
        .next()
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(500_000);

    let store = Store::open(&target).await?;
    // Each run starts past what an earlier run left in the same database.
    let base = store.last_seq("bench-0").await?;
    let filler = "x".repeat(177);
    let events: Vec<StoredEvent> = (0..total)
        .map(|i| {
            let session = i % SESSIONS;
            let seq = base + (i / SESSIONS) as i64 + 1;
            StoredEvent {
                session_id: format!("bench-{session}"),
                seq,
                time: 1_700_000_000_000 + i as i64,
                json: format!(
                    r#"{{"seq":{seq},"session":"bench-{session}","time":{},"ev":{{"type":"agent_message_delta","item":"msg_{i:08}","delta":"{filler}"}}}}"#,
                    1_700_000_000_000 + i as i64
                ),
            }
        })
        .collect();
    let bytes: usize = events.iter().map(|e| e.json.len()).sum();

    let started = Instant::now();
    for ev in events {
        store.append_event(ev);
    }
    let enqueued = started.elapsed();
    store.flush().await?;
    let elapsed = started.elapsed();
    store.close().await?;

    let rate = total as f64 / elapsed.as_secs_f64();
    println!(
        "{} store: {total} events ({} bytes of JSON each on average) enqueued in {enqueued:.2?}, committed in {elapsed:.2?}: {rate:.0} events/s",
        store.backend(),
        bytes / total.max(1),
    );
    Ok(())
}
