//! Making an isolated workspace: check every mount (roots, paths, globs, budgets) without
//! writing anything, then copy into a fresh temporary directory that is removed on drop.

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::glob::GlobSet;
use super::{HostMount, WorkspaceError, WorkspaceSpec};

/// What one mount brought into the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MountPreview {
    pub host_path: PathBuf,
    pub mount_path: PathBuf,
    pub files: u64,
    pub bytes: u64,
    /// Symbolic links are not copied (one could point outside the allowed roots).
    pub skipped_symlinks: u64,
}

/// A temporary directory holding copies of the host mounts; removed when dropped.
#[derive(Debug)]
pub struct Workspace {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    mounts: Vec<MountPreview>,
    fingerprint: String,
}

/// One file to copy: where from, where to (relative to the workspace), how big.
struct Planned {
    from: PathBuf,
    to: PathBuf,
}

impl Workspace {
    /// Checks the spec and copies the mounts. Refusals (outside the roots, over a budget, a bad
    /// mount path or glob) come before anything is written.
    pub fn materialize(spec: &WorkspaceSpec) -> Result<Workspace, WorkspaceError> {
        let roots = canonical_roots(&spec.allowed_host_roots)?;
        let mut plans = Vec::with_capacity(spec.mounts.len());
        let mut total = 0u64;
        for mount in &spec.mounts {
            let (files, preview) = plan_mount(mount, &roots, &spec.allowed_host_roots)?;
            total += preview.bytes;
            if let Some(limit) = spec.max_bytes
                && total > limit
            {
                return Err(WorkspaceError::OverBudget {
                    scope: "the workspace".into(),
                    at_least: total,
                    limit,
                });
            }
            plans.push((files, preview));
        }

        let parent = spec.parent_dir.clone().unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("codex-relay-ws-")
            .tempdir_in(&parent)
            .map_err(WorkspaceError::io(&parent))?;
        let path = dir.path().to_path_buf();
        let mut mounts = Vec::with_capacity(plans.len());
        for (files, preview) in plans {
            for f in files {
                let to = path.join(&f.to);
                if let Some(p) = to.parent() {
                    std::fs::create_dir_all(p).map_err(WorkspaceError::io(p))?;
                }
                std::fs::copy(&f.from, &to).map_err(WorkspaceError::io(&f.from))?;
            }
            std::fs::create_dir_all(path.join(&preview.mount_path))
                .map_err(WorkspaceError::io(&preview.mount_path))?;
            mounts.push(preview);
        }
        tracing::debug!(path = %path.display(), bytes = total, "workspace materialized");
        Ok(Workspace {
            dir: Some(dir),
            path,
            mounts,
            fingerprint: spec.fingerprint(),
        })
    }

    /// The workspace root: give it to Codex as the session's `cwd`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn mounts(&self) -> &[MountPreview] {
        &self.mounts
    }

    /// [`WorkspaceSpec::fingerprint`] of the spec it was made from.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// A neutral summary for a prompt: what is mounted where, and how much.
    pub fn summary(&self) -> String {
        let mut out = String::from("Workspace contents (copies of host files):\n");
        for m in &self.mounts {
            out.push_str(&format!(
                "- {} ({} files, {} bytes)\n",
                display_mount(&m.mount_path),
                m.files,
                m.bytes
            ));
        }
        out
    }

    /// Removes the directory now, reporting failure (dropping removes it too, silently).
    pub fn cleanup(mut self) -> std::io::Result<()> {
        match self.dir.take() {
            Some(dir) => dir.close(),
            None => Ok(()),
        }
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take()
            && let Err(e) = dir.close()
        {
            tracing::warn!(path = %self.path.display(), "removing the workspace failed: {e}");
        }
    }
}

fn display_mount(p: &Path) -> String {
    if p.as_os_str().is_empty() {
        ".".into()
    } else {
        p.display().to_string()
    }
}

fn canonical_roots(roots: &[PathBuf]) -> Result<Vec<PathBuf>, WorkspaceError> {
    roots
        .iter()
        .map(|r| r.canonicalize().map_err(WorkspaceError::io(r)))
        .collect()
}

/// The mount path as a clean relative path (no `..`, not absolute); `""` for the root.
fn clean_mount_path(p: &Path) -> Result<PathBuf, WorkspaceError> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(WorkspaceError::InvalidMountPath {
                    mount_path: p.to_path_buf(),
                    why: "it must be relative to the workspace and must not use `..`".into(),
                });
            }
        }
    }
    Ok(out)
}

/// Every file of one mount that passes its globs, checked against the roots and budget.
fn plan_mount(
    mount: &HostMount,
    roots: &[PathBuf],
    given_roots: &[PathBuf],
) -> Result<(Vec<Planned>, MountPreview), WorkspaceError> {
    let mount_path = clean_mount_path(&mount.mount_path)?;
    let host = mount
        .host_path
        .canonicalize()
        .map_err(WorkspaceError::io(&mount.host_path))?;
    if !roots.iter().any(|r| host.starts_with(r)) {
        return Err(WorkspaceError::OutsideAllowedRoots {
            host_path: mount.host_path.clone(),
            roots: given_roots.to_vec(),
        });
    }
    let include = GlobSet::new(&mount.include)?;
    let exclude = GlobSet::new(&mount.exclude)?;
    let mut preview = MountPreview {
        host_path: mount.host_path.clone(),
        mount_path: mount_path.clone(),
        files: 0,
        bytes: 0,
        skipped_symlinks: 0,
    };
    let mut files = Vec::new();
    let mut add = |from: PathBuf, rel: String, len: u64, preview: &mut MountPreview| {
        preview.files += 1;
        preview.bytes += len;
        if let Some(limit) = mount.max_bytes
            && preview.bytes > limit
        {
            return Err(WorkspaceError::OverBudget {
                scope: format!("mount {}", mount.host_path.display()),
                at_least: preview.bytes,
                limit,
            });
        }
        files.push(Planned {
            from,
            to: mount_path.join(rel),
        });
        Ok(())
    };
    let meta = std::fs::metadata(&host).map_err(WorkspaceError::io(&host))?;
    if meta.is_file() {
        // A single file: mounted under its own name inside `mount_path`.
        let name = host
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        add(host.clone(), name, meta.len(), &mut preview)?;
        return Ok((files, preview));
    }
    // Depth-first, sorted, so plans (and budget errors) are deterministic.
    let mut stack = vec![(host.clone(), String::new())];
    while let Some((dir, rel_dir)) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .map_err(WorkspaceError::io(&dir))?
            .collect::<Result<_, _>>()
            .map_err(WorkspaceError::io(&dir))?;
        entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if rel_dir.is_empty() {
                name
            } else {
                format!("{rel_dir}/{name}")
            };
            if exclude.matches(&rel) {
                continue;
            }
            let kind = entry
                .file_type()
                .map_err(WorkspaceError::io(&entry.path()))?;
            if kind.is_symlink() {
                preview.skipped_symlinks += 1;
            } else if kind.is_dir() {
                stack.push((entry.path(), rel));
            } else if kind.is_file() && (include.is_empty() || include.matches(&rel)) {
                let len = entry
                    .metadata()
                    .map_err(WorkspaceError::io(&entry.path()))?
                    .len();
                add(entry.path(), rel, len, &mut preview)?;
            }
        }
    }
    Ok((files, preview))
}
