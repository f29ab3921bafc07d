//! What a soak checks in the stored logs (lost and duplicated events, turns without their end,
//! items missing from a completed turn, requests never resolved) and in the process table.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use codex_relay_core::event::TurnEndStatus;
use codex_relay_core::{Ev, Relay, Role};

#[derive(Default)]
pub struct Verdict {
    pub sessions: usize,
    pub events: u64,
    pub turns: u64,
    pub complete_turns: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub unended: u64,
    pub unresolved: u64,
    pub orphans: usize,
    pub problems: Vec<String>,
}

impl Verdict {
    pub fn clean(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.unended == 0
            && self.unresolved == 0
            && self.orphans == 0
    }

    pub fn with_orphans(mut self, left: Vec<u32>) -> Verdict {
        self.orphans = left.len();
        if !left.is_empty() {
            self.problems.push(format!("processes left: {left:?}"));
        }
        self
    }
}

#[derive(Default)]
struct Turn {
    starts: u32,
    ends: u32,
    completed: bool,
    texts: Vec<String>,
}

/// Checks every session's log; `items`: how many agent messages each completed turn must hold
/// (the fake's count), or `None` to skip that check.
pub async fn logs(relay: &Relay, ids: &[String], items: Option<usize>) -> Verdict {
    let mut v = Verdict::default();
    for id in ids {
        v.sessions += 1;
        let log = match relay.events(id, 0, usize::MAX / 2).await {
            Ok(log) => log,
            Err(e) => {
                v.problems
                    .push(format!("{id}: its log cannot be read: {e}"));
                v.lost += 1;
                continue;
            }
        };
        let mut prev = 0u64;
        let mut turns: HashMap<String, Turn> = HashMap::new();
        let mut opened = HashSet::new();
        let mut resolved = HashSet::new();
        for e in &log {
            v.events += 1;
            if e.seq <= prev {
                v.duplicated += 1;
                v.problems.push(format!("{id}: seq {} after {prev}", e.seq));
            } else if e.seq > prev + 1 {
                v.lost += e.seq - prev - 1;
                v.problems
                    .push(format!("{id}: seqs {}..{} missing", prev + 1, e.seq - 1));
            }
            prev = prev.max(e.seq);
            let turn = e.turn.clone().unwrap_or_default();
            match &e.ev {
                Ev::TurnStart {} => turns.entry(turn).or_default().starts += 1,
                Ev::TurnEnd { status, .. } => {
                    let t = turns.entry(turn).or_default();
                    t.ends += 1;
                    t.completed = *status == TurnEndStatus::Completed;
                }
                Ev::Text {
                    text,
                    thinking: false,
                } if e.role == Role::Agent => {
                    turns.entry(turn).or_default().texts.push(text.clone());
                }
                Ev::RequestOpened { request } => {
                    opened.insert(request.id.clone());
                }
                Ev::RequestResolved { id, .. } => {
                    resolved.insert(id.clone());
                }
                _ => {}
            }
        }
        for (tid, t) in &turns {
            if t.starts == 0 && t.ends == 0 {
                continue;
            }
            v.turns += 1;
            if t.ends > 1 || t.starts > 1 {
                v.duplicated += 1;
                v.problems.push(format!(
                    "{id}: turn {tid} started {} and ended {} times",
                    t.starts, t.ends
                ));
            } else if t.starts == 1 && t.ends == 0 {
                v.unended += 1;
                v.problems.push(format!("{id}: turn {tid} has no end"));
            }
            if !t.completed {
                continue;
            }
            let distinct: HashSet<&String> = t.texts.iter().collect();
            if distinct.len() < t.texts.len() {
                v.duplicated += (t.texts.len() - distinct.len()) as u64;
                v.problems.push(format!("{id}: turn {tid} repeats an item"));
            }
            match items {
                Some(n) if distinct.len() < n => {
                    v.lost += (n - distinct.len()) as u64;
                    v.problems.push(format!(
                        "{id}: turn {tid} holds {} of {n} items",
                        distinct.len()
                    ));
                }
                _ => v.complete_turns += 1,
            }
        }
        for r in opened.difference(&resolved) {
            v.unresolved += 1;
            v.problems.push(format!("{id}: request {r} never resolved"));
        }
    }
    v
}

/// Processes whose command line holds `needle` still alive after the engine shut down (given
/// a few seconds to go).
pub async fn orphans_by_cmdline(needle: &str) -> Vec<u32> {
    wait_gone(|| codex_relay_testkit::procs::pids_with_cmdline(needle)).await
}

/// Processes whose environment holds `entry` (`KEY=value`) still alive after shut-down.
pub async fn orphans_by_env(entry: &str) -> Vec<u32> {
    wait_gone(|| codex_relay_testkit::procs::pids_with_env(entry)).await
}

async fn wait_gone(find: impl Fn() -> Vec<u32>) -> Vec<u32> {
    let mut pause = Duration::from_millis(50);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = find();
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}
