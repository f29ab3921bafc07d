//! Benchmarks live in `benches/`; `src/bin/fake-app-server.rs` is the stand-in Codex they drive.

pub mod sse;
