//! Create: starts a new session on the instance it is sent to.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::Operation;
use crate::config::CreateOptions;
use crate::error::RelayError;
use crate::relay::Relay;
use crate::session::SayOutcome;

/// Starts a new session (on the instance it is sent to).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Create {
    pub options: Box<CreateOptions>,
}

/// What a new session started answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Created {
    pub session_id: String,
    pub first: Option<SayOutcome>,
}

impl Operation for Create {
    type Reply = Created;
    const AGAIN_IS_HARMLESS: bool = false;
    fn session(&self) -> Option<&str> {
        None
    }
    fn run_here(self, relay: &Relay) -> BoxFuture<'_, Result<Created, RelayError>> {
        Box::pin(async move {
            let epoch = relay.placement_epoch();
            let (handle, first) = relay.create_here(*self.options).await?;
            // The session's row (and its first message) is committed before the caller
            // mirrors it.
            match &first {
                Some(first) => {
                    relay
                        .acknowledge_turn(&handle.shared, 0, first, epoch)
                        .await?
                }
                None => relay.confirm_stored(epoch).await?,
            }
            Ok(Created {
                session_id: handle.id().to_owned(),
                first,
            })
        })
    }
}
