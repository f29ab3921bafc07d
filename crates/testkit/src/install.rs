//! Installs the pinned real Codex binaries from the npm registry into a cache directory.
//!
//! Idempotent and safe to call from parallel tests (a lock file serializes installs). Override
//! for local runs: `CODEX_BIN_0_98_0=/path/to/codex` for one version, or `CODEX_BIN` for the
//! newest pinned one.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Every version the suite runs against, newest first.
pub const PINNED_VERSIONS: &[&str] = &[NEWEST, PREVIOUS, OLDEST];
/// The main tested version: every scenario runs on it.
pub const NEWEST: &str = "0.171.0";
/// The release before [`NEWEST`], kept where it is cheap (the `codex` crate's protocol tests,
/// the schema gate and the daemon-attach scenario), so a regression between the two shows.
pub const PREVIOUS: &str = "0.169.0";
/// The version the reference designs were validated against: the floor, run by every
/// scenario beside [`NEWEST`].
pub const OLDEST: &str = "0.98.0";

/// The npm registry's `dist.integrity` of `@openai/codex@<version>` (`npm view
/// @openai/codex@<version> dist.integrity`), checked against what npm installed, so a
/// republished or tampered package is refused rather than tested against.
const INTEGRITY: &[(&str, &str)] = &[
    (
        "0.171.0",
        "sha512-1IOFzL2Xg86tLdw6kDo3GoKbkQENgQi7TI6rlEvN132R7ngSw7SNOIQoTcnKzSZZ8kf9N9GynCweSoaFbqk2Eg==",
    ),
    (
        "0.169.0",
        "sha512-KhzYlkKPxoNssR8CEm45IjqnFWn7UtlF4CiD3tOJPea51xBs7MaHy0UQG9GSbCqk6Lrjn5QdJDV0QD1/FgWlGw==",
    ),
    (
        "0.98.0",
        "sha512-CKjrhAmzTvWn7Vbsi27iZRKBAJw9a7ZTTkWQDbLgQZP1weGbDIBk1r6wiLEp1ZmDO7w0fHPLYgnVspiOrYgcxg==",
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("could not prepare the cache directory {dir}: {source}")]
    Cache {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("`npm` could not be run ({0}); install Node.js and npm, or set CODEX_BIN")]
    NoNpm(std::io::Error),
    #[error("`npm install @openai/codex@{version}` failed: {output}")]
    Npm { version: String, output: String },
    #[error("{what} failed: {output}")]
    Tool { what: String, output: String },
    #[error(
        "the installed @openai/codex@{version} is not the package pinned here: npm recorded {found:?}, the pin is {pinned}"
    )]
    Integrity {
        version: String,
        found: Option<String>,
        pinned: String,
    },
    #[error("{path} does not report version {version} (it says: {said})")]
    WrongVersion {
        path: PathBuf,
        version: String,
        said: String,
    },
}

/// Where installs live: `$CODEX_RELAY_CACHE`, else `$XDG_CACHE_HOME/codex-relay`, else
/// `~/.cache/codex-relay`.
pub fn cache_root() -> PathBuf {
    if let Some(p) = std::env::var_os("CODEX_RELAY_CACHE") {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(p).join("codex-relay");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("codex-relay")
}

fn override_var(version: &str) -> String {
    format!("CODEX_BIN_{}", version.replace(['.', '-'], "_"))
}

/// The `codex` executable of a pinned version, installing it first if needed.
pub fn codex_bin(version: &str) -> Result<PathBuf, InstallError> {
    if let Some(p) = std::env::var_os(override_var(version)) {
        return Ok(PathBuf::from(p));
    }
    if version == NEWEST
        && let Some(p) = std::env::var_os("CODEX_BIN")
    {
        return Ok(PathBuf::from(p));
    }
    let dir = cache_root().join("codex").join(version);
    let bin = dir.join("node_modules").join(".bin").join("codex");
    if reports_version(&bin, version) {
        return Ok(bin);
    }
    let parent = dir
        .parent()
        .expect("version dir has a parent")
        .to_path_buf();
    fs::create_dir_all(&parent).map_err(|source| InstallError::Cache {
        dir: parent.clone(),
        source,
    })?;
    let lock_path = parent.join(format!("{version}.lock"));
    let lock = File::create(&lock_path).map_err(|source| InstallError::Cache {
        dir: lock_path.clone(),
        source,
    })?;
    let _guard = FileLock::exclusive(&lock);
    if reports_version(&bin, version) {
        return Ok(bin);
    }
    let staging = parent.join(format!("{version}.staging-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging).map_err(|source| InstallError::Cache {
        dir: staging.clone(),
        source,
    })?;
    eprintln!(
        "installing @openai/codex@{version} into {} ...",
        dir.display()
    );
    let out = npm_install(&staging, &format!("@openai/codex@{version}"))
        .stdin(Stdio::null())
        .output()
        .map_err(InstallError::NoNpm)?;
    if !out.status.success() {
        let _ = fs::remove_dir_all(&staging);
        return Err(InstallError::Npm {
            version: version.into(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    if let Err(e) = check_integrity(&staging, version) {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&staging, &dir).map_err(|source| InstallError::Cache {
        dir: dir.clone(),
        source,
    })?;
    if !reports_version(&bin, version) {
        return Err(InstallError::WrongVersion {
            path: bin.clone(),
            version: version.into(),
            said: version_output(&bin),
        });
    }
    Ok(bin)
}

/// Checks npm's record of what it installed into `prefix` against the pinned integrity of
/// `@openai/codex@<version>` (npm itself checked the tarball against that record). A version
/// with no pin passes: the pins cover the versions the suite runs against.
fn check_integrity(prefix: &Path, version: &str) -> Result<(), InstallError> {
    let Some((_, pinned)) = INTEGRITY.iter().find(|(v, _)| *v == version) else {
        return Ok(());
    };
    let lock = prefix.join("node_modules").join(".package-lock.json");
    let found = fs::read_to_string(&lock)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|v| {
            v["packages"]["node_modules/@openai/codex"]["integrity"]
                .as_str()
                .map(str::to_owned)
        });
    if found.as_deref() == Some(*pinned) {
        Ok(())
    } else {
        Err(InstallError::Integrity {
            version: version.into(),
            found,
            pinned: (*pinned).into(),
        })
    }
}

/// `npm install <spec>` into the `prefix` directory, quietly.
pub(crate) fn npm_install(prefix: &Path, spec: &str) -> Command {
    let mut cmd = Command::new("npm");
    cmd.args([
        "install",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        "--prefix",
    ])
    .arg(prefix)
    .arg(spec);
    cmd
}

fn version_output(bin: &Path) -> String {
    Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn reports_version(bin: &Path, version: &str) -> bool {
    bin.exists() && version_output(bin).split_whitespace().any(|w| w == version)
}

/// `flock(2)` held for the guard's lifetime.
pub(crate) struct FileLock<'a>(&'a File);

impl<'a> FileLock<'a> {
    pub(crate) fn exclusive(file: &'a File) -> Self {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a valid open descriptor.
        unsafe {
            libc::flock(file.as_raw_fd(), libc::LOCK_EX);
        }
        FileLock(file)
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: as above.
        unsafe {
            libc::flock(self.0.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_pinned_version_has_an_integrity_pin() {
        for version in super::PINNED_VERSIONS {
            assert!(
                super::INTEGRITY.iter().any(|(v, _)| v == version),
                "{version} is pinned without the registry's integrity"
            );
        }
    }
}
