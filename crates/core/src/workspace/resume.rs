//! Continuing a session somewhere else: a thread resumed in another working directory (a fresh isolated copy of its mounts), sent to Codex as `cwd` on `thread/resume` and on the next `turn/start`.

use super::{Workspace, WorkspaceSpec};
use crate::error::RelayError;
use crate::relay::Relay;
use crate::session::{SessionHandle, SessionShared};

impl SessionShared {
    /// Points the session at `cwd`: the stored options (what `thread/resume` sends when the
    /// thread is loaded into an app-server), the snapshot, and the next `turn/start`.
    pub(crate) fn relocate(&self, cwd: &str, fingerprint: Option<&str>) {
        self.with_state(|s| {
            s.cwd = Some(cwd.to_owned());
            s.meta.pending_cwd = Some(cwd.to_owned());
            s.meta.options.cwd = Some(cwd.to_owned());
            if let Some(fp) = fingerprint {
                s.meta.options.workspace_fingerprint = Some(fp.to_owned());
            }
        });
        self.persist();
    }

    /// The directory the next `turn/start` moves the thread to, if the session was moved.
    pub(crate) fn pending_cwd(&self) -> Option<String> {
        self.with_state(|s| s.meta.pending_cwd.clone())
    }

    /// Codex took the new directory (a turn started with it).
    pub(crate) fn moved_cwd_sent(&self) {
        self.with_state(|s| s.meta.pending_cwd = None);
    }

    /// Remembers the spec of the isolated workspace the session works in, so a later resume
    /// can make a fresh copy of the same mounts.
    pub(crate) fn remember_workspace(&self, spec: &WorkspaceSpec) {
        self.with_state(|s| s.meta.workspace = Some(spec.clone()));
        self.persist();
    }

    /// The isolated workspace spec the session was created (or last resumed) with.
    pub fn workspace_spec(&self) -> Option<WorkspaceSpec> {
        self.with_state(|s| s.meta.workspace.clone())
    }
}

impl Relay {
    /// A session by id (as [`Relay::session`]), moved to `cwd` when given: the stored options
    /// take the new directory (sent as `cwd` on `thread/resume` when the thread is next loaded
    /// into a Codex), and the next turn starts with it (`turn/start`'s `cwd`, which also moves
    /// a thread that is loaded already). Refused while a turn runs. A closed session is open
    /// again: resuming it is asking for it.
    pub async fn resume_in(
        &self,
        id: &str,
        cwd: Option<&str>,
    ) -> Result<SessionHandle, RelayError> {
        let handle = self.session(id).await?;
        refuse_remote(&handle)?;
        handle.shared.reopen();
        if let Some(cwd) = cwd {
            move_to(&handle, cwd, None)?;
        }
        Ok(handle)
    }

    /// Continues a session in a fresh isolated copy of its mounts: `spec` when given (checked,
    /// and refused, before Codex starts), else the spec the session was created with. The old
    /// copy is not brought back: the new one holds the host's files as they are now. A session
    /// that was never isolated and gets no spec is resumed where it was (`None` workspace).
    /// Keep the returned [`Workspace`] as long as the session works in it.
    pub async fn resume_isolated(
        &self,
        id: &str,
        spec: Option<&WorkspaceSpec>,
    ) -> Result<(SessionHandle, Option<Workspace>), RelayError> {
        // A given spec is materialized first: a refusal comes before Codex is asked anything.
        let early = spec.map(Workspace::materialize).transpose()?;
        let handle = self.session(id).await?;
        refuse_remote(&handle)?;
        handle.shared.reopen();
        let (workspace, spec) = match (early, spec) {
            (Some(ws), Some(spec)) => (ws, spec.clone()),
            _ => match handle.shared.workspace_spec() {
                Some(stored) => (Workspace::materialize(&stored)?, stored),
                None => return Ok((handle, None)),
            },
        };
        let cwd = workspace.path().display().to_string();
        move_to(&handle, &cwd, Some(workspace.fingerprint()))?;
        handle.shared.remember_workspace(&spec);
        Ok((handle, Some(workspace)))
    }
}

impl Relay {
    /// Before a turn from any front (MCP, HTTP, legacy): a session created in an isolated copy
    /// whose copy no longer exists (the run or library client that owned it ended) continues in
    /// a fresh copy of the same mounts, kept until the session closes or the relay ends,
    /// instead of asking Codex to work in a directory that is gone.
    pub(crate) fn renew_isolated_copy(&self, handle: &SessionHandle) -> Result<(), RelayError> {
        let Some(spec) = handle.shared.workspace_spec() else {
            return Ok(());
        };
        let cwd = handle.shared.snapshot().cwd;
        if cwd
            .as_deref()
            .is_some_and(|c| std::path::Path::new(c).is_dir())
        {
            return Ok(());
        }
        let workspace = Workspace::materialize(&spec)?;
        move_to(
            handle,
            &workspace.path().display().to_string(),
            Some(workspace.fingerprint()),
        )?;
        tracing::info!(session = handle.id(), cwd = %workspace.path().display(),
            "the session's isolated copy was gone; continuing in a fresh copy of its mounts");
        self.inner
            .copies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(handle.id().to_owned(), workspace);
        Ok(())
    }
}

/// Moving a session or reopening it is for the instance that runs it.
fn refuse_remote(handle: &SessionHandle) -> Result<(), RelayError> {
    if handle.remote {
        return Err(RelayError::InvalidOption(format!(
            "session {} runs on another instance of the cluster; resume it there",
            handle.id()
        )));
    }
    Ok(())
}

fn move_to(handle: &SessionHandle, cwd: &str, fingerprint: Option<&str>) -> Result<(), RelayError> {
    if handle.shared.status().is_running() {
        return Err(RelayError::InvalidOption(format!(
            "session {} is running a turn; it can move to {cwd} once the turn ends (or is interrupted)",
            handle.id()
        )));
    }
    handle.shared.relocate(cwd, fingerprint);
    Ok(())
}
