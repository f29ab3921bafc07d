//! The integration tests of codex-relay-notify (webhooks and answer links over the real Codex), as one test binary.
//!
//! One module per scenario file in this directory (a test's name is `<file>::<test>`, so
//! `cargo test -p <crate> --test all <file>` runs one file), as in every crate of the workspace.

mod escalate_person;
mod escalation;
mod webhooks;
