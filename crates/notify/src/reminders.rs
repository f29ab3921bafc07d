//! Re-notify and escalation: a request whose notifications nobody opened is notified again
//! after an interval, and goes to a second channel before its timeout declines it (at once
//! when every channel failed). Each relay of a shared store runs this; the rows' ids
//! (`msg_<request>_<target>_r<n>`, `…_e`) make sure each happens once.

use std::sync::Arc;
use std::time::Duration;

use codex_relay_core::PendingView;
use codex_relay_core::store::OutboxRecord;

use crate::message::Message;
use crate::outbox::{Inner, now_ms, short};

/// How often open requests are looked at.
const TICK: Duration = Duration::from_millis(1000);

/// Queues `msg` (of request `key`) to every escalation target, saying `why`.
pub(crate) async fn escalate(inner: &Inner, key: &str, msg: &Message, why: &str) {
    let why = format!("escalation: {why}");
    for t in &inner.config.escalation.to {
        let targets = if t == "push" {
            inner.push_targets().await
        } else if let Some(name) = t.strip_prefix("user:") {
            match person_targets(inner, name).await {
                Ok(targets) => targets,
                Err(reason) => {
                    cannot_reach(inner, key, t, &reason).await;
                    continue;
                }
            }
        } else {
            vec![t.clone()]
        };
        for target in targets {
            let id = format!("msg_{key}_{}_e", short(&target));
            inner.queue_as(id, "escalation", &target, msg, &why).await;
        }
    }
}

/// The push targets of the browsers user `name` subscribed, or why the request cannot reach
/// them: no such user, disabled, a role that cannot answer requests, push off, no browser.
async fn person_targets(inner: &Inner, name: &str) -> Result<Vec<String>, String> {
    let user = match inner.relay.people().user(name).await {
        Ok(u) => u,
        Err(codex_relay_core::people::PeopleError::NotFound(_)) => {
            return Err(format!("no user named {name:?}"));
        }
        Err(e) => return Err(format!("could not look {name:?} up: {e}")),
    };
    if user.disabled_at.is_some() {
        return Err(format!("{name} is disabled"));
    }
    if user.role < codex_relay_core::people::Role::Approver {
        return Err(format!(
            "{name} is a {} and cannot answer requests",
            user.role.as_str()
        ));
    }
    let mine = inner.push_targets_of(Some(&user.id)).await;
    if mine.is_empty() {
        return Err(format!(
            "{name} has no browser subscribed to push (Notifications → Enable push, signed in as {name})"
        ));
    }
    Ok(mine)
}

/// Puts on the request's trail (once) that escalation to `target` could not happen, and why.
async fn cannot_reach(inner: &Inner, request: &str, target: &str, reason: &str) {
    let store = inner.relay.store();
    let outbox_id = format!("msg_{request}_{target}_e");
    let trail = store
        .deliveries_for_request(request, 500)
        .await
        .unwrap_or_default();
    if trail.iter().any(|d| d.outbox_id == outbox_id) {
        return;
    }
    tracing::warn!(
        request,
        target,
        "escalation cannot reach {target}: {reason}"
    );
    let step = codex_relay_core::store::DeliveryRecord {
        outbox_id,
        request_id: Some(request.to_owned()),
        target: target.to_owned(),
        status: "failed".into(),
        detail: Some(format!("escalation: {reason}")),
        at: now_ms(),
    };
    if let Err(e) = store.record_delivery(&step).await {
        tracing::warn!(request, "could not record a delivery step: {e}");
    }
}

/// Whether a row's latest attempt failed (given up, or failing and being retried).
fn failing(r: &OutboxRecord) -> bool {
    r.state == "failed" || (r.state == "pending" && r.last_error.is_some())
}

/// The re-notify round of a `reminder` row (`…_r<n>`).
fn round(r: &OutboxRecord) -> Option<u32> {
    (r.event == "reminder")
        .then(|| r.id.rsplit_once("_r").and_then(|(_, n)| n.parse().ok()))
        .flatten()
}

async fn look_at(inner: &Inner, p: &PendingView) {
    let esc = &inner.config.escalation;
    let store = inner.relay.store();
    let Ok(rows) = store.notifications_for_request(&p.id).await else {
        return;
    };
    // Not queued yet (the watcher is on it), or never was (a relay without notifications).
    if rows.is_empty() {
        return;
    }
    if store.request_opened(&p.id).await.unwrap_or(true) {
        return;
    }
    let now = now_ms();
    let msg = Message::request(p, &inner.public);
    let has_deadline = p.deadline > p.created_at;
    if !esc.to.is_empty() && !rows.iter().any(|r| r.event == "escalation") {
        let first: Vec<&OutboxRecord> = rows.iter().filter(|r| r.event == "request").collect();
        let why = if !first.is_empty() && first.iter().all(|r| failing(r)) {
            let reasons: Vec<String> = first
                .iter()
                .map(|r| {
                    format!(
                        "{}: {}",
                        short(&r.target),
                        r.last_error.as_deref().unwrap_or("failed")
                    )
                })
                .collect();
            Some(format!("every channel failed ({})", reasons.join("; ")))
        } else if esc.after_secs > 0 && now >= p.created_at + esc.after_secs as i64 * 1000 {
            Some(format!("not opened within {} s", esc.after_secs))
        } else if has_deadline && now >= p.created_at + (p.deadline - p.created_at) / 2 {
            Some("not opened with half the time to its timeout gone".into())
        } else {
            None
        };
        if let Some(why) = why {
            escalate(inner, &p.id, &msg, &why).await;
        }
    }
    if esc.renotify_after_secs == 0 {
        return;
    }
    let done = rows.iter().filter_map(round).max().unwrap_or(0);
    let n = done + 1;
    let due = p.created_at + (esc.renotify_after_secs * 1000) as i64 * n as i64;
    if done >= esc.renotify_max || now < due || (has_deadline && due >= p.deadline) {
        return;
    }
    // Again to every channel that took the notification (one still failing is being retried,
    // one that failed for good is what escalation is for).
    let mut targets: Vec<&str> = rows
        .iter()
        .filter(|r| r.event != "reminder" && r.state == "delivered")
        .map(|r| r.target.as_str())
        .collect();
    targets.sort();
    targets.dedup();
    let mut again = msg.clone();
    again.title = format!("Still waiting: {}", msg.title);
    let why = format!(
        "re-notify {n} of {}: not opened {} s after the request opened",
        esc.renotify_max,
        (now - p.created_at) / 1000
    );
    for target in targets {
        let id = format!("msg_{}_{}_r{n}", p.id, short(target));
        inner.queue_as(id, "reminder", target, &again, &why).await;
    }
}

/// Looks at every open request once a [`TICK`], as long as the notifier runs.
pub(crate) async fn run(inner: Arc<Inner>) {
    let esc = &inner.config.escalation;
    if esc.renotify_after_secs == 0 && esc.to.is_empty() {
        return;
    }
    loop {
        tokio::time::sleep(TICK).await;
        for p in inner.relay.pending(None) {
            look_at(&inner, &p).await;
        }
    }
}
