//! Notifications of codex-relay (docs/NOTIFY.md).
pub mod config;
pub mod message;
pub mod standard;
pub mod webpush;
