//! Benchmarks live in `benches/`; `src/bin/fake-app-server.rs` is the stand-in Codex they drive.

pub mod sse;

/// The machine's load averages (1, 5, 15 min) as `/proc/loadavg` gives them, printed beside a
/// bench's figures so a run on a busy machine says so.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
