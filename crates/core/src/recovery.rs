//! Bringing a relay back after a restart: sessions and their history from the store (dormant
//! until the next `say`), and requests that were pending when it stopped, resolved as declined.

use serde_json::json;

use crate::broker::Resolution;
use crate::error::RelayError;
use crate::event::Ev;
use crate::relay::Relay;
use crate::session::{SessionShared, SessionStatus};

pub(crate) async fn restore(relay: &Relay) -> Result<(), RelayError> {
    let store = relay.store().clone();
    let records = store.sessions().await?;
    for rec in &records {
        // The session row is written when the status changes; events logged after that are
        // only in the events table. Continue after the last stored event, or the events
        // appended below would reuse its seqs (and the store would keep the old ones).
        let mut rec = rec.clone();
        rec.last_seq = rec.last_seq.max(store.last_seq(&rec.id).await?);
        let state = SessionShared::restored_state(&rec);
        let restored_status = state.status;
        let shared = SessionShared::new(
            rec.id.clone(),
            store.clone(),
            relay.inner.config.event_buffer,
            state,
        );
        relay.spawn_session(shared.clone(), None, &[]);
        if Some(restored_status) != SessionStatus::parse(&rec.status) {
            // It was running when the relay stopped; that turn is lost.
            shared.append(
                crate::event::Role::System,
                None,
                Ev::Error {
                    message: "the relay restarted while a turn was running; say something to resume the session".into(),
                    retrying: false,
                },
            );
            shared.append(
                crate::event::Role::System,
                None,
                Ev::Status {
                    status: restored_status.as_str().into(),
                },
            );
            shared.persist();
        }
    }
    let why = "the relay restarted; the Codex process that asked is gone";
    for mut p in store.pending(None, true).await? {
        let resolution = Resolution {
            id: p.id.clone(),
            decision: "deny".into(),
            by: "relay-restart".into(),
            reason: Some(why.into()),
        };
        p.resolution = Some(json!(resolution).to_string());
        store.upsert_pending(p.clone());
        relay.note(
            &p.session_id,
            Ev::RequestResolved {
                id: p.id.clone(),
                decision: "deny".into(),
                by: "relay-restart".into(),
                reason: Some(why.into()),
            },
        );
        relay.inner.broker.remember(resolution);
    }
    if !records.is_empty() {
        tracing::info!(sessions = records.len(), "restored sessions from the store");
    }
    Ok(())
}
