//! Workspace mounts' include and exclude patterns: the relay's glob dialect ([`crate::glob`])
//! matched against `/`-separated paths relative to the mount.

use super::WorkspaceError;
use crate::glob::Pattern;

/// One compiled pattern, in the relay's glob dialect ([`crate::glob`]). A pattern without `/`
/// matches a file or directory name at any depth (`*.rs`, `target`); with a `/` it matches the
/// whole relative path (`src/**/*.rs`, `docs/*`). Here `**` must be a whole segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    text: String,
    pattern: Pattern,
    anchored: bool,
}

impl Glob {
    pub fn new(text: &str) -> Result<Self, WorkspaceError> {
        let bad = |why: &str| WorkspaceError::InvalidGlob {
            pattern: text.to_owned(),
            why: why.to_owned(),
        };
        let trimmed = text.trim_start_matches("./");
        if trimmed.is_empty() {
            return Err(bad("empty pattern"));
        }
        if trimmed.starts_with('/') {
            return Err(bad(
                "patterns are relative to the mount; drop the leading `/`",
            ));
        }
        let whole_segments = trimmed
            .split('/')
            .all(|segment| !segment.contains("**") || segment == "**");
        if !whole_segments {
            return Err(bad("`**` must be a whole path segment (`a/**/b`)"));
        }
        Ok(Self {
            text: text.to_owned(),
            pattern: Pattern::path(trimmed).map_err(|why| bad(&why))?,
            anchored: trimmed.contains('/'),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `rel` (a `/`-separated path relative to the mount) matches.
    pub fn matches(&self, rel: &str) -> bool {
        if self.anchored {
            self.pattern.matches(rel)
        } else {
            self.pattern.matches(rel.rsplit('/').next().unwrap_or(rel))
        }
    }
}

/// A set of patterns; empty matches nothing.
#[derive(Debug, Clone, Default)]
pub struct GlobSet(Vec<Glob>);

impl GlobSet {
    pub fn new(patterns: &[String]) -> Result<Self, WorkspaceError> {
        patterns
            .iter()
            .map(|p| Glob::new(p))
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, rel: &str) -> bool {
        self.0.iter().any(|g| g.matches(rel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, path: &str) -> bool {
        Glob::new(pattern).unwrap().matches(path)
    }

    #[test]
    fn names_match_at_any_depth_and_paths_match_whole() {
        assert!(m("*.rs", "main.rs"));
        assert!(m("*.rs", "src/deep/lib.rs"));
        assert!(!m("*.rs", "src/lib.rsx"));
        assert!(m("target", "a/b/target"));
        assert!(m("src/*.rs", "src/lib.rs"));
        assert!(!m("src/*.rs", "src/a/lib.rs"));
        assert!(!m("src/*.rs", "x/src/lib.rs"));
    }

    #[test]
    fn double_star_spans_zero_or_more_segments() {
        assert!(m("src/**/*.rs", "src/lib.rs"));
        assert!(m("src/**/*.rs", "src/a/b/lib.rs"));
        assert!(!m("src/**/*.rs", "lib.rs"));
        assert!(m("**/node_modules", "node_modules"));
        assert!(m("**/node_modules", "web/node_modules"));
        assert!(m("docs/**", "docs/a/b.md"));
        assert!(!m("docs/**", "docs"));
    }

    #[test]
    fn one_char_and_classes() {
        assert!(m("?.txt", "a.txt"));
        assert!(!m("?.txt", "ab.txt"));
        assert!(m("[ab].txt", "b.txt"));
        assert!(!m("[ab].txt", "c.txt"));
        assert!(m("[!ab].txt", "c.txt"));
        assert!(m("file[0-9]", "file7"));
        assert!(!m("file[0-9]", "filex"));
    }

    /// One dialect with the rules' (crate::glob): before, a mount read `[]a]` as an empty
    /// class and `\*` as two characters, where a rule read a `]` member and a literal `*`.
    #[test]
    fn the_dialect_is_the_rules_one() {
        for (pattern, path) in [("[]a].txt", "].txt"), ("\\*.txt", "*.txt")] {
            assert!(m(pattern, path), "{pattern}");
            assert!(Pattern::path(pattern).unwrap().matches(path), "{pattern}");
        }
        assert!(!m("\\*.txt", "a.txt"));
        assert!(
            Glob::new("[z-a]")
                .unwrap_err()
                .to_string()
                .contains("backwards")
        );
    }

    #[test]
    fn bad_patterns_are_refused_with_the_reason() {
        for (p, why) in [
            ("", "empty"),
            ("/etc/*", "relative"),
            ("a**b", "whole path segment"),
            ("[ab", "unclosed"),
        ] {
            let err = Glob::new(p).unwrap_err().to_string();
            assert!(err.contains(why), "{p}: {err}");
        }
    }
}
