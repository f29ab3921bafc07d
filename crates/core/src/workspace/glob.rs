//! The small glob dialect of workspace mounts: `*`, `?`, `**` and `[abc]`/`[a-z]`/`[!x]`,
//! matched against `/`-separated paths relative to the mount.

use super::WorkspaceError;

/// One compiled pattern. A pattern without `/` matches a file or directory name at any depth
/// (`*.rs`, `target`); with a `/` it matches the whole relative path (`src/**/*.rs`, `docs/*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    text: String,
    tokens: Vec<Token>,
    anchored: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    /// `?`: one character other than `/`.
    One,
    /// `*`: any run of characters without `/`.
    Star,
    /// `**` as a whole segment: any number of segments (zero included).
    Segments,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
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
        let anchored = trimmed.contains('/');
        let chars: Vec<char> = trimmed.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' if chars.get(i + 1) == Some(&'*') => {
                    let starts_segment = i == 0 || chars[i - 1] == '/';
                    let ends_segment = i + 2 == chars.len() || chars[i + 2] == '/';
                    if !(starts_segment && ends_segment) {
                        return Err(bad("`**` must be a whole path segment (`a/**/b`)"));
                    }
                    tokens.push(Token::Segments);
                    // `**/` also swallows its slash so that it can match zero segments.
                    i += if i + 2 < chars.len() { 3 } else { 2 };
                }
                '*' => {
                    tokens.push(Token::Star);
                    i += 1;
                }
                '?' => {
                    tokens.push(Token::One);
                    i += 1;
                }
                '[' => {
                    let close = chars[i + 1..]
                        .iter()
                        .position(|c| *c == ']')
                        .ok_or_else(|| bad("unclosed `[`"))?
                        + i
                        + 1;
                    let mut body = &chars[i + 1..close];
                    let negated = matches!(body.first(), Some('!' | '^'));
                    if negated {
                        body = &body[1..];
                    }
                    if body.is_empty() {
                        return Err(bad("empty `[]` class"));
                    }
                    let mut ranges = Vec::new();
                    let mut j = 0;
                    while j < body.len() {
                        if j + 2 < body.len() && body[j + 1] == '-' {
                            ranges.push((body[j], body[j + 2]));
                            j += 3;
                        } else {
                            ranges.push((body[j], body[j]));
                            j += 1;
                        }
                    }
                    tokens.push(Token::Class { negated, ranges });
                    i = close + 1;
                }
                c => {
                    tokens.push(Token::Literal(c));
                    i += 1;
                }
            }
        }
        Ok(Self {
            text: text.to_owned(),
            tokens,
            anchored,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `rel` (a `/`-separated path relative to the mount) matches.
    pub fn matches(&self, rel: &str) -> bool {
        let path: Vec<char> = if self.anchored {
            rel.chars().collect()
        } else {
            rel.rsplit('/').next().unwrap_or(rel).chars().collect()
        };
        match_from(&self.tokens, &path)
    }
}

fn match_from(tokens: &[Token], path: &[char]) -> bool {
    let Some((first, rest)) = tokens.split_first() else {
        return path.is_empty();
    };
    match first {
        Token::Literal(c) => path.first() == Some(c) && match_from(rest, &path[1..]),
        Token::One => path.first().is_some_and(|c| *c != '/') && match_from(rest, &path[1..]),
        Token::Class { negated, ranges } => {
            path.first().is_some_and(|c| {
                *c != '/' && ranges.iter().any(|(lo, hi)| lo <= c && c <= hi) != *negated
            }) && match_from(rest, &path[1..])
        }
        Token::Star => {
            for n in 0..=path.len() {
                if match_from(rest, &path[n..]) {
                    return true;
                }
                if path.get(n) == Some(&'/') {
                    break;
                }
            }
            false
        }
        Token::Segments => {
            // Zero segments, or skip through each following `/`.
            if match_from(rest, path) {
                return true;
            }
            (0..path.len()).any(|n| path[n] == '/' && match_from(rest, &path[n + 1..]))
                || (rest.is_empty() && !path.is_empty())
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
