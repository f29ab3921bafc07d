//! `GET /api/sessions/{id}/stream`: a session's log as Server-Sent Events. History from the
//! cursor first, then live, with nothing lost or repeated at the seam: the stream subscribes
//! to the session's changes BEFORE it reads the log, and reads the log by seq cursor, so an
//! event appended while history is being sent is read by the next pass.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use codex_relay_core::{Envelope, Ev, Follow, FollowOptions, Followed};

use crate::AppState;
use crate::error::{ApiError, ErrorBody};
use crate::types::StreamQuery;

/// How often an idle stream sends a `: keep-alive` comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Events read from the log per pass (and written to the client as one chunk).
const BATCH: usize = 256;

/// The cursor a client resumes from: `Last-Event-ID` wins over `?after=`.
fn cursor(headers: &HeaderMap, q: &StreamQuery) -> Result<u64, ApiError> {
    match headers.get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| ApiError::bad_request("Last-Event-ID must be an event seq (a number)")),
        None => Ok(q.after.unwrap_or(0)),
    }
}

/// Appends one SSE event to `out` (`data` is one line: JSON has its newlines escaped).
pub fn frame(out: &mut String, event: &str, id: Option<u64>, data: &str) {
    out.push_str("event: ");
    out.push_str(event);
    out.push('\n');
    if let Some(id) = id {
        let _ = writeln!(out, "id: {id}");
    }
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
}

/// An envelope as an SSE event (`id:` = seq), followed by its reference-001 event if any.
pub fn envelope_frames(out: &mut String, env: &Envelope) {
    frame(
        out,
        "envelope",
        Some(env.seq),
        &serde_json::to_string(env).unwrap_or_default(),
    );
    if let Ev::RequestOpened { request } = &env.ev
        && let Some((kind, data)) = crate::permission::compat_event(request)
    {
        frame(out, kind, None, &data.to_string());
    }
}

#[utoipa::path(get, path = "/api/sessions/{id}/stream", tag = "streams",
    params(("id" = String, Path, description = "session id"), StreamQuery,
        ("Last-Event-ID" = Option<u64>, Header, description = "resume after this seq")),
    responses((status = 200, content_type = "text/event-stream",
        description = "events `envelope` (id = seq), `delta`, `permission_request`, `ask_user_question`, `end`"),
        (status = 404, body = ErrorBody)))]
pub async fn stream(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<StreamQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let after = cursor(&headers, &q)?;
    st.relay.find(&id).await?;
    let follow = st
        .relay
        .follow(
            &id,
            after,
            FollowOptions {
                deltas: true,
                batch: BATCH,
            },
        )
        .await?;
    let mut keep_alive =
        tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
    keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let pump = Pump {
        stop: Box::pin(st.opts.stop.clone().cancelled_owned()),
        frames: st.frames.session(&id),
        follow,
        keep_alive,
        _counted: Subscriber::new(&st.metrics),
    };
    // The stream runs in the connection's own task: no task or queue per subscriber; when
    // the client goes, hyper drops it.
    let body = futures::stream::unfold(pump, |mut p| async move {
        let chunk = p.next_chunk().await?;
        Some((Ok::<_, Infallible>(chunk), p))
    });
    Ok(sse_response(Body::from_stream(body)))
}

/// Counts an open stream in the metrics while it lives.
pub struct Subscriber(std::sync::Arc<crate::health::HttpMetrics>);

impl Subscriber {
    pub fn new(metrics: &std::sync::Arc<crate::health::HttpMetrics>) -> Self {
        metrics.sse_subscribers.fetch_add(1, Ordering::Relaxed);
        Self(metrics.clone())
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.0.sse_subscribers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A `text/event-stream` response around `body`.
pub fn sse_response(body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// One subscriber's position in a session's log, and its frames.
struct Pump {
    /// The server stops: the stream ends. Made once: a fresh `cancelled()` on every chunk
    /// registered and removed a waiter in the token every stream shares.
    stop: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
    follow: Follow,
    keep_alive: tokio::time::Interval,
    frames: std::sync::Arc<crate::frames::SessionFrames>,
    _counted: Subscriber,
}

impl Pump {
    /// The next chunk: every logged event after the cursor (up to a batch, as one chunk), or
    /// else, once something happens, a delta, a keep-alive or the end. `None` ends the stream.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        let next = tokio::select! {
            _ = self.stop.as_mut() => return None,
            next = self.follow.next() => next?,
            _ = self.keep_alive.tick() => return Some(Bytes::from_static(b": keep-alive\n\n")),
        };
        match next {
            Ok(Followed::Events(batch)) => {
                if let [one] = batch.as_slice() {
                    return Some(self.frames.get(one));
                }
                let mut chunk = Vec::with_capacity(batch.len() * 256);
                for env in &batch {
                    chunk.extend_from_slice(&self.frames.get(env));
                }
                Some(Bytes::from(chunk))
            }
            Ok(Followed::Delta(d)) => {
                let mut text = String::new();
                frame(
                    &mut text,
                    "delta",
                    None,
                    &serde_json::to_string(&d).unwrap_or_default(),
                );
                Some(Bytes::from(text))
            }
            Ok(Followed::End) => {
                let mut text = String::new();
                frame(&mut text, "end", None, r#"{"reason":"closed"}"#);
                Some(Bytes::from(text))
            }
            Err(e) => {
                tracing::warn!(session = %self.follow.session_id(), "SSE stream stops: {e}");
                None
            }
        }
    }
}
