//! A soak that compresses days (issue 35): many sessions × many turns with approvals, Codex
//! processes SIGKILLed mid-round, the engine shut down and opened again, and on Postgres the
//! database restarted under running turns; the engine's process RSS and open descriptors are
//! sampled over the run and reported as a least-squares slope (KB per 1000 turns) and
//! start/end counts. After each phase the engine is opened once more on the same store and every
//! session's log is checked as stored: `seq` contiguous from 1 (a gap is a lost event, a repeat a
//! duplicate), every turn that started has exactly one end, every completed turn has all the
//! fake's items exactly once, every request opened was resolved; and no Codex process is left.
//!
//! Phases: the fake app-server (volume: `SOAK_SESSIONS` sessions × `SOAK_ROUNDS` rounds ×
//! `SOAK_TURNS` turns per round, `SOAK_EVENTS` items per turn, every `SOAK_APPROVE_EVERY`th turn
//! of a process asks an approval the driver accepts), on SQLite and on a private Postgres
//! (`SOAK_BACKENDS`, default `sqlite,postgres`; Postgres needs its server binaries), then the
//! real Codex 0.169 with the scripted model (`SOAK_REAL_SESSIONS` × `SOAK_REAL_TURNS`, each turn
//! a command needing approval; one Codex killed while an approval waits, one engine restart).
//! Codex processes are recycled on the way (`SOAK_RECYCLE_TURNS` turns per process for the fake,
//! 4 for the real Codex). The engine runs in this process (so its RSS is the engine's plus the
//! driver's, which holds nothing per turn); a relay on Postgres here runs alone (no cluster:
//! the cluster's faults are `cluster_faults`'s).
//!
//! Run: `cargo bench -p codex-relay-bench --bench soak` (a few minutes on two cores); scale with
//! e.g. `SOAK_ROUNDS=30 SOAK_TURNS=100`. Exits 1 when something was lost, duplicated or left.

#[path = "soak/check.rs"]
mod check;
#[path = "soak/sampler.rs"]
mod sampler;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use codex_relay_codex::AppServerConfig;
use codex_relay_core::{
    Answer, CreateOptions, Decider, PermissionMode, RecyclePolicy, Relay, RelayConfig, SayInput,
    SessionStatus,
};
use codex_relay_testkit::{CodexHome, ModelServer, Reply};

use check::Verdict;
use sampler::Sampler;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FAKE: &str = env!("CARGO_BIN_EXE_fake-app-server");

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one phase did.
#[derive(Default)]
struct Tally {
    turns: AtomicU64,
    failed_turns: AtomicU64,
    approvals: AtomicU64,
    codex_kills: AtomicU64,
    relay_restarts: AtomicU64,
    postgres_restarts: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Runs one turn to its end, accepting every approval it asks; whether it completed.
async fn turn(relay: &Relay, id: &str, text: &str, tally: &Tally) -> bool {
    let mut pause = Duration::from_millis(50);
    // A say can fail while Codex restarts after a kill; tried again with backoff.
    for _ in 0..20 {
        match relay.say(id, SayInput::text(text)).await {
            Ok(_) => break,
            Err(e) => {
                eprintln!("  say {id}: {e} (trying again)");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        }
    }
    loop {
        let Ok(snap) = relay.status(id) else {
            return false;
        };
        match snap.status {
            SessionStatus::AwaitingApproval | SessionStatus::AwaitingInput => {
                for p in &snap.pending {
                    let by = Decider::library("soak");
                    if relay
                        .respond(id, &p.id, Answer::approve(), by)
                        .await
                        .is_ok()
                    {
                        tally.approvals.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let _ = relay.wait(id, snap.last_seq, Duration::from_secs(1)).await;
            }
            SessionStatus::Active => {
                let _ = relay.wait(id, snap.last_seq, Duration::from_secs(1)).await;
            }
            SessionStatus::Idle => {
                tally.turns.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            _ => {
                tally.turns.fetch_add(1, Ordering::Relaxed);
                tally.failed_turns.fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
    }
}

/// Every session runs `turns` turns, all sessions at once.
async fn round(relay: &Relay, ids: &[String], turns: usize, marker: &str, tally: &Arc<Tally>) {
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (relay, id, tally) = (relay.clone(), id.clone(), tally.clone());
            let marker = marker.to_owned();
            tokio::spawn(async move {
                for t in 0..turns {
                    turn(&relay, &id, &format!("{marker} turn {t}"), &tally).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("a driver task");
    }
}

/// SIGKILLs one running Codex process of the relay's pool; whether there was one.
fn kill_a_codex(relay: &Relay) -> bool {
    let Some(pid) = relay.codex_processes().iter().find_map(|p| p.pid) else {
        return false;
    };
    // SAFETY: kill(2) of an app-server this engine spawned.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    true
}

/// Waits until `n` more turns ended since `from` (or the round is over).
async fn after_turns(tally: &Tally, from: u64, n: u64) {
    while tally.turns.load(Ordering::Relaxed) < from + n {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Phase {
    name: String,
    tally: Arc<Tally>,
    recycles: u64,
    wall: Duration,
    verdict: Verdict,
    samples: sampler::Figures,
}

async fn fake_phase(backend: &str) -> Option<Phase> {
    let sessions = knob("SOAK_SESSIONS", 8);
    let rounds = knob("SOAK_ROUNDS", 12);
    let turns = knob("SOAK_TURNS", 150);
    let events = knob("SOAK_EVENTS", 20);
    let approve_every = knob("SOAK_APPROVE_EVERY", 3);
    let recycle_turns = knob("SOAK_RECYCLE_TURNS", 400);
    let dir = tempfile::tempdir().unwrap();
    let pg = match backend {
        "postgres" => Some(codex_relay_testkit::postgres::Private::start()?),
        _ => None,
    };
    let store = match &pg {
        Some(pg) => pg.url(),
        None => dir.path().join("soak.db").display().to_string(),
    };
    let mut codex = AppServerConfig::new(FAKE);
    codex.env.extend([
        ("FAKE_EVENTS".into(), Some(events.to_string().into())),
        (
            "FAKE_APPROVE_EVERY".into(),
            Some(approve_every.to_string().into()),
        ),
    ]);
    let mut config = RelayConfig::new(codex, store);
    config.cluster.enabled = false;
    config.crash_policy.max_crashes = u32::MAX;
    config.sessions_per_codex = (sessions / 2).max(1);
    config.recycle = RecyclePolicy {
        max_turns: Some(recycle_turns as u64),
        check_every: Duration::from_millis(500),
        ..Default::default()
    };
    let tally = Arc::new(Tally::default());
    let sampler = Sampler::start(tally_turns(&tally));
    let started = Instant::now();
    let mut relay = Relay::open(config.clone()).await.expect("the engine opens");
    let mut ids = Vec::new();
    for _ in 0..sessions {
        let (h, _) = relay.create(CreateOptions::default()).await.unwrap();
        ids.push(h.id().to_owned());
    }
    let mut recycles = 0;
    for r in 0..rounds {
        let before = tally.turns.load(Ordering::Relaxed);
        let half = (sessions * turns / 2) as u64;
        let driving = {
            let (relay, ids, tally) = (relay.clone(), ids.clone(), tally.clone());
            tokio::spawn(async move { round(&relay, &ids, turns, "SOAK", &tally).await })
        };
        // Mid-round faults: a Codex killed; on Postgres, every other round the database
        // restarted under the running turns.
        after_turns(&tally, before, half / 2).await;
        if kill_a_codex(&relay) {
            bump(&tally.codex_kills);
        }
        if let Some(pg) = &pg
            && r % 2 == 1
        {
            after_turns(&tally, before, half).await;
            tokio::task::block_in_place(|| {
                pg.stop();
                std::thread::sleep(Duration::from_millis(1500));
                pg.start_again();
            });
            bump(&tally.postgres_restarts);
        }
        driving.await.expect("the round");
        // Between rounds, every third: the engine stopped and opened again.
        if r % 3 == 2 {
            recycles += relay.codex_recycles();
            relay.shutdown().await;
            relay = Relay::open(config.clone())
                .await
                .expect("the engine opens again");
            bump(&tally.relay_restarts);
        }
        eprintln!(
            "  {backend} round {}/{rounds}: {} turns so far, rss {} KB, fds {}",
            r + 1,
            tally.turns.load(Ordering::Relaxed),
            sampler.last_rss_kb(),
            sampler.last_fds()
        );
    }
    recycles += relay.codex_recycles();
    let samples = sampler.finish();
    let wall = started.elapsed();
    relay.shutdown().await;
    // Read back as stored, by an engine opened again.
    let relay = Relay::open(config.clone()).await.expect("reopened");
    let verdict = check::logs(&relay, &ids, Some(events)).await;
    relay.shutdown().await;
    let verdict = verdict.with_orphans(check::orphans_by_cmdline(FAKE).await);
    drop(pg);
    Some(Phase {
        name: format!("fake app-server, {backend}"),
        tally,
        recycles,
        wall,
        verdict,
        samples,
    })
}

fn tally_turns(tally: &Arc<Tally>) -> impl Fn() -> u64 + Send + 'static {
    let tally = tally.clone();
    move || tally.turns.load(Ordering::Relaxed)
}

async fn real_phase() -> Phase {
    let sessions = knob("SOAK_REAL_SESSIONS", 3);
    let turns = knob("SOAK_REAL_TURNS", 20);
    let model = ModelServer::start().await;
    let home = CodexHome::new(model.url());
    let bin = codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST).expect("Codex");
    let mut codex = AppServerConfig::new(bin).codex_home(home.path());
    let user_home = home.root().join("user-home");
    std::fs::create_dir_all(&user_home).unwrap();
    codex
        .env
        .push(("HOME".into(), Some(user_home.into_os_string())));
    let store = home.root().join("soak.db").display().to_string();
    let mut config = RelayConfig::new(codex, store);
    config.crash_policy.max_crashes = u32::MAX;
    config.recycle = RecyclePolicy {
        max_turns: Some(4),
        check_every: Duration::from_millis(500),
        ..Default::default()
    };
    for s in 0..sessions {
        let mut replies = Vec::new();
        for t in 0..turns + 2 {
            replies.push(Reply::exec(
                &format!("touch real-{s}-{t}.txt"),
                &format!("c{s}-{t}"),
            ));
            replies.push(Reply::text(format!("done {s} {t}")));
        }
        replies.extend((0..4).map(|_| Reply::text("spare")));
        model.route(&format!("REAL-{s}:"), replies);
    }
    let tally = Arc::new(Tally::default());
    let sampler = Sampler::start(tally_turns(&tally));
    let started = Instant::now();
    let mut relay = Relay::open(config.clone()).await.expect("the engine opens");
    let mut ids = Vec::new();
    for s in 0..sessions {
        let (h, _) = relay
            .create(CreateOptions {
                cwd: Some(home.workspace().display().to_string()),
                mode: Some(PermissionMode::Default),
                ..Default::default()
            })
            .await
            .unwrap();
        ids.push((s, h.id().to_owned()));
    }
    let mut recycles = 0;
    for t in 0..turns {
        // Halfway: a Codex killed while an approval waits, then the engine restarted.
        if t == turns / 2 {
            let (s, id) = &ids[0];
            relay
                .say(id, SayInput::text(format!("REAL-{s}: turn {t} (killed)")))
                .await
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(120);
            while relay.status(id).unwrap().status != SessionStatus::AwaitingApproval
                && Instant::now() < deadline
            {
                let last = relay.status(id).unwrap().last_seq;
                let _ = relay.wait(id, last, Duration::from_secs(1)).await;
            }
            if let Some(pid) = relay.codex_pid(id) {
                // SAFETY: kill(2) of an app-server this engine spawned.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                bump(&tally.codex_kills);
            }
            // The killed turn ends failed; the session continues below.
            turn(&relay, id, &format!("REAL-{s}: after the kill"), &tally).await;
            recycles += relay.codex_recycles();
            relay.shutdown().await;
            relay = Relay::open(config.clone()).await.expect("opens again");
            bump(&tally.relay_restarts);
        }
        let tasks: Vec<_> = ids
            .iter()
            .map(|(s, id)| {
                let (relay, id, tally) = (relay.clone(), id.clone(), tally.clone());
                let text = format!("REAL-{s}: turn {t}");
                tokio::spawn(async move { turn(&relay, &id, &text, &tally).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        // A person's think time: the process is idle for a moment, when it can be recycled.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        eprintln!(
            "  real codex turn {}/{turns}: rss {} KB, fds {}",
            t + 1,
            sampler.last_rss_kb(),
            sampler.last_fds()
        );
    }
    recycles += relay.codex_recycles();
    let samples = sampler.finish();
    let wall = started.elapsed();
    relay.shutdown().await;
    let relay = Relay::open(config.clone()).await.expect("reopened");
    let only_ids: Vec<String> = ids.iter().map(|(_, id)| id.clone()).collect();
    let verdict = check::logs(&relay, &only_ids, None).await;
    relay.shutdown().await;
    let verdict = verdict.with_orphans(
        check::orphans_by_env(&format!("CODEX_HOME={}", home.path().display())).await,
    );
    Phase {
        name: "real Codex 0.169, sqlite".into(),
        tally,
        recycles,
        wall,
        verdict,
        samples,
    }
}

fn print(p: &Phase) {
    let t = &p.tally;
    let s = &p.samples;
    println!("\n== {} ({:.1} s)", p.name, p.wall.as_secs_f64());
    println!(
        "turns {} (ended failed/cut: {}), approvals answered {}, Codex kills {}, engine restarts {}, Postgres restarts {}, Codex recycles {}",
        t.turns.load(Ordering::Relaxed),
        t.failed_turns.load(Ordering::Relaxed),
        t.approvals.load(Ordering::Relaxed),
        t.codex_kills.load(Ordering::Relaxed),
        t.relay_restarts.load(Ordering::Relaxed),
        t.postgres_restarts.load(Ordering::Relaxed),
        p.recycles
    );
    let turns = t.turns.load(Ordering::Relaxed);
    let slope = if turns >= 1000 {
        format!(
            "slope {:+.1} KB per 1000 turns over the run, {:+.1} over its second half",
            s.slope_all, s.slope_second_half
        )
    } else {
        "too few turns for a slope".into()
    };
    println!(
        "engine RSS {} KB at start, {} KB at end, peak {} KB; {slope}; {} samples",
        s.rss_start_kb, s.rss_end_kb, s.rss_peak_kb, s.samples
    );
    println!(
        "open fds {} at start, {} at end (max {})",
        s.fds_start, s.fds_end, s.fds_max
    );
    let v = &p.verdict;
    println!(
        "checked: {} sessions, {} events, {} turns ({} completed with all their items); lost {}, duplicated {}, turns without one end {}, requests never resolved {}, processes left {}",
        v.sessions,
        v.events,
        v.turns,
        v.complete_turns,
        v.lost,
        v.duplicated,
        v.unended,
        v.unresolved,
        v.orphans
    );
    for problem in v.problems.iter().take(10) {
        println!("  - {problem}");
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let backends = std::env::var("SOAK_BACKENDS").unwrap_or_else(|_| "sqlite,postgres".into());
    println!(
        "soak: load average before {}",
        codex_relay_bench::load_average()
    );
    let mut phases = Vec::new();
    rt.block_on(async {
        for backend in backends.split(',').map(str::trim).filter(|b| !b.is_empty()) {
            eprintln!("phase: fake app-server on {backend}");
            match fake_phase(backend).await {
                Some(p) => phases.push(p),
                None => println!("skipped {backend}: no PostgreSQL server binaries"),
            }
        }
        if knob("SOAK_REAL_TURNS", 20) > 0 {
            eprintln!("phase: real Codex");
            phases.push(real_phase().await);
        }
    });
    for p in &phases {
        print(p);
    }
    println!("\nload average after {}", codex_relay_bench::load_average());
    if phases.iter().any(|p| !p.verdict.clean()) {
        std::process::exit(1);
    }
}
