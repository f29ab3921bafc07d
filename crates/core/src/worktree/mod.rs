//! A git worktree per session (opt-in at create): made from a base branch under the relay's
//! own worktree directory and used as the session's working directory; its diff against the
//! base; exported as a branch (committed, optionally pushed to another repository) or a patch;
//! merged back into the base branch on request; removed when the session closes unless kept
//! (its uncommitted work committed to its branch first, so nothing is lost).

mod git;
mod ops;
mod session;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::config::WorktreeSpec;
use crate::error::RelayError;
pub use git::{check_destination, check_name};
use git::{git, git_ok};

/// The diff of a session's worktree against the commit it started from: committed and
/// uncommitted changes, new files included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeDiff {
    pub branch: String,
    pub base: String,
    pub base_commit: String,
    pub path: String,
    /// `{path, status}`: `A` added, `M` modified, `D` deleted, `R…` renamed.
    pub files: Vec<ChangedFile>,
    /// The unified diff (`git diff`), at most [`MAX_PATCH`] bytes.
    pub patch: String,
    /// The patch was cut at [`MAX_PATCH`] bytes.
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedFile {
    pub path: String,
    pub status: String,
}

/// The largest patch a diff carries (an export as a patch is never cut).
pub const MAX_PATCH: usize = 4 << 20;

/// How to export a worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "as", rename_all = "camelCase")]
pub enum ExportAs {
    /// Commit its changes to its branch (which lives in the source repository); with `to`,
    /// also push the branch there, as `name` (default: the branch's own name).
    #[serde(rename_all = "camelCase")]
    Branch {
        #[serde(default)]
        to: Option<String>,
        #[serde(default)]
        name: Option<String>,
    },
    /// Its changes against the base as one patch (`git apply` takes it; binary files too).
    Patch,
}

/// What an export did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exported {
    pub branch: String,
    /// The branch's commit (after committing pending work), for a branch export.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
}

/// What a merge did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Merged {
    pub branch: String,
    pub into: String,
    /// The commit `into` points to now.
    pub commit: String,
    /// `fast-forward` or `merge`.
    pub how: String,
}

/// The relay's worktree directory: the configured one, else `$XDG_STATE_HOME/codex-relay/
/// worktrees` (or `~/.local/state/...`), else under the temporary directory.
pub fn default_dir() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")));
    match state {
        Some(dir) => dir.join("codex-relay").join("worktrees"),
        None => std::env::temp_dir().join("codex-relay-worktrees"),
    }
}

fn made<'a>(spec: &'a WorktreeSpec, what: &str) -> Result<&'a str, RelayError> {
    let v = match what {
        "path" => spec.path.as_deref(),
        "baseCommit" => spec.base_commit.as_deref(),
        _ => spec.repo_root.as_deref(),
    };
    v.ok_or_else(|| RelayError::Worktree(format!("the session's worktree has no {what} yet")))
}

/// Makes the worktree `spec` asks for under `root`; the spec with what was made filled in.
pub(crate) async fn make(spec: &WorktreeSpec, root: &Path) -> Result<WorktreeSpec, RelayError> {
    let repo = Path::new(&spec.repo);
    if !repo.is_absolute() || !repo.is_dir() {
        return Err(RelayError::Worktree(format!(
            "repo {:?} is not an absolute path to a directory",
            spec.repo
        )));
    }
    let top = git(repo, &["rev-parse", "--show-toplevel"])
        .await
        .map_err(|_| RelayError::Worktree(format!("{} is not in a git repository", spec.repo)))?;
    let top = PathBuf::from(top.trim());
    let base = match &spec.base {
        Some(b) => b.clone(),
        None => git(&top, &["symbolic-ref", "--short", "-q", "HEAD"])
            .await
            .map(|b| b.trim().to_owned())
            .map_err(|_| {
                RelayError::Worktree(
                    "the repository is on no branch (detached HEAD): give a base".into(),
                )
            })?,
    };
    check_name("base", &base)?;
    let at = format!("{base}^{{commit}}");
    let base_commit = git(
        &top,
        &["rev-parse", "--verify", "--quiet", "--end-of-options", &at],
    )
    .await
    .map_err(|_| RelayError::Worktree(format!("base {base:?} is no commit of {}", top.display())))?
    .trim()
    .to_owned();
    let branch = match &spec.branch {
        Some(b) => b.clone(),
        None => format!("codex/{}", crate::ids::random_id("wt").to_ascii_lowercase()),
    };
    check_name("branch", &branch)?;
    git(&top, &["check-ref-format", "--branch", &branch]).await?;
    let full = format!("refs/heads/{branch}");
    if git_ok(&top, &["rev-parse", "--verify", "--quiet", &full]).await {
        return Err(RelayError::Worktree(format!(
            "branch {branch:?} exists already in {}; name another",
            top.display()
        )));
    }
    make_dir(root)?;
    let path = root.join(crate::ids::random_id("wt"));
    let path_text = path.display().to_string();
    git(
        &top,
        &[
            "worktree",
            "add",
            "--quiet",
            "-b",
            &branch,
            "--",
            &path_text,
            &base_commit,
        ],
    )
    .await?;
    Ok(WorktreeSpec {
        repo: spec.repo.clone(),
        base: Some(base),
        branch: Some(branch),
        keep: spec.keep,
        repo_root: Some(top.display().to_string()),
        path: Some(path_text),
        base_commit: Some(base_commit),
    })
}

/// The relay's worktree directory, made private to its user.
fn make_dir(root: &Path) -> Result<(), RelayError> {
    std::fs::create_dir_all(root)
        .map_err(|e| RelayError::Worktree(format!("cannot make {}: {e}", root.display())))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

/// On close: commits what the session left uncommitted to its branch, removes the worktree
/// (unless kept) and drops the branch when it holds nothing beyond the base.
pub(crate) async fn close(spec: &WorktreeSpec) -> Result<(), RelayError> {
    if spec.keep {
        return Ok(());
    }
    let (Some(path), Some(top)) = (spec.path.as_deref(), spec.repo_root.as_deref()) else {
        return Ok(());
    };
    let (path, top) = (Path::new(path), Path::new(top));
    if path.is_dir() {
        ops::commit_all(
            &git::Tree::of(top, path).await?,
            "codex-relay: the session's uncommitted work, at close",
        )
        .await?;
        git(
            top,
            &[
                "worktree",
                "remove",
                "--force",
                "--",
                &path.display().to_string(),
            ],
        )
        .await?;
    } else {
        git(top, &["worktree", "prune"]).await?;
    }
    if let (Some(branch), Some(base)) = (spec.branch.as_deref(), spec.base_commit.as_deref()) {
        let range = format!("{base}..refs/heads/{branch}");
        let ahead = git(top, &["rev-list", "--count", &range]).await?;
        if ahead.trim() == "0" {
            git(top, &["update-ref", "-d", &format!("refs/heads/{branch}")]).await?;
        }
    }
    Ok(())
}
