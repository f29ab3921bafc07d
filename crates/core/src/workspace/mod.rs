//! Workspaces: a fingerprint of cwd + mounts + settings that keys thread reuse, and isolation —
//! host directories copied into a temporary workspace (include/exclude globs, byte budgets,
//! allowed host roots), refused before Codex starts, removed when dropped.
//!
//! ```no_run
//! # async fn demo(relay: codex_relay_core::Relay) -> Result<(), codex_relay_core::RelayError> {
//! use codex_relay_core::workspace::{HostMount, WorkspaceSpec};
//! use codex_relay_core::CreateOptions;
//!
//! let spec = WorkspaceSpec::new(["/home/me/projects"])
//!     .mount(HostMount::new("/home/me/projects/app", "app").exclude(["target", ".git"]))
//!     .max_bytes(50 << 20);
//! // Over budget or outside the roots: a typed error, and Codex is not started.
//! let (session, workspace) = relay
//!     .create_isolated(&spec, CreateOptions { prompt: Some("run the tests".into()), ..Default::default() })
//!     .await?;
//! println!("Codex works in {}", workspace.path().display());
//! drop(workspace); // the copy is removed; the host was never written
//! # let _ = session; Ok(()) }
//! ```

mod copy;
pub mod glob;
mod resume;
mod reuse;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub use copy::{MountPreview, Workspace};

/// One host path copied into the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostMount {
    /// A file or directory on the host; must lie under one of the allowed host roots.
    pub host_path: PathBuf,
    /// Where it goes, relative to the workspace root (`""` or `"."` for the root itself).
    pub mount_path: PathBuf,
    /// Files to copy (see [`glob`]); empty copies every file.
    #[serde(default)]
    pub include: Vec<String>,
    /// Files and directories to leave out; an excluded directory is not even walked.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Bytes this mount may copy.
    #[serde(default)]
    pub max_bytes: Option<u64>,
}

impl HostMount {
    pub fn new(host_path: impl Into<PathBuf>, mount_path: impl Into<PathBuf>) -> Self {
        Self {
            host_path: host_path.into(),
            mount_path: mount_path.into(),
            include: Vec::new(),
            exclude: Vec::new(),
            max_bytes: None,
        }
    }

    pub fn include<S: Into<String>>(mut self, globs: impl IntoIterator<Item = S>) -> Self {
        self.include.extend(globs.into_iter().map(Into::into));
        self
    }

    pub fn exclude<S: Into<String>>(mut self, globs: impl IntoIterator<Item = S>) -> Self {
        self.exclude.extend(globs.into_iter().map(Into::into));
        self
    }

    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = Some(bytes);
        self
    }
}

/// What an isolated workspace holds and the limits it must respect.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSpec {
    pub mounts: Vec<HostMount>,
    /// Host directories mounts may come from. Empty refuses every mount (fail closed).
    pub allowed_host_roots: Vec<PathBuf>,
    /// Bytes all mounts together may copy.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Where the temporary workspace is created (default: the system temp directory).
    #[serde(default)]
    pub parent_dir: Option<PathBuf>,
    /// Anything else that should make a different thread: model, sandbox, instructions, ...
    #[serde(default)]
    pub settings: Value,
}

impl WorkspaceSpec {
    pub fn new<P: Into<PathBuf>>(allowed_host_roots: impl IntoIterator<Item = P>) -> Self {
        Self {
            allowed_host_roots: allowed_host_roots.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    pub fn mount(mut self, mount: HostMount) -> Self {
        self.mounts.push(mount);
        self
    }

    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = Some(bytes);
        self
    }

    pub fn settings(mut self, settings: Value) -> Self {
        self.settings = settings;
        self
    }

    /// The fingerprint of this spec's isolated workspaces: mounts, budgets and settings (not
    /// the temporary directory, which differs on every run).
    pub fn fingerprint(&self) -> String {
        fingerprint(
            None,
            &self.mounts,
            &json!({"maxBytes": self.max_bytes, "settings": self.settings}),
        )
    }
}

/// A stable SHA-256 (hex) of the working directory, the mounts and the settings: equal inputs
/// give equal fingerprints across runs and versions (object keys are sorted, mounts are taken
/// in order, host paths as given). File contents are not part of it: a thread is reused while
/// the files it works on change.
pub fn fingerprint(cwd: Option<&Path>, mounts: &[HostMount], settings: &Value) -> String {
    let doc = json!({
        "v": 1,
        "cwd": cwd.map(|p| p.display().to_string()),
        "mounts": mounts,
        "settings": settings,
    });
    let mut hasher = Sha256::new();
    hasher.update(canonical(&doc).as_bytes());
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// JSON text with object keys sorted at every level.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let body: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&map[*k])))
                .collect();
            format!("{{{}}}", body.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// Why a workspace was refused or could not be made. Every refusal happens before anything is
/// copied and before Codex starts.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error(
        "{host_path} is outside the allowed host roots ({}); add its directory to allowed_host_roots",
        roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    OutsideAllowedRoots {
        host_path: PathBuf,
        roots: Vec<PathBuf>,
    },
    #[error(
        "{scope} would copy at least {at_least} bytes, over its budget of {limit} bytes; exclude more or raise max_bytes"
    )]
    OverBudget {
        /// `mount <host path>` or `the workspace`.
        scope: String,
        at_least: u64,
        limit: u64,
    },
    #[error("mount path {mount_path:?} is not usable: {why}")]
    InvalidMountPath { mount_path: PathBuf, why: String },
    #[error("glob {pattern:?} is not valid: {why}")]
    InvalidGlob { pattern: String, why: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl WorkspaceError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| WorkspaceError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_is_stable_and_sees_every_input() {
        let mounts = vec![HostMount::new("/src/app", "app").exclude(["target"])];
        let a = fingerprint(
            Some(Path::new("/w")),
            &mounts,
            &json!({"model": "m", "sandbox": "x"}),
        );
        // Key order does not matter; this value is pinned so that it stays stable across runs.
        let b = fingerprint(
            Some(Path::new("/w")),
            &mounts,
            &json!({"sandbox": "x", "model": "m"}),
        );
        assert_eq!(a, b);
        assert_eq!(
            a,
            "7af17ea6f880c81bace528e5675bac1c841752be689a11d51776c184e5170d6b"
        );
        let other_cwd = fingerprint(
            Some(Path::new("/v")),
            &mounts,
            &json!({"model": "m", "sandbox": "x"}),
        );
        let other_model = fingerprint(
            Some(Path::new("/w")),
            &mounts,
            &json!({"model": "n", "sandbox": "x"}),
        );
        let other_mount = fingerprint(
            Some(Path::new("/w")),
            &[HostMount::new("/src/app", "app")],
            &json!({"model": "m", "sandbox": "x"}),
        );
        let all = [&a, &other_cwd, &other_model, &other_mount];
        for (i, x) in all.iter().enumerate() {
            for y in &all[i + 1..] {
                assert_ne!(x, y);
            }
        }
        let spec = WorkspaceSpec::new(["/src"]).mount(mounts[0].clone());
        assert_eq!(spec.fingerprint(), spec.clone().fingerprint());
        assert_ne!(spec.fingerprint(), spec.clone().max_bytes(10).fingerprint());
    }
}
