//! A short fault-injection run (docs/CLUSTER.md, "Failures"; `codex_relay_testkit::chaos`):
//! three `serve` instances on a private Postgres, over the real Codex with the scripted model;
//! one cycle of each fault — Postgres stopped past the lease, the owner of a running command
//! paused past it, that owner killed and started again — while clients create sessions, send
//! messages and answer approvals through every instance. After each cycle the checker finds
//! every acknowledged session, message, answer and close in Postgres, every log's seqs 1..n,
//! every reader shown each seq once as stored, no request resolved twice, and no command run
//! twice or on two instances. The long run is the `cluster_faults` bench.
//!
//! Skipped, with the reason, without PostgreSQL server binaries. `CHAOS_SEED` repeats a run.

use std::time::Duration;

use codex_relay_testkit::chaos::{Config, run};

use crate::cluster_support::{LEASE_MS, NEWEST};
use crate::common::RELAY;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_a_cycle_of_each_fault_keeps_every_invariant() {
    let seed = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("fault-injection seed {seed} (CHAOS_SEED={seed} repeats it)");
    let Some(report) = run(Config {
        relay: RELAY.into(),
        codex: codex_relay_testkit::codex_bin(NEWEST).expect("pinned Codex installs"),
        cycles: 3,
        lease: Duration::from_millis(LEASE_MS),
        seed,
        progress: true,
    })
    .await
    else {
        return;
    };
    eprintln!(
        "{} cycles in {:.1?}; faults {:?}; told {:?}; checked {:?}",
        report.cycles, report.elapsed, report.faults, report.told, report.checked
    );
    assert!(
        report.violations.is_empty(),
        "{} violation(s) (the instances' logs are in {}):\n{}",
        report.violations.len(),
        report.dir.display(),
        report.violations.join("\n")
    );
    assert_eq!(report.faults.len(), 3, "one cycle of each fault");
    let told = |key: &str| report.told.get(key).copied().unwrap_or(0);
    assert!(
        told("create 201") >= 9,
        "sessions were acknowledged: {:?}",
        report.told
    );
    assert!(
        report
            .checked
            .get("acknowledgements checked")
            .copied()
            .unwrap_or(0)
            > 0
            && report
                .checked
                .get("stored events checked")
                .copied()
                .unwrap_or(0)
                > 0
            && report
                .checked
                .get("events shown checked")
                .copied()
                .unwrap_or(0)
                > 0,
        "the checker looked at something: {:?}",
        report.checked
    );
}
