//! The subset of the `codex app-server` v2 protocol that codex-relay speaks.

mod common;
mod initialize;
mod item;
mod misc;
mod notification;
mod server_request;
pub mod surface;
mod thread;
mod thread_ops;
mod turn;

pub use common::*;
pub use initialize::*;
pub use item::*;
pub use misc::*;
pub use notification::*;
pub use server_request::*;
pub use thread::*;
pub use thread_ops::*;
pub use turn::*;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A client→server request: its method name, parameters and typed response.
pub trait ClientRequest {
    const METHOD: &'static str;
    type Params: Serialize + Send + Sync;
    type Response: DeserializeOwned + Send;
}

macro_rules! client_requests {
    ($($marker:ident = $method:literal ($params:ty) -> $resp:ty;)*) => {
        $(
            #[doc = concat!("Marker for the `", $method, "` request.")]
            #[derive(Debug, Clone, Copy)]
            pub enum $marker {}
            impl ClientRequest for $marker {
                const METHOD: &'static str = $method;
                type Params = $params;
                type Response = $resp;
            }
        )*
        /// Every client request method codex-relay can send, for schema checks.
        pub const CLIENT_METHODS: &[&str] = &[$($method),*];
    };
}

client_requests! {
    Initialize = "initialize" (InitializeParams) -> InitializeResponse;
    ThreadStart = "thread/start" (ThreadStartParams) -> ThreadStartResponse;
    ThreadResume = "thread/resume" (ThreadResumeParams) -> ThreadStartResponse;
    ThreadFork = "thread/fork" (ThreadForkParams) -> ThreadStartResponse;
    ThreadList = "thread/list" (ThreadListParams) -> ThreadListResponse;
    ThreadRead = "thread/read" (ThreadReadParams) -> ThreadReadResponse;
    ThreadArchive = "thread/archive" (ThreadIdParams) -> serde_json::Value;
    TurnStart = "turn/start" (TurnStartParams) -> TurnStartResponse;
    TurnSteer = "turn/steer" (TurnSteerParams) -> TurnSteerResponse;
    TurnInterrupt = "turn/interrupt" (TurnInterruptParams) -> serde_json::Value;
    ModelList = "model/list" (ModelListParams) -> ModelListResponse;
    ReviewStart = "review/start" (ReviewStartParams) -> ReviewStartResponse;
    ThreadRevert = "thread/revert" (ThreadRevertParams) -> ThreadRewoundResponse;
    ThreadRollback = "thread/rollback" (ThreadRollbackParams) -> ThreadRewoundResponse;
    ThreadCompactStart = "thread/compact/start" (ThreadIdParams) -> serde_json::Value;
    AccountLoginStart = "account/login/start" (LoginAccountParams) -> serde_json::Value;
}
