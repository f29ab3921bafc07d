//! A session created with a worktree: the repository is what the policy judges, the worktree
//! (made first) is its working directory, and a session that did not start takes its worktree
//! with it.

use crate::config::CreateOptions;
use crate::error::RelayError;
use crate::relay::Relay;
use crate::session::{SayOutcome, SessionHandle};

use super::WorktreeSpec;

impl Relay {
    pub(crate) async fn create_with_worktree(
        &self,
        mut opts: CreateOptions,
        asked: WorktreeSpec,
    ) -> Result<(SessionHandle, Option<SayOutcome>), RelayError> {
        // The repository is what the policy's roots judge; the worktree is the relay's own.
        opts.cwd = Some(asked.repo.clone());
        self.check_policy(&opts)?;
        self.check_writable()?;
        let root = self
            .config()
            .worktree_dir
            .clone()
            .unwrap_or_else(super::default_dir);
        let made = super::make(&asked, &root).await?;
        opts.cwd = made.path.clone();
        opts.worktree = Some(made.clone());
        match self.create_in(opts, Some(asked.repo.clone())).await {
            Ok(created) => Ok(created),
            Err(e) => {
                let gone = WorktreeSpec {
                    keep: false,
                    ..made
                };
                if let Err(w) = super::close(&gone).await {
                    tracing::warn!("removing the worktree of a session that did not start: {w}");
                }
                Err(e)
            }
        }
    }
}
