//! `codex-relay run --approve ask`: each approval is put to the person at the terminal (`/dev/tty`), and refused up front when there is none.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};

use anyhow::Context;
use codex_relay::{Approval, ApprovalDecision, ApprovalKind, ApprovalRequest};

const TTY: &str = "/dev/tty";

/// The approval callback that asks on the terminal; an error when there is no terminal.
pub fn terminal_approval() -> anyhow::Result<Approval> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(TTY)
        .context("--approve ask needs a terminal to ask on (/dev/tty); use --approve auto, deny or never")?;
    // One question at a time, even if Codex asks twice at once.
    let lock = std::sync::Arc::new(tokio::sync::Mutex::new(()));
    Ok(Approval::callback(move |req| {
        let lock = lock.clone();
        async move {
            let _turn = lock.lock().await;
            tokio::task::spawn_blocking(move || ask(&req))
                .await
                .unwrap_or_else(|e| {
                    ApprovalDecision::deny(format!("the terminal prompt failed: {e}"))
                })
        }
    }))
}

fn ask(req: &ApprovalRequest) -> ApprovalDecision {
    match ask_tty(req) {
        Ok(d) => d,
        Err(e) => ApprovalDecision::deny(format!("nobody could be asked: {e}")),
    }
}

fn ask_tty(req: &ApprovalRequest) -> std::io::Result<ApprovalDecision> {
    let _terminal = crate::progress::prompting();
    let tty = OpenOptions::new().read(true).write(true).open(TTY)?;
    let mut out = tty.try_clone()?;
    let mut input = BufReader::new(tty);
    let what = match req.kind {
        ApprovalKind::Command => format!("run `{}`", req.command.as_deref().unwrap_or("?")),
        ApprovalKind::FileChange => "change files".to_owned(),
        _ => "widen its permissions".to_owned(),
    };
    // One write for the whole question: a terminal write is never split by another writer.
    let mut question = format!("\r\x1b[2K\ncodex-relay: Codex wants to {what}\n");
    if let Some(cwd) = &req.cwd {
        question += &format!("  in {cwd}\n");
    }
    if let Some(reason) = &req.reason {
        question += &format!("  because: {reason}\n");
    }
    if let Some(diff) = &req.diff {
        question += &format!("{diff}\n");
    }
    if let Some(reach) = req.reach {
        question += &format!("  {}\n", reach.text());
    }
    out.write_all(question.as_bytes())?;
    loop {
        write!(
            out,
            "[a]pprove, approve for [s]ession, [d]eny (d: reason)? "
        )?;
        out.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            return Ok(ApprovalDecision::deny("the terminal closed"));
        }
        let line = line.trim();
        let (head, reason) = match line.split_once(':') {
            Some((h, r)) => (
                h.trim(),
                Some(r.trim().to_owned()).filter(|r| !r.is_empty()),
            ),
            None => (line, None),
        };
        match head.to_ascii_lowercase().as_str() {
            "a" | "approve" | "y" | "yes" => return Ok(ApprovalDecision::Approve),
            "s" | "session" => return Ok(ApprovalDecision::ApproveForSession),
            "d" | "deny" | "n" | "no" => return Ok(ApprovalDecision::Deny { reason }),
            _ => writeln!(out, "please answer a, s or d")?,
        }
    }
}
