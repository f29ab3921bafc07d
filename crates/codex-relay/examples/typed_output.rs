//! A typed run: Codex answers in a struct of yours (its schema goes to Codex as the turn's
//! output schema), or the run fails in the `response` phase with the raw text.
//!
//! ```sh
//! cargo run -p codex-relay --example typed_output -- /path/to/repo
//! ```
//! Uses the binary's environment (`CODEX_CLI_PATH`, `CODEX_HOME`, `CODEX_RELAY_DB`, ...).
//! The test suite runs [`example`] against a scripted model (tests/all/examples.rs).

use codex_relay::{Client, Error, SessionOptions};
use serde::Deserialize;

/// What we want to know about a repository.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RepoSummary {
    /// One line.
    pub title: String,
    /// The languages in use.
    pub languages: Vec<String>,
    /// Whether it has tests.
    pub has_tests: bool,
}

/// Asks Codex to look at `cwd` and answer in a `RepoSummary`.
pub async fn example(client: &Client, cwd: &str) -> Result<RepoSummary, Error> {
    let session = client.session(SessionOptions::new().cwd(cwd)).await?;
    let summary = session
        .run_typed::<RepoSummary>("Look around this repository and summarize it.")
        .await?;
    eprintln!(
        "({} tokens in this turn, session {})",
        summary.run.usage.turn.total_tokens, summary.run.session_id
    );
    Ok(summary.value)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cwd = match std::env::args().nth(1) {
        Some(dir) => dir,
        None => std::env::current_dir()?.display().to_string(),
    };
    let client = Client::builder().build().await?;
    let result = example(&client, &cwd).await;
    client.shutdown().await;
    let summary = result?;
    println!("{}", summary.title);
    println!("languages: {}", summary.languages.join(", "));
    println!("tests: {}", if summary.has_tests { "yes" } else { "no" });
    Ok(())
}
