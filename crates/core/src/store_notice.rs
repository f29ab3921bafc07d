//! Tells each session with a running turn, once per closing of the store's gate during a fault, that Codex is paused until the database takes writes again.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use crate::event::{Ev, Role};
use crate::session::SessionShared;
use crate::store::StoreStats;

/// How often a closed gate is checked for a fault (a locked SQLite file reports its fault only
/// after its busy timeout, so the gate usually closes first).
const FAULT_CHECK: Duration = Duration::from_millis(200);

/// The error each running session gets.
pub(crate) fn message(fault: &str) -> String {
    format!(
        "the store cannot take writes ({fault}); this session's events are held in memory and \
         Codex is paused until the database takes writes again (nothing is lost)"
    )
}

/// Runs until the store or the relay is gone. `sessions` lists the relay's sessions (`None`
/// once the relay is dropped); `stats` is weak so the task keeps nothing alive.
pub(crate) async fn run(
    mut gate: watch::Receiver<bool>,
    stats: Weak<StoreStats>,
    sessions: impl Fn() -> Option<Vec<Arc<SessionShared>>>,
) {
    loop {
        // The gate closes: the write queue is at its bound.
        if gate.wait_for(|open| !*open).await.is_err() {
            return;
        }
        // Only a fault makes that news; a store that is merely slow opens it again soon.
        let fault = loop {
            let Some(fault) = stats.upgrade().map(|s| s.fault()) else {
                return;
            };
            if let Some(fault) = fault {
                break Some(fault);
            }
            match tokio::time::timeout(FAULT_CHECK, gate.changed()).await {
                Err(_) => {}
                Ok(Err(_)) => return,
                Ok(Ok(())) if *gate.borrow_and_update() => break None,
                Ok(Ok(())) => {}
            }
        };
        if let Some(fault) = fault {
            let Some(sessions) = sessions() else {
                return;
            };
            let text = message(&fault);
            let mut told = 0;
            for shared in sessions.iter().filter(|s| s.status().is_running()) {
                shared.append(
                    Role::System,
                    shared.current_turn(),
                    Ev::Error {
                        message: text.clone(),
                        retrying: true,
                    },
                );
                told += 1;
            }
            tracing::warn!(fault = %fault, sessions = told,
                "the store's write queue is full during a fault: Codex is paused until the database takes writes");
        }
        // Once per closing: wait for it to open again.
        if gate.wait_for(|open| *open).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_fault_and_the_pause() {
        let m = message("database is locked");
        assert!(m.contains("(database is locked)"), "{m}");
        assert!(m.contains("held in memory"), "{m}");
        assert!(m.contains("Codex is paused"), "{m}");
    }
}
