//! `GET /api/stream`: one Server-Sent Events stream for the whole relay (sessions created,
//! status changes, closes, requests opened and resolved), so a dashboard needs one connection.

use std::convert::Infallible;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use codex_relay_core::{Ev, RelayEvent};
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use crate::AppState;
use crate::sse::KEEP_ALIVE;

/// The dashboard events one relay event makes (most make none).
fn events_for(relay: &codex_relay_core::Relay, ev: &RelayEvent) -> Vec<Event> {
    let event = |kind: &str, data: Value| Event::default().event(kind).data(data.to_string());
    match ev {
        RelayEvent::SessionCreated(s) => {
            let mut out = vec![event(
                "session_created",
                json!({"sessionId": s.session_id, "status": s.status, "cwd": s.cwd, "model": s.model}),
            )];
            // A session that joins with requests already open (one another instance runs,
            // first mirrored here after its request opened; one restored) announces them too,
            // or this stream would show them only resolved. The snapshot is the session's as it
            // joined: a request opened later comes as its own event, so none comes twice.
            for request in &s.pending {
                out.extend(opened(request));
            }
            out
        }
        RelayEvent::Logged {
            session_id,
            envelope,
        } => match &envelope.ev {
            Ev::Status { status } => {
                let snap = relay.status(session_id).ok();
                let data = json!({"sessionId": &**session_id, "status": status,
                    "cwd": snap.as_ref().and_then(|s| s.cwd.clone()),
                    "model": snap.as_ref().and_then(|s| s.model.clone()),
                    "usage": snap.as_ref().and_then(|s| s.usage.clone()),
                    "seq": envelope.seq});
                let kind = if status == "closed" {
                    "session_closed"
                } else {
                    "session_status"
                };
                vec![event(kind, data)]
            }
            Ev::RequestOpened { request } => opened(request),
            Ev::RequestResolved {
                id,
                decision,
                by,
                reason,
                request,
                by_user,
            } => {
                let mut data = json!({"id": id, "sessionId": &**session_id, "decision": decision,
                    "by": by, "who": by.who(), "reason": reason});
                if let Some(person) = by_user {
                    data["byUser"] = json!(person);
                }
                if let Some(request) = request {
                    data["request"] = json!(request);
                }
                vec![event("request_resolved", data)]
            }
            Ev::Usage { .. } => vec![event(
                "session_usage",
                json!({"sessionId": &**session_id,
                    "usage": relay.status(session_id).ok().and_then(|s| s.usage)}),
            )],
            _ => Vec::new(),
        },
    }
}

/// `request_opened` for `request`, then its reference-001 event if it has one.
fn opened(request: &codex_relay_core::PendingView) -> Vec<Event> {
    let mut out = vec![
        Event::default()
            .event("request_opened")
            .data(json!(request).to_string()),
    ];
    if let Some((kind, data)) = crate::permission::compat_event(request) {
        out.push(Event::default().event(kind).data(data.to_string()));
    }
    out
}

#[utoipa::path(get, path = "/api/stream", tag = "streams",
    responses((status = 200, content_type = "text/event-stream",
        description = "events `session_created`, `session_status`, `session_closed`, `session_usage`, `request_opened`, `request_resolved`, `permission_request`, `ask_user_question`, `lagged`")))]
pub async fn stream(
    State(st): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut feed = st.relay.subscribe();
    let (tx, rx) = mpsc::channel::<Result<Event, Infallible>>(256);
    let relay = st.relay.clone();
    let metrics = st.metrics.clone();
    let stop = st.opts.stop.clone();
    metrics.sse_subscribers.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                n = feed.recv() => n,
                _ = tx.closed() => break,
                _ = stop.cancelled() => break,
            };
            let events = match next {
                Ok(ev) => events_for(&relay, &ev),
                // Fell behind: say so; the client re-reads `GET /api/sessions`.
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    vec![
                        Event::default()
                            .event("lagged")
                            .data(json!({"missed": n}).to_string()),
                    ]
                }
                Err(broadcast::error::RecvError::Closed) => break,
            };
            for e in events {
                if tx.send(Ok(e)).await.is_err() {
                    break;
                }
            }
        }
        metrics.sse_subscribers.fetch_sub(1, Ordering::Relaxed);
    });
    Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
}
