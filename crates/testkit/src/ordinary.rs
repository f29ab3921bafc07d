//! An ordinary (non-root) user for the tests whose claim depends on it. Root reads every
//! `/proc` entry, ignores file modes and may bypass what the relay's hardening rests on
//! (`PR_SET_DUMPABLE`, a 0600 file), so a check that a command Codex runs cannot reach
//! something proves nothing while the relay runs as root.
//!
//! Run as any other user, [`Ordinary`] is that user and changes nothing. Run as root (as CI
//! is), it is the system user `codex-relay-test`, made once with `useradd`; the relay, Codex
//! and every command Codex runs then start as that user, with copies of the executables and a
//! `CODEX_HOME` in places it can reach (the clone and root's cache may sit under a private
//! 0700 directory).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::{CodexHome, HomeOptions};

/// The user made (as root) for these tests.
pub const USER: &str = "codex-relay-test";
/// Where copies of executables and test homes live when running as root: reachable by
/// every user (`/var/tmp` is sticky and world-writable; each test's own directory is owned
/// by [`USER`]). Not `/tmp`: Codex refuses to make its helper aliases in temporary directories.
const SHARED: &str = "/var/tmp/codex-relay-test";

/// The ordinary user the tests run the relay as.
#[derive(Debug, Clone)]
pub struct Ordinary {
    pub uid: u32,
    pub gid: u32,
    pub name: String,
    /// Whether the tests run as root and switch to [`USER`] (else they are that user).
    switches: bool,
}

impl Ordinary {
    /// The user, made first if the tests run as root. `Err` says why there is none (as root
    /// without `useradd`): the caller skips loudly.
    pub fn get() -> Result<&'static Ordinary, String> {
        static USER_: OnceLock<Result<Ordinary, String>> = OnceLock::new();
        USER_.get_or_init(make).as_ref().map_err(Clone::clone)
    }

    /// Whether processes are started as another user than the tests' own.
    pub fn switches(&self) -> bool {
        self.switches
    }

    /// Sets `cmd` up to run as this user: its uid and gid (supplementary groups dropped), and
    /// `HOME` at `home` (a directory the user owns; the caller makes it).
    pub fn apply(&self, cmd: &mut tokio::process::Command, home: &Path) {
        if self.switches {
            cmd.uid(self.uid).gid(self.gid);
        }
        cmd.env("HOME", home)
            .env("USER", &self.name)
            .env("LOGNAME", &self.name);
    }

    /// The same as [`Ordinary::apply`], for a `std` command.
    pub fn apply_std(&self, cmd: &mut std::process::Command, home: &Path) {
        use std::os::unix::process::CommandExt;
        if self.switches {
            cmd.uid(self.uid).gid(self.gid);
        }
        cmd.env("HOME", home)
            .env("USER", &self.name)
            .env("LOGNAME", &self.name);
    }

    /// A path to the executable at `path` this user can run: itself when no switch happens,
    /// else a copy under a shared directory (made once per build of it).
    pub fn exe(&self, path: &Path) -> PathBuf {
        if !self.switches {
            return path.to_path_buf();
        }
        let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        use std::os::unix::fs::MetadataExt;
        let name = path.file_name().expect("an executable's file name");
        let dir = Path::new(SHARED).join("bin").join(format!(
            "{}-{}-{}",
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec()
        ));
        let copy = dir.join(name);
        copy_once(&dir, &copy, |staging| {
            std::fs::create_dir_all(staging)?;
            std::fs::copy(path, staging.join(name)).map(|_| ())
        });
        prune_older_copies(dir.parent().expect("bin"), &dir);
        copy
    }

    /// The pinned Codex `version` (installed first if needed), where this user can run it.
    pub fn codex(&self, version: &str) -> PathBuf {
        let bin = crate::codex_bin(version).expect("pinned Codex installs");
        if !self.switches {
            return bin;
        }
        // `<dir>/node_modules/.bin/codex`: copy the whole install, links kept.
        let install = bin
            .ancestors()
            .nth(3)
            .expect("an npm install's prefix")
            .to_path_buf();
        let dir = Path::new(SHARED).join("codex").join(version);
        copy_once(&dir, &dir.join("node_modules/.bin/codex"), |staging| {
            let status = std::process::Command::new("cp")
                .arg("-a")
                .arg(&install)
                .arg(staging)
                .status()?;
            if status.success() {
                Ok(())
            } else {
                Err(std::io::Error::other(format!("cp -a failed: {status}")))
            }
        });
        dir.join("node_modules/.bin/codex")
    }

    /// A fresh `CODEX_HOME` and workspace for the scripted model at `model_base_url`, owned by
    /// this user, in a place it can reach.
    pub fn home(&self, model_base_url: &str, opts: &HomeOptions) -> CodexHome {
        if !self.switches {
            return CodexHome::with_options(model_base_url, opts);
        }
        let base = Path::new(SHARED).join("homes");
        make_shared_dir(&base);
        let home = CodexHome::with_options_in(&base, model_base_url, opts);
        self.chown(home.root());
        home
    }

    /// Gives `path` and everything under it to this user (nothing when no switch happens).
    pub fn chown(&self, path: &Path) {
        if !self.switches {
            return;
        }
        let status = std::process::Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", self.uid, self.gid))
            .arg(path)
            .status()
            .expect("run chown");
        assert!(status.success(), "chown -R {}: {status}", path.display());
    }
}

fn make() -> Result<Ordinary, String> {
    // SAFETY: geteuid/getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid != 0 {
        let name = std::env::var("USER").unwrap_or_else(|_| uid.to_string());
        return Ok(Ordinary {
            uid,
            gid,
            name,
            switches: false,
        });
    }
    if lookup(USER).is_none() {
        // A system user with a real shell: Codex runs commands through the user's login shell.
        let out = std::process::Command::new("useradd")
            .args([
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/bin/bash",
                USER,
            ])
            .output()
            .map_err(|e| format!("running as root, and `useradd` could not be run: {e}"))?;
        // Another test process may have made it meanwhile.
        if !out.status.success() && lookup(USER).is_none() {
            return Err(format!(
                "running as root, and `useradd {USER}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    let (uid, gid) = lookup(USER).ok_or_else(|| format!("user {USER} not found after useradd"))?;
    make_shared_dir(Path::new(SHARED));
    Ok(Ordinary {
        uid,
        gid,
        name: USER.into(),
        switches: true,
    })
}

/// `(uid, gid)` of a user, from the passwd database.
fn lookup(name: &str) -> Option<(u32, u32)> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: getpwnam returns null or a pointer to a static record, read at once; the tests
    // call it under a OnceLock, so no other thread of ours calls it meanwhile.
    unsafe {
        let pw = libc::getpwnam(c.as_ptr());
        if pw.is_null() {
            None
        } else {
            Some(((*pw).pw_uid, (*pw).pw_gid))
        }
    }
}

/// A root-owned directory every user may traverse (0755).
fn make_shared_dir(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
}

/// Makes `dir` with `fill` once (a staging directory renamed into place; a lock keeps
/// parallel test processes from doing it twice), readable and runnable by everyone.
fn copy_once(dir: &Path, done: &Path, fill: impl FnOnce(&Path) -> std::io::Result<()>) {
    if done.exists() {
        return;
    }
    let parent = dir.parent().expect("a parent");
    make_shared_dir(parent);
    let lock_path = parent.join(".lock");
    let lock = std::fs::File::create(&lock_path).expect("lock file");
    let _guard = crate::install::FileLock::exclusive(&lock);
    if done.exists() {
        return;
    }
    let staging = parent.join(format!(".staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    fill(&staging).unwrap_or_else(|e| panic!("copying into {}: {e}", staging.display()));
    let status = std::process::Command::new("chmod")
        .arg("-R")
        .arg("a+rX")
        .arg(&staging)
        .status()
        .expect("run chmod");
    assert!(status.success(), "chmod -R a+rX: {status}");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&staging, dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
}

/// Removes copies of builds made more than a day ago (every rebuild makes a new copy; a run
/// of the suite from another checkout may still use a recent one, never a day-old one).
fn prune_older_copies(bin: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(bin) else {
        return;
    };
    let day = std::time::Duration::from_secs(24 * 3600);
    for entry in entries.flatten() {
        let path = entry.path();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > day);
        let name = entry.file_name();
        if path != keep && old && !name.to_string_lossy().starts_with('.') {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}
