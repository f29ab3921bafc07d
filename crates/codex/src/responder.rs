//! The answer slot of one server request: answered exactly once, and answered fail-closed if
//! it is dropped unanswered (so a lost request never blocks a Codex turn).

use std::sync::Weak;

use codex_relay_protocol::v2::ServerRequest;
use codex_relay_protocol::{RequestId, RpcError};
use serde_json::Value;

use crate::peer::Inner;

pub struct Responder {
    id: RequestId,
    request: ServerRequest,
    peer: Weak<Inner>,
    answered: bool,
}

impl Responder {
    pub(crate) fn new(id: RequestId, request: ServerRequest, peer: Weak<Inner>) -> Self {
        Self {
            id,
            request,
            peer,
            answered: false,
        }
    }

    pub fn id(&self) -> &RequestId {
        &self.id
    }

    pub fn request(&self) -> &ServerRequest {
        &self.request
    }

    /// Sends the answer. Returns false when the peer is already closed.
    pub fn respond(mut self, answer: Result<Value, RpcError>) -> bool {
        self.send(answer)
    }

    /// Answers fail-closed (decline approvals, error the rest) and says why in the log. On a
    /// shared app-server ([`crate::PeerConfig::shared`]) nothing is sent: the request is left
    /// to the other clients, who see it too.
    pub fn fail_closed(mut self, why: &str) -> bool {
        if self.leave_to_others(why) {
            return false;
        }
        let answer = self.request.fail_closed(why);
        tracing::warn!(id = %self.id, method = self.request.method(), "answering fail-closed: {why}");
        self.send(answer)
    }

    /// On a shared app-server, marks the request as let go (nothing is sent) and says so.
    fn leave_to_others(&mut self, why: &str) -> bool {
        let shared = self.peer.upgrade().is_some_and(|inner| inner.config.shared);
        if shared {
            self.answered = true;
            tracing::info!(id = %self.id, method = self.request.method(), "left to the other clients of the shared app-server: {why}");
        }
        shared
    }

    fn send(&mut self, answer: Result<Value, RpcError>) -> bool {
        self.answered = true;
        match self.peer.upgrade() {
            Some(inner) => inner.send_response(&self.id, answer),
            None => false,
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if !self.answered && !self.leave_to_others("dropped without an answer") {
            let answer = self
                .request
                .fail_closed("the request was dropped without an answer");
            tracing::warn!(id = %self.id, method = self.request.method(), "server request dropped unanswered; answering fail-closed");
            self.send(answer);
        }
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("id", &self.id)
            .field("answered", &self.answered)
            .finish()
    }
}
