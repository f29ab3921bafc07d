//! The integration tests of codex-relay-mcp (the MCP tools' arguments, answers in words), as one test binary.
//!
//! One module per scenario file in this directory (a test's name is `<file>::<test>`, so
//! `cargo test -p <crate> --test all <file>` runs one file); the shared helpers are modules
//! beside them, so that a helper no test uses is dead code.

mod fuzz_params;
mod fuzz_words;
