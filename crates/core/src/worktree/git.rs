//! Running git for worktrees: always with arguments (never a shell), with hooks, fsmonitor,
//! the `ext`/`fd` transports and terminal prompts off (diffs add `--no-ext-diff
//! --no-textconv`), and names checked before they reach it.

use std::path::{Path, PathBuf};

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
    git_in(dir, None, args).await
}

/// [`git`] with the repository's git directory given (`GIT_DIR`, with `dir` the work tree)
/// rather than found from `dir`.
async fn git_in(dir: &Path, git_dir: Option<&Path>, args: &[&str]) -> Result<String, RelayError> {
    let mut pause = std::time::Duration::from_millis(50);
    for _ in 0..6 {
        match git_once(dir, git_dir, args).await {
            Err(Locked) => {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            Ok(done) => return done,
        }
    }
    match git_once(dir, git_dir, args).await {
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

async fn git_once(
    dir: &Path,
    git_dir: Option<&Path>,
    args: &[&str],
) -> Result<Result<String, RelayError>, Locked> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.args(SAFE)
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_COMMON_DIR")
        .env_remove("GIT_INDEX_FILE");
    if let Some(git_dir) = git_dir {
        cmd.env("GIT_DIR", git_dir).env("GIT_WORK_TREE", dir);
    }
    cmd.stdin(std::process::Stdio::null())
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

/// A checkout git runs in. A worktree the relay made is run with its git directory as the
/// repository lists it, never as the worktree's own `.git` file says: Codex writes in the
/// worktree, and a `.git` file pointing at a directory it made would hand git a config of its
/// choosing (a filter or hook program run outside Codex's sandbox, as the relay's user).
pub(crate) struct Tree {
    pub path: PathBuf,
    git_dir: Option<PathBuf>,
}

impl Tree {
    /// A checkout whose `.git` the relay trusts (the user's own repository).
    pub(crate) fn plain(path: &Path) -> Tree {
        Tree {
            path: path.to_owned(),
            git_dir: None,
        }
    }

    /// `path` as a worktree of the repository at `top`, or `top` itself: its git directory is
    /// the one of `top`'s worktrees whose `gitdir` names `path` (the repository's record, which
    /// Codex cannot write), never what `path/.git` says.
    pub(crate) async fn of(top: &Path, path: &Path) -> Result<Tree, RelayError> {
        if path == top {
            return Ok(Tree::plain(top));
        }
        let common = git(top, &["rev-parse", "--git-common-dir"]).await?;
        let common = top.join(common.trim());
        // Compared as directories, links resolved: git records the worktree's real path. (Its
        // `.git` is not resolved: that is what Codex could have replaced.)
        let want = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        let entries = std::fs::read_dir(common.join("worktrees")).ok();
        for entry in entries.into_iter().flatten().flatten() {
            let named = std::fs::read_to_string(entry.path().join("gitdir")).unwrap_or_default();
            let dir = Path::new(named.trim()).parent().map(std::fs::canonicalize);
            if matches!(dir, Some(Ok(dir)) if dir == want) {
                return Ok(Tree {
                    path: path.to_owned(),
                    git_dir: Some(entry.path()),
                });
            }
        }
        Err(RelayError::Worktree(format!(
            "{} is not a worktree of {}",
            path.display(),
            top.display()
        )))
    }

    pub(crate) async fn git(&self, args: &[&str]) -> Result<String, RelayError> {
        git_in(&self.path, self.git_dir.as_deref(), args).await
    }

    pub(crate) async fn git_ok(&self, args: &[&str]) -> bool {
        self.git(args).await.is_ok()
    }

    /// The arguments a commit or merge here starts with: an author for the relay when the
    /// repository's config names none (git refuses to commit without one).
    pub(crate) async fn identity(&self) -> Vec<&'static str> {
        if self.git_ok(&["config", "user.email"]).await {
            return Vec::new();
        }
        vec![
            "-c",
            "user.name=codex-relay",
            "-c",
            "user.email=codex-relay@localhost",
        ]
    }
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

    fn run(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env_remove("GIT_DIR")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// Codex writes in its worktree, so it can replace the worktree's `.git` file with one
    /// pointing at a git directory of its own, whose config names a clean filter that a
    /// `.gitattributes` applies to every file. Git run the plain way in the worktree (as the
    /// relay does to diff, export and close it) would run that program as the relay's user,
    /// outside Codex's sandbox; run with the repository's own record it does not.
    #[tokio::test]
    async fn a_worktree_whose_git_file_was_rewritten_runs_with_the_repositorys_record() {
        let tmp = tempfile::tempdir().unwrap();
        let (top, wt, own) = (
            tmp.path().join("repo"),
            tmp.path().join("wt"),
            tmp.path().join("own"),
        );
        let marker = tmp.path().join("filter-ran");
        std::fs::create_dir(&top).unwrap();
        run(&top, &["init", "-q", "-b", "main"]);
        std::fs::write(top.join("a.txt"), "a\n").unwrap();
        run(&top, &["add", "a.txt"]);
        run(
            &top,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "a",
            ],
        );
        run(
            &top,
            &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()],
        );
        // What Codex could write in the worktree.
        std::fs::create_dir(&own).unwrap();
        run(&own, &["init", "-q"]);
        let program = format!("sh -c 'touch {}; cat'", marker.display());
        run(&own, &["config", "filter.x.clean", &program]);
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", own.join(".git").display()),
        )
        .unwrap();
        std::fs::write(wt.join(".gitattributes"), "* filter=x\n").unwrap();
        std::fs::write(wt.join("b.txt"), "b\n").unwrap();

        // The attack is real: git that trusts the worktree's `.git` runs the program.
        let _ = Tree::plain(&wt).git(&["add", "--all"]).await;
        assert!(marker.exists(), "the plain way should have run the filter");
        std::fs::remove_file(&marker).unwrap();

        // The relay's way: the worktree's git directory as the repository records it.
        let tree = Tree::of(&top, &wt)
            .await
            .expect("a worktree of the repository");
        tree.git(&["add", "--all"]).await.expect("git add");
        let status = tree.git(&["status", "--porcelain"]).await.unwrap();
        assert!(
            !marker.exists(),
            "the worktree's own .git file was followed"
        );
        assert!(status.contains("b.txt"), "{status}");
        // A directory that is no worktree of the repository is refused.
        assert!(Tree::of(&top, &own).await.is_err());
    }

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
