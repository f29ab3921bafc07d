//! The long fault-injection run over a cluster (docs/CLUSTER.md, "Failures";
//! `codex_relay_testkit::chaos`): three `codex-relay serve` instances on a private Postgres, the
//! real Codex and the scripted model; cycle after cycle one fault — Postgres stopped for 0.3 to
//! 2.2 leases, the owner of a running command paused (SIGSTOP) for 0.4 to 2.2 leases, or killed
//! (SIGKILL) and started again under its id after up to 1.5 leases — while clients create
//! sessions, send messages and answer approvals through every instance; after each cycle the
//! invariant checker runs over the store and over what clients were told. Prints the cycles,
//! the faults, every kind of answer clients got, the invariant counts, any violation, and the
//! wall time; exits 1 when something was found wrong.
//!
//! Needs PostgreSQL server binaries (a private server is started and stopped) and the
//! `codex-relay` binary: `CODEX_RELAY_BIN`, else the one of the same profile beside this bench
//! (`cargo build --release -p codex-relay` before `cargo bench`). Settings: `CHAOS_CYCLES`
//! (default 30), `CHAOS_LEASE_MS` (default 4000), `CHAOS_SEED` (to repeat a run).
//! Run: `cargo bench -p codex-relay-bench --bench cluster_faults`.

use std::path::PathBuf;
use std::time::Duration;

use codex_relay_testkit::chaos::{Config, run};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The `codex-relay` binary: `CODEX_RELAY_BIN`, else the one the same profile built
/// (`target/<profile>/codex-relay`, two levels above this bench's executable).
fn relay_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("CODEX_RELAY_BIN") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("this bench's path");
    let beside = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("codex-relay"))
        .expect("a target directory");
    if !beside.exists() {
        eprintln!(
            "no codex-relay binary at {}: build it with the bench's profile (`cargo build --release -p codex-relay`) or set CODEX_RELAY_BIN",
            beside.display()
        );
        std::process::exit(2);
    }
    beside
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let relay = relay_bin();
    let codex = codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST)
        .expect("the pinned Codex installs");
    let cycles = env_u64("CHAOS_CYCLES").unwrap_or(30) as usize;
    let lease = Duration::from_millis(env_u64("CHAOS_LEASE_MS").unwrap_or(4000));
    let seed = env_u64("CHAOS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    println!(
        "cluster faults: {cycles} cycles, lease {lease:?}, seed {seed}, relay {}, load average before {}",
        relay.display(),
        codex_relay_bench::load_average()
    );
    let Some(report) = run(Config {
        relay,
        codex,
        cycles,
        lease,
        seed,
        progress: true,
    })
    .await
    else {
        eprintln!("skipped: no PostgreSQL server binaries for a private server");
        std::process::exit(2);
    };
    println!(
        "\n{} cycles in {:.1?} (load average after {})",
        report.cycles,
        report.elapsed,
        codex_relay_bench::load_average()
    );
    println!("faults:");
    for (kind, n) in &report.faults {
        println!("  {n:>6}  {kind}");
    }
    println!("what clients were answered:");
    for (answer, n) in &report.told {
        println!("  {n:>6}  {answer}");
    }
    println!("invariants checked:");
    for (what, n) in &report.checked {
        println!("  {n:>6}  {what}");
    }
    println!("violations: {}", report.violations.len());
    for v in &report.violations {
        println!("  - {v}");
    }
    if !report.violations.is_empty() {
        println!("the instances' logs: {}", report.dir.display());
        std::process::exit(1);
    }
}
