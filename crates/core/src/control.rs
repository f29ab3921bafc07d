//! Stopping exactly one session's turn: interrupt it, and, past a grace, end it without
//! touching the sessions that share its Codex process (docs/LIBRARY.md, "Deadlines").

use std::time::Duration;

use codex_relay_codex::AppServer;

use crate::error::RelayError;
use crate::relay::Relay;

/// How [`Relay::stop_turn`] ended a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// No turn was running.
    NotRunning,
    /// Codex ended the turn when asked (`turn/interrupt`), within the grace.
    Interrupted,
    /// Codex did not, and the session had its Codex process to itself: that process tree was
    /// stopped (SIGTERM, then SIGKILL after a short grace). The session logs Codex's exit and
    /// its next `say` starts a new process and resumes the thread.
    Killed,
    /// Codex did not, and other sessions share the process: this session was closed instead
    /// (its turn ended as cancelled in the log, its requests declined, its threads
    /// unsubscribed, so Codex unloads them), and the others go on untouched.
    Closed,
}

impl Relay {
    /// Stops session `id`'s running turn (and its sub-agents'): interrupts it and waits up to
    /// `grace` for it to end; past that, stops its Codex process if the session has it to
    /// itself, else closes the session. See [`Stopped`].
    pub async fn stop_turn(&self, id: &str, grace: Duration) -> Result<Stopped, RelayError> {
        self.check_writable()?;
        let handle = self.session(id).await?;
        let shared = handle.shared.clone();
        if !shared.status().is_running() {
            return Ok(Stopped::NotRunning);
        }
        let until = tokio::time::Instant::now() + grace;
        let asked = handle.clone();
        // The interrupt's answer is not awaited past the grace: the status says when it ends.
        tokio::spawn(async move {
            if let Err(e) = asked.interrupt().await {
                tracing::warn!(session = %asked.id(), "turn/interrupt failed: {e}");
            }
        });
        let mut status = shared.subscribe_status();
        let ended = tokio::time::timeout_at(until, status.wait_for(|s| !s.is_running()))
            .await
            .is_ok();
        if handle.remote {
            // Another instance runs it: past the grace, that instance closes it.
            if ended {
                return Ok(Stopped::Interrupted);
            }
            handle.close(true).await?;
            return Ok(Stopped::Closed);
        }
        let server = self.inner.servers.server_of(id);
        if ended {
            if let Some(server) = &server {
                clean_background_terminals(server, id, grace).await;
            }
            return Ok(Stopped::Interrupted);
        }
        let alone = self.inner.servers.sessions_beside(id) == 0;
        match server {
            Some(server) if alone => {
                tracing::warn!(
                    session = id,
                    pid = server.pid(),
                    "the turn did not stop within the grace; stopping its Codex process"
                );
                let pgid = server.process().pgid();
                let procs = codex_relay_codex::platform::tree::descendants(server.pid());
                let stopping = codex_relay_codex::platform::tree::stop(
                    pgid,
                    None,
                    &procs,
                    codex_relay_codex::platform::tree::STOP_GRACE,
                );
                // The actor sees Codex exit and ends the turn in the log; wait for that briefly.
                let _ = tokio::time::timeout(
                    codex_relay_codex::platform::tree::STOP_GRACE * 3,
                    status.wait_for(|s| !s.is_running()),
                )
                .await;
                if stopping.any_left() {
                    stopping.kill_now();
                }
                Ok(Stopped::Killed)
            }
            server => {
                tracing::warn!(
                    session = id,
                    "the turn did not stop within the grace; its Codex process serves other sessions, so the session is closed instead"
                );
                shared.end_turn_cancelled(
                    "the turn did not stop when interrupted; the session was closed (its Codex process serves other sessions)",
                );
                let threads = shared.all_threads();
                handle.close(true).await?;
                if let Some(server) = server {
                    for thread in threads {
                        unsubscribe(&server, &thread).await;
                    }
                }
                Ok(Stopped::Closed)
            }
        }
    }
}

/// Codex 0.169 keeps an interrupted turn's commands running as background terminals of the
/// thread (a `sleep 30` outlives the turn); they are stopped too. Older Codex stops them with
/// the turn and does not know the method.
async fn clean_background_terminals(server: &AppServer, thread: &str, grace: Duration) {
    let params = serde_json::json!({ "threadId": thread });
    match server
        .peer()
        .request("thread/backgroundTerminals/clean", &params, Some(grace))
        .await
    {
        Ok(_) | Err(codex_relay_codex::PeerError::Unsupported { .. }) => {}
        Err(e) => tracing::warn!(
            thread,
            "stopping the turn's background terminals failed: {e}"
        ),
    }
}

/// Tells Codex this client no longer follows `thread` (0.169: it unloads a thread nobody
/// follows, ending its turn); older Codex does not know the method.
async fn unsubscribe(server: &AppServer, thread: &str) {
    let params = serde_json::json!({ "threadId": thread });
    match server
        .peer()
        .request("thread/unsubscribe", &params, Some(Duration::from_secs(5)))
        .await
    {
        Ok(_) | Err(codex_relay_codex::PeerError::Unsupported { .. }) => {}
        Err(e) => tracing::debug!(thread, "thread/unsubscribe failed: {e}"),
    }
}
