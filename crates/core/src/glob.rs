//! The relay's one glob dialect (rules' commands, directories and paths; workspace mounts'
//! include and exclude): `*`, `?`, `**`, classes `[abc]`/`[a-z]`/`[!x]` (also `[^x]`; a `]`
//! right after `[` or `[!` is a member, a backwards range is refused) and `\` before a character
//! that is meant literally. Over paths, `*`, `?` and classes stay within one `/`-separated
//! segment and `**` spans any number of them (`a/**/b` also matches `a/b`); over a command line
//! every character is alike (`cargo test *` matches `cargo test --all`). docs/RULES.md, "Globs".

/// A compiled glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    tokens: Vec<Token>,
    paths: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    One,
    Star,
    /// `**`: anything, `/` included.
    Any,
    /// `**/` over paths: any number of whole segments, none included.
    Dirs,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Pattern {
    /// A glob over paths.
    pub fn path(text: &str) -> Result<Self, String> {
        Self::compile(text, true)
    }

    /// A glob over a command line.
    pub fn command(text: &str) -> Result<Self, String> {
        Self::compile(text, false)
    }

    fn compile(text: &str, paths: bool) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Err("the pattern is empty".into());
        }
        let chars: Vec<char> = text.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' if chars.get(i + 1) == Some(&'*') => {
                    i += 2;
                    while chars.get(i) == Some(&'*') {
                        i += 1;
                    }
                    // `a/**/b` also matches `a/b`: the slash after `**` goes with it.
                    if paths && chars.get(i) == Some(&'/') {
                        tokens.push(Token::Dirs);
                        i += 1;
                    } else {
                        tokens.push(Token::Any);
                    }
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
                        .skip(1)
                        .position(|c| *c == ']')
                        .map(|p| p + i + 2)
                        .ok_or_else(|| format!("unclosed `[` at character {}", i + 1))?;
                    let mut body = &chars[i + 1..close];
                    let negated = matches!(body.first(), Some('!' | '^'));
                    if negated {
                        body = &body[1..];
                    }
                    let mut ranges = Vec::new();
                    let mut j = 0;
                    while j < body.len() {
                        if body.get(j + 1) == Some(&'-') && j + 2 < body.len() {
                            let (a, b) = (body[j], body[j + 2]);
                            if a > b {
                                return Err(format!("the range `{a}-{b}` is backwards"));
                            }
                            ranges.push((a, b));
                            j += 3;
                        } else {
                            ranges.push((body[j], body[j]));
                            j += 1;
                        }
                    }
                    if ranges.is_empty() {
                        return Err("an empty `[]` matches nothing".into());
                    }
                    tokens.push(Token::Class { negated, ranges });
                    i = close + 1;
                }
                '\\' if i + 1 < chars.len() => {
                    tokens.push(Token::Literal(chars[i + 1]));
                    i += 2;
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
            paths,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the pattern has no wildcard at all.
    pub fn is_literal(&self) -> bool {
        self.tokens.iter().all(|t| matches!(t, Token::Literal(_)))
    }

    /// Whether `text` matches the whole pattern.
    pub fn matches(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        self.at(0, &chars, 0)
    }

    fn at(&self, t: usize, s: &[char], i: usize) -> bool {
        let Some(token) = self.tokens.get(t) else {
            return i == s.len();
        };
        let sep = |c: char| self.paths && c == '/';
        match token {
            Token::Literal(c) => s.get(i) == Some(c) && self.at(t + 1, s, i + 1),
            Token::One => s.get(i).is_some_and(|c| !sep(*c)) && self.at(t + 1, s, i + 1),
            Token::Class { negated, ranges } => {
                s.get(i).is_some_and(|c| {
                    !sep(*c) && ranges.iter().any(|(a, b)| (a..=b).contains(&c)) != *negated
                }) && self.at(t + 1, s, i + 1)
            }
            Token::Star => {
                let mut j = i;
                loop {
                    if self.at(t + 1, s, j) {
                        return true;
                    }
                    match s.get(j) {
                        Some(c) if !sep(*c) => j += 1,
                        _ => return false,
                    }
                }
            }
            Token::Any => (i..=s.len()).any(|j| self.at(t + 1, s, j)),
            Token::Dirs => {
                (i..=s.len()).any(|j| (j == i || s[j - 1] == '/') && self.at(t + 1, s, j))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_globs_keep_to_segments_and_double_stars_span_them() {
        let p = Pattern::path("/work/*/src/**/*.rs").unwrap();
        assert!(p.matches("/work/repo/src/main.rs"));
        assert!(p.matches("/work/repo/src/a/b/c.rs"));
        assert!(!p.matches("/work/a/b/src/main.rs"));
        assert!(!p.matches("/work/repo/src/main.rsx"));
        let any = Pattern::path("/work/repo/**").unwrap();
        assert!(any.matches("/work/repo/x/y"));
        assert!(!any.matches("/work/repository"));
        let lead = Pattern::path("**/Cargo.toml").unwrap();
        assert!(lead.matches("Cargo.toml") && lead.matches("a/b/Cargo.toml"));
        assert!(!lead.matches("a/xCargo.toml"));
        assert!(
            Pattern::path("src/[a-c]?.txt")
                .unwrap()
                .matches("src/b1.txt")
        );
        assert!(
            !Pattern::path("src/[!a-c]?.txt")
                .unwrap()
                .matches("src/b1.txt")
        );
        assert!(Pattern::path("a/[").is_err());
        assert!(Pattern::path("a/[z-a]").is_err());
        assert!(Pattern::path(" ").is_err());
    }

    #[test]
    fn command_globs_treat_every_character_alike() {
        let p = Pattern::command("cargo test *").unwrap();
        assert!(p.matches("cargo test --all -p x/y"));
        assert!(!p.matches("cargo build"));
        assert!(Pattern::command("git status").unwrap().is_literal());
    }
}
