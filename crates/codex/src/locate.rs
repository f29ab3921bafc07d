//! Which Codex runs when none is named, and the advice that names commands that work: `codex`
//! on PATH, else the pinned Codex that `./scripts/serve`, `./scripts/mcp` and the test kit
//! install into the cache (`~/.cache/codex-relay/codex/<version>/`).

use std::path::{Path, PathBuf};

use crate::version::NEWEST_TESTED;

/// The cache the scripts and the test kit install Codex into: `$CODEX_RELAY_CACHE`, else
/// `$XDG_CACHE_HOME/codex-relay`, else `~/.cache/codex-relay` (the test kit's rule).
pub fn cache_root() -> PathBuf {
    if let Some(p) = std::env::var_os("CODEX_RELAY_CACHE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(p).join("codex-relay");
    }
    let home = std::env::var_os("HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("codex-relay")
}

/// Where the pinned Codex `version` lives once installed (it may not be).
pub fn pinned_path(version: &str) -> PathBuf {
    cache_root()
        .join("codex")
        .join(version)
        .join("node_modules")
        .join(".bin")
        .join("codex")
}

/// How a Codex was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// `codex` on PATH.
    OnPath,
    /// The pinned Codex in the cache (installed by the scripts or the test kit).
    Pinned,
}

/// The Codex used when none is named (`--codex`, `CODEX_CLI_PATH`): `codex` on PATH, else the
/// newest pinned Codex in the cache when it is installed.
pub fn find_default() -> Option<(PathBuf, Found)> {
    if let Some(p) = on_path("codex") {
        return Some((p, Found::OnPath));
    }
    let pinned = pinned_path(&NEWEST_TESTED.to_string());
    is_executable(&pinned).then_some((pinned, Found::Pinned))
}

/// What to do when there is no Codex at all: commands that install the tested one.
pub fn install_advice() -> String {
    format!(
        "no `codex` on PATH, and no pinned Codex in {}; install the Codex codex-relay is tested with: `npm install -g @openai/codex@{NEWEST_TESTED}` (from a clone of codex-relay, `./scripts/serve` installs it into that cache), or name one with --codex / CODEX_CLI_PATH",
        pinned_path(&NEWEST_TESTED.to_string())
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent)
            .unwrap_or(Path::new(""))
            .display(),
    )
}

/// The command that logs `binary` in for `codex_home` (Codex's own home when `None`), as a
/// person would type it: `codex login` when that is the `codex` on PATH, else its full path;
/// `CODEX_HOME=...` in front when the relay uses another home.
pub fn login_command(binary: &Path, codex_home: Option<&Path>) -> String {
    let resolved = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let program = match on_path("codex") {
        Some(p) if resolved(&p) == resolved(binary) => "codex".to_owned(),
        _ => shell_word(&binary.display().to_string()),
    };
    match codex_home {
        Some(home) => format!(
            "CODEX_HOME={} {program} login",
            shell_word(&home.display().to_string())
        ),
        None => format!("{program} login"),
    }
}

/// `s` quoted for a POSIX shell when it needs it.
fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+=:@%,".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_with_spaces_or_quotes_is_quoted_for_the_shell() {
        assert_eq!(shell_word("/usr/bin/codex"), "/usr/bin/codex");
        assert_eq!(shell_word("/a b/codex"), "'/a b/codex'");
        assert_eq!(shell_word("/it's/codex"), r"'/it'\''s/codex'");
    }

    #[test]
    fn a_codex_off_path_is_named_by_its_full_path() {
        let cmd = login_command(
            Path::new("/nowhere/on/path/codex"),
            Some(Path::new("/srv/codex home")),
        );
        assert_eq!(
            cmd,
            "CODEX_HOME='/srv/codex home' /nowhere/on/path/codex login"
        );
    }
}
