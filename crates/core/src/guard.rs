//! The turn guard: one task per running turn that has limits, where the session runs. It
//! interrupts the turn when its deadline passes, when it shows no output for the idle time
//! (not while a request waits for an answer), or when the session reaches a budget, and says
//! why on the turn's end ([`crate::limits::StopReason`]); past the grace it ends the turn the
//! way [`Relay::stop_turn`] does.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::limits::{StopReason, TurnLimits};
use crate::relay::Relay;
use crate::session::{SayOutcome, SessionShared};

impl Relay {
    /// Guards the turn `said` started, with the message's limits over the session's and the
    /// relay's. Nothing to guard (no limit, no budget): no task.
    pub(crate) fn guard_turn(
        &self,
        shared: &Arc<SessionShared>,
        said: &SayOutcome,
        asked: TurnLimits,
    ) {
        let SayOutcome::Started { turn_id } = said else {
            return;
        };
        let limits = asked.or(shared.turn_limits()).or(self.config().turn_limits);
        if limits.is_empty() && shared.budget().is_empty() {
            return;
        }
        let relay = self.clone();
        let shared = shared.clone();
        let turn = turn_id.clone();
        tokio::spawn(async move { guard(relay, shared, turn, limits).await });
    }
}

async fn guard(relay: Relay, shared: Arc<SessionShared>, turn: String, limits: TurnLimits) {
    let started = Instant::now();
    let deadline = limits.deadline().map(|d| started + d);
    let mut changes = shared.subscribe_changes();
    let reason = loop {
        if shared.current_turn().as_deref() != Some(turn.as_str()) {
            return;
        }
        if let Some(reason) = shared.budget_reached(false) {
            break reason;
        }
        let now = Instant::now();
        let mut wake: Option<Instant> = None;
        let mut soonest = |at: Instant| wake = Some(wake.map_or(at, |w| w.min(at)));
        if let Some(at) = deadline {
            if at <= now {
                break StopReason::Deadline {
                    limit_ms: limits.deadline_ms.unwrap_or_default(),
                };
            }
            soonest(at);
        }
        // Waiting for a person is not silence: the approval timeout bounds that.
        if let Some(idle) = limits.idle()
            && !shared.has_pending()
        {
            let silent = shared.silent_for();
            if silent >= idle {
                break StopReason::Idle {
                    idle_ms: limits.idle_ms.unwrap_or_default(),
                };
            }
            soonest(now + (idle - silent));
        }
        // The wall-time budget runs out while the turn runs.
        if let Some(limit) = shared.budget().wall_seconds {
            let spent = Duration::from_millis(shared.spent_now().wall_ms);
            let left = Duration::from_secs(limit).saturating_sub(spent);
            soonest(now + left + Duration::from_millis(1));
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            _ = sleep_until(wake) => {}
        }
    };
    tracing::info!(session = %shared.id, turn, "{}", reason.message());
    shared.mark_stopping(&turn, reason);
    let how = match relay.stop_turn(&shared.id, limits.grace()).await {
        Ok(how) => how,
        Err(e) => {
            tracing::warn!(session = %shared.id, "stopping the turn failed: {e}");
            return;
        }
    };
    shared.stop_done(&turn, how);
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Relay {
    /// A session's limits and what it spent.
    pub async fn limits(
        &self,
        id: &str,
    ) -> Result<crate::limits::LimitsView, crate::error::RelayError> {
        Ok(self.known_anywhere(id).await?.shared.limits_view())
    }
}
