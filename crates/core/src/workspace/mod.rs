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

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub use crate::config::{HostMount, WorkspaceSpec};
pub use crate::error::WorkspaceError;
pub use copy::{MountPreview, Workspace};

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
