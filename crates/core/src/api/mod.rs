//! What every front calls and shows, in one place: start requests checked once ([`start`]) and
//! the views the fronts share ([`views`]: store fault, token usage, sub-agents). A front builds
//! its documented JSON from these instead of from the engine's internals.

pub mod start;
pub mod views;

pub use start::{InvalidStart, StartRequest};
pub use views::{AgentView, StoreFaultView, UsageView};
