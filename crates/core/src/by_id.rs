//! Answering a pending request known only by its id (the reference-001 HTTP contract names no
//! session): the broker (or, in a cluster, the store) finds its session; a request that is gone
//! says whether it was resolved.

use crate::answer::Answer;
use crate::broker::{PendingView, Resolution};
use crate::error::RelayError;
use crate::relay::Relay;
use crate::views::ResolvedBy;

impl Relay {
    /// The open request with this id, in any session.
    pub fn pending_by_id(&self, request_id: &str) -> Option<PendingView> {
        self.pending(None).into_iter().find(|p| p.id == request_id)
    }

    /// Answers a pending request of any session; the first answer wins. A request that is no
    /// longer open gives `AlreadyResolved` (with who resolved it) or `UnknownRequest`.
    pub async fn respond_by_id(
        &self,
        request_id: &str,
        answer: Answer,
        by: &str,
    ) -> Result<Resolution, RelayError> {
        match self.pending_by_id(request_id) {
            Some(p) => self.respond(&p.session_id, request_id, answer, by).await,
            None => {
                // Not open here: the broker tells a request it resolved from one it never had.
                let here = self
                    .inner
                    .broker
                    .answer("", request_id, answer.clone(), ResolvedBy::Front(by.into()))
                    .await;
                // In a cluster, another instance may have it (open or resolved there, perhaps
                // not mirrored here yet): its session's owner answers.
                if matches!(here, Err(RelayError::UnknownRequest { .. }))
                    && let Some(session) = self.session_of_request(request_id).await
                    && self.session(&session).await.is_ok_and(|h| h.remote)
                {
                    return self.respond(&session, request_id, answer, by).await;
                }
                here
            }
        }
    }
}
