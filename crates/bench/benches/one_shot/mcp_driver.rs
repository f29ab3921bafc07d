//! The relay's side when `codex-relay run` is not there: one task through `codex-relay mcp` over
//! stdio (initialize, `codex_start`, `codex_status` long-polls until the turn ends, stdin closed
//! so the relay shuts Codex down and exits), in raw JSON-RPC lines.

use std::io::{BufRead, BufReader, Write};
use std::process::Child;

use serde_json::{Value, json};

struct Conn {
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next_id: u64,
}

impl Conn {
    fn send(&mut self, line: Value) -> Result<(), String> {
        writeln!(self.stdin, "{line}").map_err(|e| e.to_string())?;
        self.stdin.flush().map_err(|e| e.to_string())
    }

    /// Sends a request and reads lines until its answer (notifications are skipped).
    fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let mut text = String::new();
            if self
                .stdout
                .read_line(&mut text)
                .map_err(|e| e.to_string())?
                == 0
            {
                return Err(format!("the relay closed stdout during {method}"));
            }
            let msg: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
            if msg.get("id") == Some(&id) && msg.get("method").is_none() {
                if let Some(err) = msg.get("error") {
                    return Err(format!("{method}: {err}"));
                }
                return Ok(msg["result"].clone());
            }
        }
    }
}

/// Drives the task; returns the final message (the session's `result`) or why it failed.
/// Closing stdin on return makes the relay shut Codex down and exit.
pub fn one_shot(child: &mut Child, prompt: &str, cwd: &str) -> Result<String, String> {
    let mut conn = Conn {
        stdin: child.stdin.take().ok_or("no stdin")?,
        stdout: BufReader::new(child.stdout.take().ok_or("no stdout")?),
        next_id: 0,
    };
    conn.call(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "one-shot-bench", "version": "0"}}),
    )?;
    conn.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    let started = conn.call(
        "tools/call",
        json!({"name": "codex_start", "arguments": {
            "prompt": prompt, "workingDirectory": cwd,
            "sandbox": "read-only", "approvalPolicy": "never"}}),
    )?;
    let session = started["structuredContent"]["sessionId"]
        .as_str()
        .ok_or_else(|| format!("codex_start answered {started}"))?
        .to_owned();
    loop {
        let status = conn.call(
            "tools/call",
            json!({"name": "codex_status", "arguments": {
                "sessionId": session, "waitMs": 60000, "until": "attention"}}),
        )?;
        let s = &status["structuredContent"];
        match s["status"].as_str() {
            Some("done") => return Ok(s["result"].as_str().unwrap_or_default().to_owned()),
            Some("error" | "interrupted" | "closed") => {
                return Err(format!("the turn ended {}: {}", s["status"], s["error"]));
            }
            _ => {}
        }
    }
}
