//! `codex-relay run`'s isolation flags (`--mount HOST[:PATH]`, `--allow-root`, `--include`, `--exclude`, `--max-bytes`) and the workspace spec they make.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use codex_relay::workspace::{HostMount, WorkspaceSpec};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct WorkspaceArgs {
    /// Work in an isolated copy: HOST (a file or directory) is copied into a temporary
    /// workspace at PATH inside it (default: HOST's own name); repeatable. Codex works in the
    /// copy, the host is never written, and the copy is removed when the run ends. With
    /// --resume, the session continues in a fresh copy.
    #[arg(long, value_name = "HOST[:PATH]")]
    mount: Vec<String>,
    /// A host directory mounts may come from (repeatable; default: --cwd, else the current
    /// directory). A mount outside every allowed root is refused before Codex starts.
    #[arg(long, value_name = "DIR", requires = "mount")]
    allow_root: Vec<PathBuf>,
    /// Copy only files matching GLOB (repeatable, every mount): `*.rs`, `src/**`.
    #[arg(long, value_name = "GLOB", requires = "mount")]
    include: Vec<String>,
    /// Leave out files and directories matching GLOB (repeatable, every mount): `target`.
    #[arg(long, value_name = "GLOB", requires = "mount")]
    exclude: Vec<String>,
    /// The most bytes the copy may hold, all mounts together; more is refused before Codex
    /// starts.
    #[arg(long, value_name = "BYTES", requires = "mount")]
    max_bytes: Option<u64>,
}

impl WorkspaceArgs {
    /// The spec, when `--mount` was given; relative host paths and roots are taken from `base`.
    pub fn spec(&self, base: &Path) -> anyhow::Result<Option<WorkspaceSpec>> {
        if self.mount.is_empty() {
            return Ok(None);
        }
        let roots = if self.allow_root.is_empty() {
            vec![base.to_path_buf()]
        } else {
            self.allow_root.iter().map(|r| base.join(r)).collect()
        };
        let mut spec = WorkspaceSpec::new(roots);
        for m in &self.mount {
            let (host, at) = match m.split_once(':') {
                Some((host, at)) => (host, Some(at)),
                None => (m.as_str(), None),
            };
            if host.is_empty() {
                bail!("--mount {m:?}: the host path is empty");
            }
            let host = base.join(host);
            let host = host
                .canonicalize()
                .with_context(|| format!("--mount {}", host.display()))?;
            let at = match at {
                Some(at) => PathBuf::from(at),
                None => PathBuf::from(host.file_name().unwrap_or_default()),
            };
            spec = spec.mount(
                HostMount::new(host, at)
                    .include(self.include.iter().cloned())
                    .exclude(self.exclude.iter().cloned()),
            );
        }
        if let Some(n) = self.max_bytes {
            spec = spec.max_bytes(n);
        }
        Ok(Some(spec))
    }
}
