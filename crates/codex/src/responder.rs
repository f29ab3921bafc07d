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

    /// Answers fail-closed (decline approvals, error the rest) and says why in the log.
    pub fn fail_closed(mut self, why: &str) -> bool {
        let answer = self.request.fail_closed(why);
        tracing::warn!(id = %self.id, method = self.request.method(), "answering fail-closed: {why}");
        self.send(answer)
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
        if !self.answered {
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
