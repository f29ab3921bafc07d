//! The test bed codex-relay is proven on: pinned real Codex binaries, a scripted
//! Responses-API model server, and a fresh `CODEX_HOME` per test.
//!
//! - [`install`]: installs `@openai/codex` at the pinned versions from the npm registry into a
//!   cache directory, once.
//! - [`model`]: the scripted model server (replies, failure modes, recorded requests).
//! - [`clients`]: the real MCP clients (Node and Python SDKs) and Node 22, from the registries.
//! - [`daemon`]: a Codex daemon in a test's `CODEX_HOME` (stopped with its updater loop) and a
//!   plain WebSocket client of its socket standing in for the TUI.
//! - [`echo`]: a child's log lines echoed into the test's output, bounded.
//! - [`exec`]: a thread made by `codex exec`, as another client would.
//! - [`oauth`]: a fake ChatGPT OAuth token endpoint (rotating refresh tokens, counted).
//! - [`ordinary`]: the ordinary (non-root) user security tests run the relay as.
//! - [`postgres`]: the test Postgres URL, or the explicit opt-out that skips those variants.
//! - [`skip`]: loud, counted skips (what `./scripts/test` lists and `CI=true` refuses).
//! - [`fixtures`]: pending requests and resolutions in their stored JSON shape.
//! - [`addrs`]: the machine's own addresses beyond loopback.
//! - [`loopback`]: an axum app on an ephemeral loopback port while its guard lives.
//! - [`tcp_proxy`]: a TCP proxy a test cuts and mends (a network cut to Postgres).
//! - [`home`]: a throw-away `CODEX_HOME` whose `config.toml` points Codex at that server.
//! - [`chaos`]: a fault-injection run over three `serve` instances on one private Postgres,
//!   with an invariant checker over the store and what clients were told.

pub mod addrs;
pub mod chaos;
pub mod clients;
pub mod daemon;
pub mod echo;
pub mod exec;
pub mod fixtures;
pub mod home;
pub mod install;
pub mod loopback;
pub mod model;
pub mod oauth;
pub mod ordinary;
pub mod postgres;
pub mod procs;
pub mod rate_limits;
pub mod skip;
pub mod tcp_proxy;

pub use home::{CodexHome, HomeOptions};

/// The token the tests give `codex-relay serve` (CODEX_RELAY_TOKEN) and their HTTP clients
/// send; `serve` requires one by default.
pub const RELAY_TEST_TOKEN: &str = "codex-relay-test-token-0123456789";
pub use install::{NEWEST, OLDEST, PINNED_VERSIONS, PREVIOUS, codex_bin};
pub use model::{Item, ModelServer, RecordedRequest, Reply, Usage as ScriptedUsage};

/// Generates one `#[tokio::test]` per main tested Codex version ([`NEWEST`] and the floor
/// [`OLDEST`]) for an `async fn scenario(version: &'static str)`, in a module named like the
/// scenario.
#[macro_export]
macro_rules! for_each_codex {
    ($($scenario:ident),* $(,)?) => {
        $(
            mod $scenario {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn codex_0_171_0() {
                    super::$scenario("0.171.0").await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn codex_0_98_0() {
                    super::$scenario("0.98.0").await
                }
            }
        )*
    };
}

/// As [`for_each_codex`], plus [`PREVIOUS`]: for the cheap scenarios (protocol-level, no
/// relay) where running one more Codex costs seconds, not minutes.
#[macro_export]
macro_rules! for_every_pinned_codex {
    ($($scenario:ident),* $(,)?) => {
        $(
            mod $scenario {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn codex_0_171_0() {
                    super::$scenario("0.171.0").await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn codex_0_169_0() {
                    super::$scenario("0.169.0").await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn codex_0_98_0() {
                    super::$scenario("0.98.0").await
                }
            }
        )*
    };
}
