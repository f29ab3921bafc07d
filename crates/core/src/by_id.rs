//! Finding a pending request known only by its id (the reference-001 HTTP contract names no
//! session): this relay's sessions (or, in a cluster, the store) have it; a request that is
//! gone says whether it was resolved. The front then answers it with `respond`.

use crate::broker::PendingView;
use crate::error::RelayError;
use crate::relay::Relay;

impl Relay {
    /// The open request with this id, in any session this relay knows.
    pub fn pending_by_id(&self, request_id: &str) -> Option<PendingView> {
        self.pending(None).into_iter().find(|p| p.id == request_id)
    }

    /// The open request with this id, in any session. In a cluster this includes a request
    /// another instance opened a moment ago and this one has not mirrored yet: it is looked
    /// for in the store (waiting up to a second for its commit) and its session's mirror is
    /// caught up.
    pub async fn find_pending(&self, request_id: &str) -> Option<PendingView> {
        if let Some(p) = self.pending_by_id(request_id) {
            return Some(p);
        }
        let (session, None) = self.placement().stored_request(request_id, true).await? else {
            return None;
        };
        if self.session(&session).await.ok()?.remote
            && let Err(e) = self.placement().catch_up(&self.host(), &session).await
        {
            tracing::warn!(session = %session, "a mirror could not catch up: {e}");
        }
        self.pending_by_id(request_id)
    }

    /// Why a request is not open, answering nothing: `AlreadyResolved` (with who resolved
    /// it) or `UnknownRequest`. In a cluster the store's record comes first: it is what the
    /// session's log says, written by the instance that ran the session when it ended (this
    /// instance may remember an ending of its own that does not count, from when it stopped a
    /// session it had lost); then this relay's broker.
    pub async fn not_open(&self, request_id: &str) -> RelayError {
        let stored = self
            .placement()
            .stored_request(request_id, false)
            .await
            .and_then(|(_, r)| r);
        let resolved = stored.or_else(|| self.inner.broker.resolution(request_id));
        match resolved {
            Some(r) => RelayError::AlreadyResolved {
                id: request_id.to_owned(),
                decision: r.decision.as_str().to_owned(),
                by: r.by.as_str().to_owned(),
            },
            None => RelayError::UnknownRequest {
                session: String::new(),
                request: request_id.to_owned(),
            },
        }
    }
}
