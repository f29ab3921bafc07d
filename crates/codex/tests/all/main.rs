//! The integration tests of codex-relay-codex (the peer, the process, routing; on the real Codex), as one test binary.
//!
//! One module per scenario file in this directory (a test's name is `<file>::<test>`, so
//! `cargo test -p <crate> --test all <file>` runs one file); the shared helpers are modules
//! beside them, so that a helper no test uses is dead code.

mod common;

mod fake_peer;
mod fuzz_peer;
mod fuzz_seeds_schema;
mod model_failures;
mod real_approvals;
mod real_lifecycle;
mod real_rate_limits;
mod real_thread_ops;
mod real_threads;
mod real_turns;
mod schema;
mod schema_gate;
mod start_checks;
