//! Running git for worktrees: always with arguments (never a shell), with hooks, fsmonitor,
//! the `ext`/`fd` transports and terminal prompts off (diffs add `--no-ext-diff
//! --no-textconv`), and names checked before they reach it.

use std::path::Path;

use crate::error::RelayError;

/// The options every git call of the relay runs with: nothing the repository (or what Codex
/// wrote into the worktree) configures runs a program of its choosing.
const SAFE: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "protocol.fd.allow=never",
];

/// Runs `git -C dir args...`; its stdout, or an error with its stderr. A lock another git
/// holds (Codex runs git in its working directory too) is waited for, with backoff, a few
/// times.
pub(crate) async fn git(dir: &Path, args: &[&str]) -> Result<String, RelayError> {
    let mut pause = std::time::Duration::from_millis(50);
    for _ in 0..6 {
        match git_once(dir, args).await {
            Err(Locked) => {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            Ok(done) => return done,
        }
    }
    match git_once(dir, args).await {
        Ok(done) => done,
        Err(Locked) => Err(RelayError::Worktree(format!(
            "git {} in {}: another git holds its lock",
            args.first().copied().unwrap_or_default(),
            dir.display()
        ))),
    }
}

/// Another git process holds a lock file the call needs.
struct Locked;

async fn git_once(dir: &Path, args: &[&str]) -> Result<Result<String, RelayError>, Locked> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.args(SAFE)
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // Spawned as the relay's own child: the binary's reaper stops children it does not know
    // (what a dead Codex leaves behind), and would take git for one.
    let out = match codex_relay_codex::platform::reaper::spawn_owned(|| cmd.spawn(), |c| c.id()) {
        Ok(child) => child.wait_with_output().await,
        Err(e) => Err(e),
    };
    let out = match out {
        Ok(out) => out,
        Err(e) => return Ok(Err(RelayError::Worktree(format!("git could not run: {e}")))),
    };
    if out.status.success() {
        return Ok(Ok(String::from_utf8_lossy(&out.stdout).into_owned()));
    }
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains(".lock': File exists") || err.contains("cannot lock ref") {
        return Err(Locked);
    }
    let first = args.iter().take(2).copied().collect::<Vec<_>>().join(" ");
    Ok(Err(RelayError::Worktree(format!(
        "git {first} failed in {}: {}",
        dir.display(),
        err.trim()
    ))))
}

/// Whether `git args...` succeeds (for yes/no questions such as `merge-base --is-ancestor`).
pub(crate) async fn git_ok(dir: &Path, args: &[&str]) -> bool {
    git(dir, args).await.is_ok()
}

/// The arguments a commit or merge in `dir` starts with: an author for the relay when the
/// repository's config names none (git refuses to commit without one).
pub(crate) async fn identity(dir: &Path) -> Vec<&'static str> {
    if git_ok(dir, &["config", "user.email"]).await {
        return Vec::new();
    }
    vec![
        "-c",
        "user.name=codex-relay",
        "-c",
        "user.email=codex-relay@localhost",
    ]
}

/// A branch or ref name the relay passes to git: ASCII letters, digits and `._/-`, not
/// starting with `-`, `.` or `/`, with none of git's forbidden sequences. (Git's own
/// `check-ref-format` is asked too.)
pub fn check_name(what: &str, name: &str) -> Result<(), RelayError> {
    let bad = |why: &str| {
        Err(RelayError::Worktree(format!(
            "{what} {name:?} is not a valid name: {why}"
        )))
    };
    if name.is_empty() || name.len() > 200 {
        return bad("give 1 to 200 characters");
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-')))
    {
        return bad(&format!(
            "{c:?} is not allowed (letters, digits, . _ / - are)"
        ));
    }
    if name.starts_with(['-', '.', '/']) || name.ends_with(['/', '.']) || name.ends_with(".lock") {
        return bad("it may not start with - . / nor end with / . .lock");
    }
    if name.contains("..") || name.contains("//") || name.contains("/.") {
        return bad("it may not contain .. // /.");
    }
    Ok(())
}

/// A destination to push to: an absolute path to a repository, or an `https://`, `ssh://`
/// or `user@host:path` URL; never another transport (`ext::` runs programs).
pub fn check_destination(to: &str) -> Result<(), RelayError> {
    let bad = |why: &str| {
        Err(RelayError::Worktree(format!(
            "destination {to:?} is refused: {why}"
        )))
    };
    if to.starts_with('-') || to.contains("::") || to.chars().any(char::is_control) {
        return bad("give an absolute path to a repository or an https/ssh URL");
    }
    if to.starts_with('/') {
        if !Path::new(to).is_dir() {
            return bad("no such directory");
        }
        return Ok(());
    }
    if to.starts_with("https://") || to.starts_with("ssh://") {
        return Ok(());
    }
    let scp = to
        .split_once(':')
        .is_some_and(|(host, path)| host.contains('@') && !host.contains('/') && !path.is_empty());
    if scp {
        return Ok(());
    }
    bad("give an absolute path to a repository or an https/ssh URL")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_be_options_or_escape_are_refused() {
        for good in ["codex/fix-1", "main", "feature/a.b_c", "0123abcd"] {
            assert!(check_name("branch", good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-f",
            "--upload-pack=x",
            "a..b",
            "a b",
            "a;rm",
            "$(x)",
            "a/",
            ".a",
            "a.lock",
            "a//b",
            "a/.b",
            "a~1",
            "a^",
            "a:b",
            "a@{1}",
        ] {
            assert!(check_name("branch", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_paths_and_https_or_ssh_urls_are_destinations() {
        assert!(check_destination("/").is_ok());
        assert!(check_destination("https://example.com/r.git").is_ok());
        assert!(check_destination("git@example.com:me/r.git").is_ok());
        for bad in [
            "ext::sh -c touch% /tmp/x",
            "fd::3",
            "--upload-pack=x",
            "relative/path",
            "file:///tmp/x",
            "/no/such/dir/here",
        ] {
            assert!(check_destination(bad).is_err(), "{bad}");
        }
    }
}
