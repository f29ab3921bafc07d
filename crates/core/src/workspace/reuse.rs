//! The relay side of workspaces: sessions created in an isolated copy, and the lookup from a
//! workspace fingerprint to the stored session (thread) to reuse.

use super::{Workspace, WorkspaceSpec};
use crate::error::RelayError;
use crate::relay::{CreateOptions, Relay};
use crate::session::{SayOutcome, SessionHandle, SessionStatus};

impl Relay {
    /// Copies the spec's mounts into a temporary workspace and creates a session working there
    /// (`cwd` is the copy; the options' own `cwd` is replaced). The spec is checked first: a
    /// mount outside the allowed roots or over a budget is refused with
    /// [`RelayError::Workspace`] before anything is copied and before Codex is started. Keep
    /// the returned [`Workspace`] as long as the session works in it; dropping it removes the copy.
    /// The spec is stored with the session, so [`Relay::resume_isolated`] can continue it later
    /// in a fresh copy.
    pub async fn create_isolated(
        &self,
        spec: &WorkspaceSpec,
        mut opts: CreateOptions,
    ) -> Result<((SessionHandle, Option<SayOutcome>), Workspace), RelayError> {
        let workspace = Workspace::materialize(spec)?;
        opts.cwd = Some(workspace.path().display().to_string());
        opts.workspace_fingerprint = Some(workspace.fingerprint().to_owned());
        let created = self.create(opts).await?;
        // A later resume makes a fresh copy of the same mounts (`resume_isolated`).
        created.0.shared.remember_workspace(spec);
        Ok((created, workspace))
    }

    /// The newest session of this relay (live or restored from the store) created with this
    /// workspace fingerprint (`CreateOptions::workspace_fingerprint`) and not closed: the thread
    /// to continue instead of starting a new one. `None` when there is none.
    pub fn session_for_workspace(&self, fingerprint: &str) -> Option<SessionHandle> {
        self.inner
            .handles()
            .into_iter()
            .filter(|h| h.shared.status() != SessionStatus::Closed)
            .filter(|h| {
                h.shared.meta().options.workspace_fingerprint.as_deref() == Some(fingerprint)
            })
            .max_by_key(|h| h.snapshot().created_at)
    }
}
