//! The invariant checker of a fault-injection run, over the store (read from Postgres itself),
//! the files the sessions' commands wrote, and what clients were told:
//!
//! - every session a client was told exists (`201`) is in Postgres with its first message, every
//!   message acknowledged as a new turn is in its log, every `200` answer is in its log with the
//!   decision the client was told, every `204` close is in its log;
//! - every log's seqs run 1..n, no seq repeated or skipped, and every reader was shown each seq
//!   once, in order, as the log has it;
//! - no request is resolved twice in a log, and no answer is applied twice: a command that
//!   needed an approval ran at most once, never when declined;
//! - no command ran on two instances, or twice: each command's numbered beats are 1..k, all
//!   from one instance.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value;
use sqlx::Row;

use super::workload::{Kind, Ledger, Told};

/// What one check looked at, by name, and what it found wrong.
#[derive(Debug, Default)]
pub struct Findings {
    pub counts: BTreeMap<&'static str, u64>,
    pub violations: Vec<String>,
}

impl Findings {
    fn add(&mut self, what: &'static str, n: u64) {
        *self.counts.entry(what).or_default() += n;
    }

    fn violation(&mut self, v: String) {
        self.violations.push(v);
    }
}

/// One session's log as stored: `(seq, envelope)`.
type Log = Vec<(i64, Value)>;

fn user_texts(log: &Log) -> Vec<&str> {
    log.iter()
        .filter(|(_, e)| e["role"] == "user" && e["ev"]["t"] == "text")
        .filter_map(|(_, e)| e["ev"]["text"].as_str())
        .collect()
}

/// Checks everything a run did so far.
pub async fn check(db: &str, ledger: &Ledger, workspace: &Path) -> Findings {
    let mut f = Findings::default();
    let pool = match sqlx::PgPool::connect(db).await {
        Ok(p) => p,
        Err(e) => {
            f.violation(format!("the checker could not reach Postgres: {e}"));
            return f;
        }
    };
    let known = ledger
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let mut logs: HashMap<String, Log> = HashMap::new();
    // Request id -> every resolution the logs record for it: (session, decision, by).
    let mut resolutions: HashMap<String, Vec<(String, String, String)>> = HashMap::new();
    for s in &known {
        let row = sqlx::query("SELECT status FROM sessions WHERE id = $1")
            .bind(&s.id)
            .fetch_optional(&pool)
            .await;
        match row {
            Ok(Some(_)) => {}
            Ok(None) => f.violation(format!(
                "session {} ({}) was acknowledged with 201 but is not in Postgres",
                s.id, s.marker
            )),
            Err(e) => f.violation(format!("reading session {}: {e}", s.id)),
        }
        let rows = sqlx::query("SELECT seq, json FROM events WHERE session_id = $1 ORDER BY seq")
            .bind(&s.id)
            .fetch_all(&pool)
            .await
            .unwrap_or_default();
        let log: Log = rows
            .iter()
            .map(|r| {
                let json: String = r.get("json");
                (
                    r.get("seq"),
                    serde_json::from_str(&json).unwrap_or(Value::Null),
                )
            })
            .collect();
        f.add("sessions checked", 1);
        f.add("stored events checked", log.len() as u64);
        for (i, (seq, _)) in log.iter().enumerate() {
            if *seq != i as i64 + 1 {
                f.violation(format!(
                    "session {} ({}): the log's seq {} is at place {} (a seq skipped or repeated)",
                    s.id,
                    s.marker,
                    seq,
                    i + 1
                ));
                break;
            }
        }
        for (_, e) in &log {
            if e["ev"]["t"] == "request-resolved" {
                resolutions
                    .entry(e["ev"]["id"].as_str().unwrap_or_default().to_owned())
                    .or_default()
                    .push((
                        s.id.clone(),
                        e["ev"]["decision"].as_str().unwrap_or_default().to_owned(),
                        e["ev"]["by"].as_str().unwrap_or_default().to_owned(),
                    ));
            }
        }
        logs.insert(s.id.clone(), log);
    }
    pool.close().await;
    for (request, all) in &resolutions {
        f.add("request resolutions checked", 1);
        if all.len() > 1 {
            f.violation(format!(
                "request {request} is resolved {} times in the log: {all:?}",
                all.len()
            ));
        }
    }
    check_told(&mut f, ledger, &logs, &resolutions);
    check_commands(&mut f, &known, &logs, workspace);
    check_views(&mut f, ledger, &logs);
    f
}

/// What clients were told is in the logs.
fn check_told(
    f: &mut Findings,
    ledger: &Ledger,
    logs: &HashMap<String, Log>,
    resolutions: &HashMap<String, Vec<(String, String, String)>>,
) {
    let told = ledger
        .told
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let empty = Log::new();
    for t in told {
        f.add("acknowledgements checked", 1);
        match t {
            Told::Created { session, prompt } => {
                let log = logs.get(&session).unwrap_or(&empty);
                if !user_texts(log).contains(&prompt.as_str()) {
                    f.violation(format!(
                        "session {session} was acknowledged with its first message {prompt:?}, which is not in its log"
                    ));
                }
            }
            Told::Said {
                session,
                text,
                started,
            } => {
                let log = logs.get(&session).unwrap_or(&empty);
                if started && !user_texts(log).contains(&text.as_str()) {
                    f.violation(format!(
                        "session {session}: the message {text:?} was acknowledged as a new turn and is not in its log"
                    ));
                }
            }
            Told::Answered {
                request,
                decision,
                by,
            } => match resolutions.get(&request).and_then(|all| all.first()) {
                Some((_, d, b)) if *d == decision && *b == by => {}
                Some((session, d, b)) => f.violation(format!(
                    "request {request} (session {session}): a client was told {decision} by {by}, the log says {d} by {b}"
                )),
                None => f.violation(format!(
                    "request {request}: a client was told {decision} by {by}, and no log resolves it"
                )),
            },
            Told::Closed { session } => {
                let log = logs.get(&session).unwrap_or(&empty);
                let closed = log
                    .iter()
                    .any(|(_, e)| e["ev"]["t"] == "status" && e["ev"]["status"] == "closed");
                if !closed {
                    let tail: Vec<String> = log
                        .iter()
                        .rev()
                        .take(3)
                        .map(|(seq, e)| format!("{seq} {} {}", e["ev"]["t"], e["ev"]["status"]))
                        .collect();
                    f.violation(format!(
                        "session {session} was acknowledged closed and its log does not say so (its last events: {tail:?})"
                    ));
                }
            }
        }
    }
}

/// What the commands wrote: approved ones ran at most once, declined ones never, and every
/// command ran once, on one instance.
fn check_commands(
    f: &mut Findings,
    known: &[super::workload::Known],
    logs: &HashMap<String, Log>,
    workspace: &Path,
) {
    for s in known {
        let log = logs.get(&s.id).cloned().unwrap_or_default();
        match s.kind {
            Kind::Quick => {}
            Kind::Approval => {
                f.add("approved commands checked", 1);
                let ran = std::fs::read_to_string(workspace.join(format!("ran-{}.txt", s.marker)))
                    .unwrap_or_default();
                let runs: Vec<&str> = ran.lines().collect();
                let decisions: Vec<&str> = log
                    .iter()
                    .filter(|(_, e)| e["ev"]["t"] == "request-resolved")
                    .filter_map(|(_, e)| e["ev"]["decision"].as_str())
                    .collect();
                if runs.len() > 1 {
                    f.violation(format!(
                        "{}: the approved command ran {} times ({runs:?})",
                        s.marker,
                        runs.len()
                    ));
                }
                if !runs.is_empty() && !decisions.contains(&"approve") {
                    f.violation(format!(
                        "{}: the command ran ({runs:?}) though the log approves nothing ({decisions:?})",
                        s.marker
                    ));
                }
            }
            Kind::Beats => {
                f.add("commands checked", 1);
                let text =
                    std::fs::read_to_string(workspace.join(format!("beats-{}.txt", s.marker)))
                        .unwrap_or_default();
                let mut numbers = Vec::new();
                let mut instances = std::collections::BTreeSet::new();
                for line in text.lines() {
                    let mut words = line.split_whitespace();
                    numbers.push(
                        words
                            .next()
                            .and_then(|n| n.parse::<u64>().ok())
                            .unwrap_or(0),
                    );
                    instances.insert(words.next().unwrap_or_default().to_owned());
                }
                f.add("command beats checked", numbers.len() as u64);
                if instances.len() > 1 {
                    f.violation(format!(
                        "{}: its command ran on {} instances ({instances:?})",
                        s.marker,
                        instances.len()
                    ));
                }
                if numbers != (1..=numbers.len() as u64).collect::<Vec<_>>() {
                    f.violation(format!(
                        "{}: its command ran more than once (beats {numbers:?})",
                        s.marker
                    ));
                }
            }
        }
    }
}

/// Every reader was shown each seq once, in order, as the log has it.
fn check_views(f: &mut Findings, ledger: &Ledger, logs: &HashMap<String, Log>) {
    let views = ledger
        .views
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for (session, seen) in views {
        f.add("readers checked", 1);
        f.add("events shown checked", seen.len() as u64);
        let log = logs.get(&session).cloned().unwrap_or_default();
        for pair in seen.windows(2) {
            if pair[1].0 != pair[0].0 + 1 {
                f.violation(format!(
                    "a reader of {session} was shown seq {} then seq {}",
                    pair[0].0, pair[1].0
                ));
                break;
            }
        }
        if seen.first().is_some_and(|(s, _)| *s != 1) {
            f.violation(format!(
                "a reader of {session} was shown seq {} first",
                seen[0].0
            ));
        }
        for (seq, ev) in &seen {
            match (*seq as usize).checked_sub(1).and_then(|i| log.get(i)) {
                Some((_, stored)) if stored["ev"] == *ev => {}
                Some((_, stored)) => {
                    f.violation(format!(
                        "a reader of {session} was shown seq {seq} as {ev}, the log has {}",
                        stored["ev"]
                    ));
                    break;
                }
                None => {
                    f.violation(format!(
                        "a reader of {session} was shown seq {seq}, which is not in the log ({} events)",
                        log.len()
                    ));
                    break;
                }
            }
        }
    }
}
