//! Recycling Codex processes: a task looks at the pool's processes every few seconds; one past
//! a limit (policy.rs) drains (new sessions go to another process), and once every session on
//! it is idle each lets go of it, the pool replaces it with a fresh process, and the sessions
//! resume their threads there at their next turn. Their logs get one `note`; nothing else.

mod policy;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

pub use policy::{OverLimit, RecyclePolicy};

use crate::event::{Ev, Role};
use crate::pool::MemberState;
use crate::relay::{Relay, RelayInner};
use crate::session::{SessionHandle, SessionStatus};

/// How long a session's actor may take to let go of the process before the recycle is put
/// off to a later look.
const DETACH_WAIT: Duration = Duration::from_secs(10);

/// How long after asking to interrupt a turn it is asked again, while it still runs.
const INTERRUPT_AGAIN: Duration = Duration::from_secs(1);

/// Starts the recycler when a limit is set.
pub(crate) fn start(relay: &Relay) {
    let policy = relay.inner.config.recycle.clone();
    if !policy.enabled() {
        return;
    }
    let weak = Arc::downgrade(&relay.inner);
    tokio::spawn(run(weak, policy));
}

async fn run(relay: Weak<RelayInner>, policy: RecyclePolicy) {
    let mut said = Said::default();
    loop {
        tokio::time::sleep(policy.check_every).await;
        let Some(inner) = relay.upgrade() else { return };
        let states = inner.servers.observe(policy.max_rss.is_some());
        said.told
            .retain(|(slot, pid)| states.iter().any(|s| s.slot == *slot && s.pid == *pid));
        let now = Instant::now();
        said.asked
            .retain(|_, at| now.saturating_duration_since(*at) < Duration::from_secs(600));
        for state in states {
            look_at(&inner, &policy, state, &mut said).await;
        }
    }
}

/// What the recycler already said or asked.
#[derive(Default)]
struct Said {
    /// Processes said to be far over their limit (slot, pid): said once per process.
    told: HashSet<(u64, u32)>,
    /// Turns asked to stop (session, turn), and when.
    asked: HashMap<(String, String), Instant>,
}

/// Busy: a turn runs (its own or a sub-agent's) or a request waits for an answer.
fn busy(h: &SessionHandle) -> bool {
    matches!(
        h.shared.status(),
        SessionStatus::Active | SessionStatus::AwaitingApproval | SessionStatus::AwaitingInput
    ) || h.shared.current_turn().is_some()
}

async fn look_at(
    inner: &Arc<RelayInner>,
    policy: &RecyclePolicy,
    mut state: MemberState,
    said: &mut Said,
) {
    let (slot, pid) = (state.slot, state.pid);
    if state.draining.is_none() {
        let Some(why) = policy.crossed(&state.life, Instant::now()) else {
            return;
        };
        tracing::info!(
            slot,
            pid,
            "codex app-server takes no new session and is recycled once its sessions are idle: {why}"
        );
        inner.servers.drain(slot, &why);
        state.draining = Some(why);
    }
    let why = state.draining.clone().unwrap_or_default();
    let handles: Vec<SessionHandle> = state
        .sessions
        .iter()
        .filter_map(|id| inner.get(id))
        .collect();
    let running: Vec<&SessionHandle> = handles.iter().filter(|h| busy(h)).collect();
    if !running.is_empty() {
        if let Some(far) = policy.far_over(&state.life) {
            let act = match policy.over_hard {
                OverLimit::Wait => "it is recycled once the running turns end",
                OverLimit::Interrupt => "the running turns are interrupted so it can be recycled",
            };
            if said.told.insert((slot, pid)) {
                tracing::warn!(slot, pid, "{far}: {act}");
                for h in &running {
                    let message = format!("{far}: {act}");
                    h.shared
                        .append(Role::System, h.current_turn(), Ev::Note { message });
                }
            }
            if policy.over_hard == OverLimit::Interrupt {
                for h in &running {
                    interrupt(&mut said.asked, h);
                }
            }
        }
        return;
    }
    // A process with no session left stops after the pool's linger; nothing to replace.
    if state.reserved > 0 || state.sessions.is_empty() {
        return;
    }
    recycle(inner, policy, &state, handles, &why).await;
}

/// Interrupts the session's running turn, again every [`INTERRUPT_AGAIN`] while it runs: Codex
/// drops an interrupt that comes before the turn it names is under way.
fn interrupt(asked: &mut HashMap<(String, String), Instant>, h: &SessionHandle) {
    let Some(turn) = h.current_turn() else { return };
    let key = (h.id().to_owned(), turn);
    let now = Instant::now();
    if asked
        .get(&key)
        .is_some_and(|at| now.saturating_duration_since(*at) < INTERRUPT_AGAIN)
    {
        return;
    }
    asked.insert(key, now);
    let h = h.clone();
    tokio::spawn(async move {
        if let Err(e) = h.interrupt().await {
            tracing::warn!(session = %h.id(), "interrupting a turn far over the memory limit failed: {e}");
        }
    });
}

/// Every session of the process lets go of it (each answers only while idle, and takes no
/// operation until released), then the pool replaces the process.
async fn recycle(
    inner: &Arc<RelayInner>,
    policy: &RecyclePolicy,
    state: &MemberState,
    handles: Vec<SessionHandle>,
    why: &str,
) {
    let (release, held) = tokio::sync::watch::channel(false);
    let mut detached = Vec::new();
    for h in handles {
        match tokio::time::timeout(DETACH_WAIT, h.detach(held.clone())).await {
            Ok(true) => detached.push(h),
            // Busy after all (a turn started meanwhile), closed, or slow: put off.
            _ => {
                let _ = release.send(true);
                return;
            }
        }
    }
    let done = inner
        .servers
        .recycle(state.slot, state.pid, policy.grace)
        .await;
    if done {
        tracing::info!(
            slot = state.slot,
            pid = state.pid,
            sessions = detached.len(),
            "codex app-server recycled ({why})"
        );
        let message = format!(
            "The Codex app-server (pid {}) was replaced by a fresh process because {why}; this session's thread resumes on it at its next turn.",
            state.pid
        );
        for h in &detached {
            h.shared.append(
                Role::System,
                None,
                Ev::Note {
                    message: message.clone(),
                },
            );
        }
    }
    let _ = release.send(true);
}

impl Relay {
    /// Codex processes replaced by a fresh one after crossing a limit (docs/OPERATIONS.md).
    pub fn codex_recycles(&self) -> u64 {
        self.inner.servers.recycles()
    }
}
