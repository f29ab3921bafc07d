//! The progress line `codex-relay run` keeps on stderr when stderr is a terminal: elapsed time, what Codex is doing, tokens so far.

use std::io::Write;
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Instant;

use codex_relay::event::{Delta, Envelope, Ev};

/// Held by the terminal prompt for `--approve ask` from its first line to the answer, so the
/// progress line (drawn from another task) never lands inside a question or wipes it.
static PROMPT: Mutex<()> = Mutex::new(());

/// Takes the terminal for a question; the progress line stays quiet until the guard drops.
pub fn prompting() -> MutexGuard<'static, ()> {
    PROMPT.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct Progress {
    on: bool,
    started: Instant,
    doing: String,
    tokens: i64,
    shown: bool,
    /// Approvals open: the line is left alone while someone may be typing an answer.
    pending: usize,
}

impl Progress {
    /// `on`: stderr is a terminal; otherwise nothing is ever written.
    pub fn new(on: bool) -> Self {
        Self {
            on,
            started: Instant::now(),
            doing: "starting".into(),
            tokens: 0,
            shown: false,
            pending: 0,
        }
    }

    pub fn event(&mut self, env: &Envelope) {
        match &env.ev {
            Ev::TurnStart {} => self.doing = "thinking".into(),
            Ev::ToolCallStart { title, name, .. } => {
                self.doing = format!("{}: {}", name, one_line(title));
            }
            Ev::ToolCallEnd { .. } => self.doing = "thinking".into(),
            Ev::RequestOpened { .. } => {
                self.pending += 1;
                self.doing = "waiting for an approval".into();
                if self.pending == 1 {
                    self.draw();
                }
                return;
            }
            Ev::RequestResolved { .. } => {
                self.pending = self.pending.saturating_sub(1);
                self.doing = "thinking".into();
            }
            Ev::Usage { total, .. } => self.tokens = total.total_tokens,
            Ev::Error {
                message,
                retrying: true,
            } => {
                self.doing = format!("retrying: {}", one_line(message));
            }
            _ => return,
        }
        if self.pending == 0 {
            self.draw();
        }
    }

    pub fn delta(&mut self, d: &Delta) {
        if d.stream == "text" && self.doing != "writing" && self.pending == 0 {
            self.doing = "writing".into();
            self.draw();
        }
    }

    fn draw(&mut self) {
        if !self.on {
            return;
        }
        let _quiet = match PROMPT.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            // Someone is being asked; the answer's `request-resolved` draws again.
            Err(TryLockError::WouldBlock) => return,
        };
        let line = format!(
            "codex-relay: {:>5.1}s · {} · {} tokens",
            self.started.elapsed().as_secs_f64(),
            self.doing,
            self.tokens
        );
        let line: String = line.chars().take(120).collect();
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
        self.shown = true;
    }

    /// Removes the line before the result is printed.
    pub fn clear(&mut self) {
        if self.on && self.shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.shown = false;
        }
    }
}

fn one_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}
