//! A custom tool: an async closure of yours that Codex's model can call. Its arguments come
//! from the model (checked against the schema derived from `Lookup`), its result goes back to
//! the model, and an error, a panic or a timeout is a failed call the model sees.
//!
//! ```sh
//! cargo run -p codex-relay --example custom_tool -- "What is ticket 7 about?"
//! ```
//! Uses the binary's environment (`CODEX_CLI_PATH`, `CODEX_HOME`, `CODEX_RELAY_DB`, ...).
//! The test suite runs [`example`] against a scripted model (tests/all/examples.rs).

use std::time::Duration;

use codex_relay::{Approval, Client, Error, RunResult, SessionOptions, Tool};
use serde::Deserialize;

/// The tool's arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Lookup {
    /// The ticket number.
    pub ticket: u32,
}

/// A stand-in for your ticket tracker.
async fn read_ticket(ticket: u32) -> Result<String, String> {
    match ticket {
        7 => Ok("ticket 7: the export button does nothing on Safari".into()),
        n => Err(format!("there is no ticket {n}")),
    }
}

/// Runs `prompt` in `cwd` with the `ticket` tool offered to the model.
pub async fn example(client: &Client, cwd: &str, prompt: &str) -> Result<RunResult, Error> {
    let tickets = Tool::typed("ticket", "Reads a ticket from the tracker", |q: Lookup| {
        read_ticket(q.ticket)
    })
    .timeout(Duration::from_secs(10));
    let options = SessionOptions::new()
        .cwd(cwd)
        .tool(tickets)
        .approval(Approval::Deny)
        .deadline(Duration::from_secs(300));
    client.run(options, prompt).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "What is ticket 7 about?".into());
    let cwd = std::env::current_dir()?.display().to_string();
    let client = Client::builder().build().await?;
    let result = example(&client, &cwd, &prompt).await;
    client.shutdown().await;
    let run = result?;
    for call in run.tool_calls() {
        eprintln!("called {} with {}", call.name, call.args);
    }
    println!("{}", run.text);
    Ok(())
}
