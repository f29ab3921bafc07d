//! What the fronts do with a session's worktree: read its diff, export it as a branch or a
//! patch, merge it back into its base branch.

use std::path::Path;

use super::git::{Tree, git, git_ok};
use super::{
    ChangedFile, ExportAs, Exported, MAX_PATCH, Merged, WorktreeDiff, WorktreeSpec,
    check_destination, check_name, made,
};
use crate::error::RelayError;
use crate::relay::Relay;

const DIFF: &[&str] = &["diff", "--no-ext-diff", "--no-textconv", "--no-color"];

/// Commits everything in the worktree (new files too) to its branch; `None` when there was
/// nothing to commit. The identity is the user's git identity, else `codex-relay`.
pub(crate) async fn commit_all(tree: &Tree, message: &str) -> Result<Option<String>, RelayError> {
    tree.git(&["add", "--all"]).await?;
    if tree
        .git(&["status", "--porcelain"])
        .await?
        .trim()
        .is_empty()
    {
        return Ok(None);
    }
    let mut args: Vec<&str> = tree.identity().await;
    args.extend(["commit", "--quiet", "--no-verify", "-m", message]);
    if let Err(e) = tree.git(&args).await {
        // Another git in the worktree (Codex's own) may have committed or reset meanwhile:
        // nothing left to commit is no failure.
        if !tree
            .git(&["status", "--porcelain"])
            .await?
            .trim()
            .is_empty()
        {
            return Err(e);
        }
        return Ok(None);
    }
    Ok(Some(
        tree.git(&["rev-parse", "HEAD"]).await?.trim().to_owned(),
    ))
}

/// Marks new files as intended, so a diff against the base shows them (the index is the
/// worktree's own).
async fn intend_new(tree: &Tree) -> Result<(), RelayError> {
    tree.git(&["add", "--intent-to-add", "--all"])
        .await
        .map(drop)
}

impl Relay {
    /// The session's worktree as it made it (its spec with path, branch and base commit).
    pub fn worktree(&self, id: &str) -> Result<WorktreeSpec, RelayError> {
        let snap = self.status(id)?;
        snap.worktree.ok_or_else(|| {
            RelayError::Worktree(format!(
                "session {id} has no worktree (ask for one at create)"
            ))
        })
    }

    /// The worktree's changes against the commit it started from.
    pub async fn worktree_diff(&self, id: &str) -> Result<WorktreeDiff, RelayError> {
        let spec = self.worktree(id)?;
        let path = Path::new(made(&spec, "path")?);
        let tree = Tree::of(Path::new(made(&spec, "repoRoot")?), path).await?;
        let base = made(&spec, "baseCommit")?;
        intend_new(&tree).await?;
        let mut names: Vec<&str> = DIFF.to_vec();
        names.extend(["--name-status", "-z", base, "--"]);
        let listed = tree.git(&names).await?;
        let mut files = Vec::new();
        let mut parts = listed.split('\0').filter(|p| !p.is_empty());
        while let Some(status) = parts.next() {
            // A rename or copy names two paths; the new one is shown.
            let path = if status.starts_with(['R', 'C']) {
                parts.next();
                parts.next()
            } else {
                parts.next()
            };
            if let Some(p) = path {
                files.push(ChangedFile {
                    path: p.to_owned(),
                    status: status.to_owned(),
                });
            }
        }
        let mut args: Vec<&str> = DIFF.to_vec();
        args.extend([base, "--"]);
        let mut patch = tree.git(&args).await?;
        let truncated = patch.len() > MAX_PATCH;
        if truncated {
            let mut cut = MAX_PATCH;
            while !patch.is_char_boundary(cut) {
                cut -= 1;
            }
            patch.truncate(cut);
        }
        Ok(WorktreeDiff {
            branch: spec.branch.clone().unwrap_or_default(),
            base: spec.base.clone().unwrap_or_default(),
            base_commit: base.to_owned(),
            path: path.display().to_string(),
            files,
            patch,
            truncated,
        })
    }

    /// Exports the worktree: as its branch (committed; pushed to `to` when given) or a patch.
    pub async fn export_worktree(&self, id: &str, how: ExportAs) -> Result<Exported, RelayError> {
        let spec = self.worktree(id)?;
        let path = Path::new(made(&spec, "path")?);
        let tree = Tree::of(Path::new(made(&spec, "repoRoot")?), path).await?;
        let branch = spec.branch.clone().unwrap_or_default();
        match how {
            ExportAs::Patch => {
                intend_new(&tree).await?;
                let mut args: Vec<&str> = DIFF.to_vec();
                args.extend(["--binary", made(&spec, "baseCommit")?, "--"]);
                let patch = tree.git(&args).await?;
                Ok(Exported {
                    branch,
                    commit: None,
                    to: None,
                    patch: Some(patch),
                })
            }
            ExportAs::Branch { to, name } => {
                commit_all(&tree, &format!("codex-relay: session {id}")).await?;
                let commit = tree.git(&["rev-parse", "HEAD"]).await?.trim().to_owned();
                if let Some(to) = &to {
                    check_destination(to)?;
                    let name = name.clone().unwrap_or_else(|| branch.clone());
                    check_name("name", &name)?;
                    let refspec = format!("refs/heads/{branch}:refs/heads/{name}");
                    tree.git(&["push", "--quiet", "--no-verify", "--", to, &refspec])
                        .await?;
                }
                Ok(Exported {
                    branch,
                    commit: Some(commit),
                    to,
                    patch: None,
                })
            }
        }
    }

    /// Merges the worktree's branch (its pending work committed first) into `into` (default:
    /// the base it started from). Where `into` is checked out, that checkout must be clean and
    /// the merge is a real one (aborted on a conflict); elsewhere only a fast-forward is made.
    pub async fn merge_worktree(
        &self,
        id: &str,
        into: Option<String>,
    ) -> Result<Merged, RelayError> {
        let spec = self.worktree(id)?;
        let path = Path::new(made(&spec, "path")?);
        let top = Path::new(made(&spec, "repoRoot")?);
        let tree = Tree::of(top, path).await?;
        let branch = spec.branch.clone().unwrap_or_default();
        let into = into.or(spec.base.clone()).unwrap_or_default();
        check_name("into", &into)?;
        let target = format!("refs/heads/{into}");
        if !git_ok(top, &["show-ref", "--verify", "--quiet", &target]).await {
            return Err(RelayError::Worktree(format!(
                "{into:?} is no branch of {}",
                top.display()
            )));
        }
        commit_all(&tree, &format!("codex-relay: session {id}")).await?;
        let head = tree.git(&["rev-parse", "HEAD"]).await?.trim().to_owned();
        match checked_out_at(top, &target).await? {
            Some(at) => {
                let at = Tree::of(top, Path::new(&at)).await?;
                if !at.git(&["status", "--porcelain"]).await?.trim().is_empty() {
                    return Err(RelayError::Worktree(format!(
                        "{into} is checked out at {} with uncommitted changes; commit or stash them first",
                        at.path.display()
                    )));
                }
                let ff = at
                    .git_ok(&["merge-base", "--is-ancestor", &target, &head])
                    .await;
                let mut args: Vec<&str> = at.identity().await;
                args.extend(["merge", "--quiet", "--no-edit", "--no-verify", &head]);
                if let Err(e) = at.git(&args).await {
                    let _ = at.git(&["merge", "--abort"]).await;
                    return Err(RelayError::Worktree(format!(
                        "merging {branch} into {into} failed and was undone: {e}"
                    )));
                }
                let commit = at.git(&["rev-parse", "HEAD"]).await?.trim().to_owned();
                Ok(Merged {
                    branch,
                    into,
                    commit,
                    how: if ff { "fast-forward" } else { "merge" }.into(),
                })
            }
            None => {
                if !git_ok(top, &["merge-base", "--is-ancestor", &target, &head]).await {
                    return Err(RelayError::Worktree(format!(
                        "{into} moved on since the worktree started, and it is checked out nowhere: merge {branch} by hand"
                    )));
                }
                let old = git(top, &["rev-parse", &target]).await?.trim().to_owned();
                git(top, &["update-ref", &target, &head, &old]).await?;
                Ok(Merged {
                    branch,
                    into,
                    commit: head,
                    how: "fast-forward".into(),
                })
            }
        }
    }
}

/// The worktree (of the repository at `top`) where `target` is checked out, if any.
async fn checked_out_at(top: &Path, target: &str) -> Result<Option<String>, RelayError> {
    let list = git(top, &["worktree", "list", "--porcelain"]).await?;
    let mut at: Option<&str> = None;
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            at = Some(p);
        } else if line.strip_prefix("branch ") == Some(target) {
            return Ok(at.map(str::to_owned));
        }
    }
    Ok(None)
}
