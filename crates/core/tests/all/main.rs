//! The integration tests of codex-relay-core (the engine on the real Codex, the store, recovery), as one test binary.
//!
//! One module per scenario file in this directory (a test's name is `<file>::<test>`, so
//! `cargo test -p <crate> --test all <file>` runs one file); the shared helpers are modules
//! beside them, so that a helper no test uses is dead code.

mod common;

mod attach;
mod attach_catch_up;
mod attach_place;
mod attach_rules;
mod attach_writer;
mod auth;
mod cluster;
mod crash_loop;
mod event_kinds;
mod failures;
mod fuzz_mapper;
mod layers;
mod login;
mod people_sso;
mod pool;
mod recovery;
mod recycle;
mod restarts;
mod retention;
mod rules;
mod sessions;
mod soak;
mod store;
mod store_faults;
mod store_fence;
mod store_passkeys;
mod store_readonly;
mod store_retention;
mod subagents;
mod thread_ops;
mod tools_and_limits;
mod workspace;
