//! A cap on open event streams (the session and relay SSE streams, MCP's streams), in all and
//! per caller (the token, or one browser login): a stream past the caller's share gets 429, one
//! past the total 503, both with a message that says which. A named user's open stream is
//! ended once their token is revoked or they are disabled (checked every [`RECHECK`]).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::auth::{Credentials, Principal};
use crate::error::ApiError;

/// How often a named user's open stream checks that their token still lets them in.
pub const RECHECK: std::time::Duration = std::time::Duration::from_secs(10);

/// How many event streams may be open.
#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    pub total: usize,
    pub per_caller: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            total: 1024,
            per_caller: 256,
        }
    }
}

/// The open streams, by caller.
#[derive(Clone)]
pub struct Streams {
    limits: StreamLimits,
    open: Arc<Mutex<HashMap<Principal, usize>>>,
    /// Where personal tokens are checked again (none: streams are never re-checked).
    credentials: Option<Arc<Credentials>>,
}

/// Held by an open stream's body; frees its place when the stream ends.
struct Slot {
    open: Arc<Mutex<HashMap<Principal, usize>>>,
    who: Principal,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.who) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.who);
            }
        }
    }
}

impl Streams {
    /// Re-checks named users' open streams against `credentials`' people.
    pub fn checking(mut self, credentials: Arc<Credentials>) -> Self {
        self.credentials = Some(credentials);
        self
    }

    fn people(&self) -> Option<codex_relay_core::people::People> {
        self.credentials.as_ref()?.people().cloned()
    }

    pub fn new(limits: StreamLimits) -> Self {
        Self {
            limits,
            open: Arc::default(),
            credentials: None,
        }
    }

    fn take(&self, who: &Principal) -> Result<Slot, ApiError> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let total: usize = open.values().sum();
        if total >= self.limits.total {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_streams",
                format!(
                    "{total} event streams are open on this relay, its limit; close one and try again"
                ),
            ));
        }
        let mine = open.entry(who.clone()).or_default();
        if *mine >= self.limits.per_caller {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_streams",
                format!(
                    "you have {} event streams open, the limit per caller; close one and try again",
                    *mine
                ),
            ));
        }
        *mine += 1;
        Ok(Slot {
            open: self.open.clone(),
            who: who.clone(),
        })
    }
}

/// A body that keeps its stream's place until it ends or is dropped, and ends when told its
/// token no longer lets its caller in.
struct Counted {
    inner: Body,
    _slot: Slot,
    /// Fires when the caller's token was revoked or their user disabled.
    revoked: Option<tokio::sync::oneshot::Receiver<()>>,
    /// Stops the re-checking task when the stream ends.
    _recheck: Option<tokio_util::sync::DropGuard>,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if let Some(rx) = &mut self.revoked {
            match Pin::new(rx).poll(cx) {
                // The end of the stream: the client's next request is refused (401).
                Poll::Ready(Ok(())) => return Poll::Ready(None),
                Poll::Ready(Err(_)) => self.revoked = None,
                Poll::Pending => {}
            }
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The middleware: a response that is an event stream takes a place or is refused.
pub async fn limit(State(streams): State<Streams>, req: Request, next: Next) -> Response {
    let who = req
        .extensions()
        .get::<Principal>()
        .cloned()
        .unwrap_or(Principal::Open);
    let res = next.run(req).await;
    let is_stream = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_stream {
        return res;
    }
    let slot = match streams.take(&who) {
        Ok(slot) => slot,
        Err(e) => return e.into_response(),
    };
    let (revoked, recheck) = match (&who, streams.people()) {
        (Principal::User(g), Some(people)) => {
            let (rx, guard) = recheck(people, g.token_id.clone());
            (Some(rx), Some(guard))
        }
        _ => (None, None),
    };
    res.map(|inner| {
        Body::new(Counted {
            inner,
            _slot: slot,
            revoked,
            _recheck: recheck,
        })
    })
}

/// Checks token `token_id` every [`RECHECK`] until the stream ends (the guard is dropped);
/// the receiver fires once the token no longer lets its holder in. A check the store cannot
/// answer keeps the stream (new requests are still refused while the store is down).
fn recheck(
    people: codex_relay_core::people::People,
    token_id: String,
) -> (
    tokio::sync::oneshot::Receiver<()>,
    tokio_util::sync::DropGuard,
) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let stop = tokio_util::sync::CancellationToken::new();
    let guard = stop.clone().drop_guard();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(RECHECK);
        every.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            match people.token_active(&token_id).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!(token = %token_id, "ending an open stream: its token was revoked or its user disabled");
                    let _ = tx.send(());
                    return;
                }
                Err(e) => tracing::debug!("re-checking a stream's token: {e}"),
            }
        }
    });
    (rx, guard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_counted_per_caller_and_in_all_and_freed() {
        let s = Streams::new(StreamLimits {
            total: 3,
            per_caller: 2,
        });
        let a = Principal::Login("a".into());
        let b = Principal::Login("b".into());
        let a1 = s.take(&a).unwrap();
        let _a2 = s.take(&a).unwrap();
        assert_eq!(
            s.take(&a).err().unwrap().status,
            StatusCode::TOO_MANY_REQUESTS
        );
        let _b1 = s.take(&b).unwrap();
        assert_eq!(
            s.take(&b).err().unwrap().status,
            StatusCode::SERVICE_UNAVAILABLE
        );
        drop(a1);
        assert!(s.take(&b).is_ok(), "a place was freed");
    }
}
