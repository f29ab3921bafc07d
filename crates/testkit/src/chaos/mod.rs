//! A fault-injection run over three `codex-relay serve` instances on one private Postgres, the
//! real Codex and the scripted model (docs/CLUSTER.md, "Failures"). Each cycle starts work in
//! flight (a command waiting for its approval, a command running), injects one fault — Postgres
//! stopped for a random part of one to two leases, an owner paused (SIGSTOP) or killed
//! (SIGKILL, then started again under its id) — while clients keep creating sessions, sending
//! messages and answering approvals through every instance, heals it, waits for the cluster to
//! settle, and checks the invariants ([`check`]) over everything so far. The suite runs a few
//! cycles; the `cluster_faults` bench runs many and prints the counts.

mod check;
mod http;
mod instances;
mod workload;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use instances::{Instances, NAMES, Spawn};
use workload::{Clients, Kind, Ledger};

/// What to run.
pub struct Config {
    /// The `codex-relay` binary.
    pub relay: PathBuf,
    /// The Codex binary.
    pub codex: PathBuf,
    pub cycles: usize,
    /// The instances' lease.
    pub lease: Duration,
    /// Seeds the choice of faults, victims, lengths and client actions (printed, to repeat a run).
    pub seed: u64,
    /// Prints one line per cycle.
    pub progress: bool,
}

/// What a run did and found.
#[derive(Debug)]
pub struct Report {
    pub cycles: usize,
    pub seed: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, usize>,
    /// What clients were answered: `<action> <status> [<code>]` → how many.
    pub told: BTreeMap<String, u64>,
    /// What the checker looked at (from its last, cumulative check).
    pub checked: BTreeMap<&'static str, u64>,
    /// Everything found wrong (each once).
    pub violations: Vec<String>,
    pub elapsed: Duration,
    /// The run's directory (the instances' logs), kept when something was found wrong.
    pub dir: PathBuf,
}

/// A small seeded generator (xorshift64*): the run is repeatable from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A duration between `lo` and `hi` times `unit`.
    fn between(&mut self, unit: Duration, lo: f64, hi: f64) -> Duration {
        let x = lo + (hi - lo) * (self.below(1_000_000) as f64 / 1_000_000.0);
        unit.mul_f64(x)
    }
}

/// One fault.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Outage(Duration),
    Pause(usize, Duration),
    Kill(usize, Duration),
}

impl Fault {
    fn kind(&self) -> &'static str {
        match self {
            Fault::Outage(_) => "postgres outage",
            Fault::Pause(..) => "owner paused (SIGSTOP)",
            Fault::Kill(..) => "owner killed (SIGKILL) and restarted",
        }
    }

    fn describe(&self) -> String {
        match self {
            Fault::Outage(d) => format!("Postgres stopped for {d:.1?}"),
            Fault::Pause(i, d) => format!("{} paused for {d:.1?}", NAMES[*i]),
            Fault::Kill(i, d) => format!("{} killed, started again after {d:.1?}", NAMES[*i]),
        }
    }
}

/// Runs the cycles; `None` (a counted skip) without PostgreSQL server binaries.
pub async fn run(config: Config) -> Option<Report> {
    let pg = crate::postgres::Private::start()?;
    let started = Instant::now();
    let mut rng = Rng(config.seed | 1);
    let model = Arc::new(crate::ModelServer::start().await);
    // A turn cut by a fault may ask the model for a reply meant for a later turn, and a later
    // turn then finds none: that turn fails, as it would with a real model that errs.
    model.allow_unscripted();
    let home = crate::CodexHome::new(model.url());
    let dir = home.root().join("chaos");
    std::fs::create_dir_all(&dir).expect("the run's directory");
    let token = crate::RELAY_TEST_TOKEN.to_owned();
    let mut instances = Instances::start(Spawn {
        relay: config.relay.clone(),
        codex: config.codex.clone(),
        codex_home: home.path().to_owned(),
        db: pg.url(),
        dir: dir.clone(),
        lease_ms: config.lease.as_millis() as u64,
        token: token.clone(),
    })
    .await;
    let clients = Clients {
        addrs: instances.addrs.clone(),
        token,
        model: model.clone(),
        ledger: Arc::new(Ledger::default()),
        workspace: home.workspace().to_owned(),
    };
    let mut faults: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut violations: BTreeSet<String> = BTreeSet::new();
    let mut checked;
    let n = NAMES.len() as u64;
    for cycle in 0..config.cycles {
        let cycle_started = Instant::now();
        // Work in flight: one session of each kind, each through an instance of its own.
        let first = rng.below(n) as usize;
        let mut ids = Vec::new();
        for (k, kind) in [Kind::Approval, Kind::Beats, Kind::Quick]
            .into_iter()
            .enumerate()
        {
            ids.push(clients.create((first + k) % n as usize, kind, cycle).await);
        }
        in_flight(&clients, cycle).await;
        let stop_readers = Arc::new(AtomicBool::new(false));
        let mut readers = tokio::task::JoinSet::new();
        for id in ids.into_iter().flatten() {
            let via = rng.below(n) as usize;
            readers.spawn({
                let (clients, stop) = (clients.clone(), stop_readers.clone());
                async move { clients.read(id, via, stop).await }
            });
        }
        // The fault: the first cycles take each kind in turn, the others choose; a paused or
        // killed instance is the owner of the running command.
        let victim = (first + 1) % n as usize;
        let lease = config.lease;
        let fault = match if cycle < 3 {
            cycle as u64
        } else {
            rng.below(3)
        } {
            0 => Fault::Outage(rng.between(lease, 0.3, 2.2)),
            1 => Fault::Pause(victim, rng.between(lease, 0.4, 2.2)),
            _ => Fault::Kill(victim, rng.between(lease, 0.0, 1.5)),
        };
        *faults.entry(fault.kind()).or_default() += 1;
        let busy = Arc::new(AtomicBool::new(true));
        let workload = tokio::spawn(workload(clients.clone(), cycle, busy.clone(), rng.next()));
        match fault {
            Fault::Outage(d) => {
                tokio::task::block_in_place(|| pg.stop());
                tokio::time::sleep(d).await;
                tokio::task::block_in_place(|| pg.start_again());
            }
            Fault::Pause(i, d) => {
                instances.pause(i);
                tokio::time::sleep(d).await;
                instances.resume(i);
            }
            Fault::Kill(i, d) => {
                instances.kill(i).await;
                tokio::time::sleep(d).await;
                instances.restart(i).await;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        busy.store(false, Ordering::Relaxed);
        let _ = workload.await;
        let unsettled = settle(&clients, cycle + 1, &pg.url()).await;
        stop_readers.store(true, Ordering::Relaxed);
        while readers.join_next().await.is_some() {}
        let found = check::check(&pg.url(), &clients.ledger, home.workspace()).await;
        let new: Vec<String> = found
            .violations
            .into_iter()
            .chain(unsettled)
            .filter(|v| !violations.contains(v))
            .collect();
        checked = found.counts;
        if config.progress {
            println!(
                "cycle {}/{}: {} — {} new violation(s); {} sessions and {} events checked so far ({:.1?})",
                cycle + 1,
                config.cycles,
                fault.describe(),
                new.len(),
                checked.get("sessions checked").unwrap_or(&0),
                checked.get("stored events checked").unwrap_or(&0),
                cycle_started.elapsed()
            );
        }
        violations.extend(new);
        for s in clients.ledger.sessions_of(cycle) {
            clients.close(rng.below(n) as usize, &s).await;
        }
    }
    // The closes of the last cycle, and everything before, once more.
    let found = check::check(&pg.url(), &clients.ledger, home.workspace()).await;
    violations.extend(found.violations);
    checked = found.counts;
    instances.stop_all().await;
    let told = clients
        .ledger
        .tally
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let violations: Vec<String> = violations.into_iter().collect();
    let dir = instances.dir().to_owned();
    if !violations.is_empty() {
        // Kept for the logs: the home's directory would be removed with it.
        std::mem::forget(home);
    }
    Some(Report {
        cycles: config.cycles,
        seed: config.seed,
        faults,
        told,
        checked,
        violations,
        elapsed: started.elapsed(),
        dir,
    })
}

/// Waits (bounded) until this cycle's work is in flight: a request waiting for its answer,
/// and a command writing its beats.
async fn in_flight(clients: &Clients, cycle: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let sessions = clients.ledger.sessions_of(cycle);
    while Instant::now() < deadline {
        let mut ready = true;
        for s in &sessions {
            let status = clients
                .view(0, &s.id)
                .await
                .map(|v| v["status"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_default();
            ready &= match s.kind {
                Kind::Approval => status == "awaiting_approval",
                Kind::Beats => clients
                    .workspace
                    .join(format!("beats-{}.txt", s.marker))
                    .exists(),
                Kind::Quick => true,
            };
        }
        if ready {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What clients do while a fault lasts: every 0.3 to 0.8 s, one of a new session, an answer
/// to an open request, or a message to a session of this cycle, through any instance.
async fn workload(clients: Clients, cycle: usize, busy: Arc<AtomicBool>, seed: u64) {
    let mut rng = Rng(seed | 1);
    let n = NAMES.len() as u64;
    let mut tasks = tokio::task::JoinSet::new();
    let mut said = 0;
    while busy.load(Ordering::Relaxed) {
        let via = rng.below(n) as usize;
        let clients = clients.clone();
        match rng.below(10) {
            0..=3 => {
                let kind = [Kind::Quick, Kind::Approval, Kind::Beats][rng.below(3) as usize];
                tasks.spawn(async move {
                    clients.create(via, kind, cycle).await;
                });
            }
            4..=6 => {
                let (to, allow) = (rng.below(n) as usize, rng.below(2) == 0);
                tasks.spawn(async move {
                    if let Some(open) = clients.pending(via).await
                        && let Some(id) = open.first().and_then(|p| p["id"].as_str())
                    {
                        clients.answer(to, id, allow).await;
                    }
                });
            }
            _ => {
                let sessions = clients.ledger.sessions_of(cycle);
                if !sessions.is_empty() {
                    let s = sessions[rng.below(sessions.len() as u64) as usize].clone();
                    said += 1;
                    let k = said;
                    tasks.spawn(async move { clients.say(via, &s, k).await });
                }
            }
        }
        let pause = Duration::from_millis(300 + rng.below(500));
        tokio::time::sleep(pause).await;
    }
    while tasks.join_next().await.is_some() {}
}

/// After a fault: waits until every instance takes work again, answers what is still open
/// (declines it), and waits until this cycle's sessions are at rest. Returns what did not
/// happen within two minutes, as violations (with each instance's view of what is stuck and
/// what the store holds).
async fn settle(clients: &Clients, cycle: usize, db: &str) -> Vec<String> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    for (i, name) in NAMES.iter().enumerate() {
        loop {
            let healthy = clients
                .health(i)
                .await
                .is_some_and(|(status, h)| status == 200 && h["cluster"]["leased"] == true);
            if healthy {
                break;
            }
            if Instant::now() >= deadline {
                out.push(format!(
                    "cycle {cycle}: instance {name} did not take work again within 2 minutes"
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    let sessions = clients.ledger.sessions_of(cycle - 1);
    loop {
        let mut busy = Vec::new();
        let mut stuck = Vec::new();
        if let Some(open) = clients.pending(0).await {
            for p in open {
                if let Some(id) = p["id"].as_str() {
                    clients.answer(cycle % NAMES.len(), id, false).await;
                    busy.push(format!("request {id}"));
                    stuck.push(p["sessionId"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
        for s in &sessions {
            let status = clients
                .view(1, &s.id)
                .await
                .map(|v| v["status"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_else(|| "unreadable".into());
            if [
                "active",
                "awaiting_approval",
                "awaiting_input",
                "unreadable",
            ]
            .contains(&status.as_str())
            {
                busy.push(format!("{} {status}", s.marker));
                stuck.push(s.id.clone());
            }
        }
        if busy.is_empty() {
            return out;
        }
        if Instant::now() >= deadline {
            let mut seen = Vec::new();
            for id in stuck.iter().collect::<BTreeSet<_>>() {
                seen.push(diagnose(clients, db, id).await);
            }
            out.push(format!(
                "cycle {cycle}: not at rest 2 minutes after the fault: {busy:?}; {}",
                seen.join("; ")
            ));
            return out;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Session `id` as each instance shows it and as the store holds it.
async fn diagnose(clients: &Clients, db: &str, id: &str) -> String {
    let mut out = format!("session {id}:");
    for (i, name) in NAMES.iter().enumerate() {
        let v = clients.view(i, id).await.unwrap_or_default();
        let pending: Vec<&str> = v["pending"]
            .as_array()
            .map(|p| p.iter().filter_map(|r| r["id"].as_str()).collect())
            .unwrap_or_default();
        out += &format!(
            " {name} shows {} at seq {} pending {pending:?};",
            v["status"], v["lastSeq"]
        );
    }
    if let Ok(pool) = sqlx::PgPool::connect(db).await {
        let owner: Option<String> =
            sqlx::query_scalar("SELECT owner FROM relay_owners WHERE session_id = $1")
                .bind(id)
                .fetch_optional(&pool)
                .await
                .ok()
                .flatten();
        let last: Option<i64> =
            sqlx::query_scalar("SELECT max(seq) FROM events WHERE session_id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .ok()
                .flatten();
        let open: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM pending WHERE session_id = $1 AND resolution IS NULL",
        )
        .bind(id)
        .fetch_all(&pool)
        .await
        .unwrap_or_default();
        let answers: Vec<String> = sqlx::query_scalar(
            "SELECT request_id || ' by ' || answered_by || ' on ' || instance FROM relay_answers WHERE session_id = $1",
        )
        .bind(id)
        .fetch_all(&pool)
        .await
        .unwrap_or_default();
        out += &format!(
            " the store: owner {owner:?}, last seq {last:?}, open requests {open:?}, answers recorded {answers:?}"
        );
        pool.close().await;
    }
    out
}
