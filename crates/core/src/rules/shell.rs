//! What a command line runs, as far as rules need to know: the script inside `bash -lc '…'`
//! (how Codex shows commands), split into simple commands (argv lists) at control operators,
//! and whether it is one plain command — no `;`, `&&`, `|`, substitution, redirection or
//! variable assignment — which is the only shape an allow rule may answer.

/// A command line, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The script: the command itself, or what a `sh -c`/`bash -lc` wrapper runs.
    pub script: String,
    /// Each simple command's words (quotes removed), in order.
    pub commands: Vec<Vec<String>>,
    /// One simple command and nothing else (see the module's doc).
    pub plain: bool,
}

impl Parsed {
    /// The argv of a plain command.
    pub fn argv(&self) -> Option<&[String]> {
        match (self.plain, self.commands.as_slice()) {
            (true, [one]) => Some(one),
            _ => None,
        }
    }
}

const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh"];

/// Reads `command` (as Codex sends it: `/bin/bash -lc 'git status'`, or a bare command).
pub fn parse(command: &str) -> Parsed {
    let outer = lex(command);
    // `bash -lc SCRIPT` (and `-c`, `-l -c`): the script is what runs.
    if outer.plain
        && let [first, rest @ ..] = outer.commands.first().map(Vec::as_slice).unwrap_or(&[])
        && SHELLS.contains(&basename(first))
        && outer.commands.len() == 1
    {
        let (flags, script) = rest.split_at(rest.len().saturating_sub(1));
        let takes_script = flags.iter().all(|f| {
            f.starts_with('-') && f.len() > 1 && f[1..].chars().all(|c| "lci".contains(c))
        }) && flags.iter().any(|f| f.contains('c'));
        if takes_script && let [script] = script {
            let inner = lex(script);
            return Parsed {
                script: script.clone(),
                ..inner
            };
        }
    }
    Parsed {
        script: command.trim().to_owned(),
        ..outer
    }
}

/// The last `/`-separated part of a program name.
pub fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Splits a script into simple commands (words with quotes removed), noting what makes it
/// more than one plain command.
fn lex(script: &str) -> Parsed {
    let mut commands: Vec<Vec<String>> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut plain = true;
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let end_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    let end_command = |words: &mut Vec<String>, commands: &mut Vec<Vec<String>>| {
        if !words.is_empty() {
            commands.push(std::mem::take(words));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' => end_word(&mut word, &mut in_word, &mut words),
            '\n' | ';' | '&' | '|' | '(' | ')' | '{' | '}' if !in_word || c != '{' && c != '}' => {
                end_word(&mut word, &mut in_word, &mut words);
                end_command(&mut words, &mut commands);
                plain = false;
            }
            '<' | '>' => {
                // A redirection: its target is not an argument.
                end_word(&mut word, &mut in_word, &mut words);
                plain = false;
                while matches!(chars.get(i + 1), Some('>' | '<' | '&' | '|')) {
                    i += 1;
                }
            }
            '`' => {
                plain = false;
                in_word = true;
                word.push(c);
            }
            '$' if matches!(chars.get(i + 1), Some('(' | '{' | '\'' | '"')) => {
                plain = false;
                in_word = true;
                word.push(c);
            }
            '#' if !in_word => {
                // A comment runs to the end of the line.
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '\\' => {
                in_word = true;
                if let Some(next) = chars.get(i + 1) {
                    if *next != '\n' {
                        word.push(*next);
                    }
                    i += 1;
                }
            }
            '\'' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    word.push(chars[i]);
                    i += 1;
                }
                if i >= chars.len() {
                    plain = false; // unterminated
                }
            }
            '"' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    match chars[i] {
                        '\\' if matches!(chars.get(i + 1), Some('"' | '\\' | '$' | '`')) => {
                            word.push(chars[i + 1]);
                            i += 1;
                        }
                        '`' => {
                            plain = false;
                            word.push('`');
                        }
                        '$' if chars.get(i + 1) == Some(&'(') => {
                            plain = false;
                            word.push('$');
                        }
                        other => word.push(other),
                    }
                    i += 1;
                }
                if i >= chars.len() {
                    plain = false;
                }
            }
            '=' if in_word && words.is_empty() && !word.is_empty() && is_name(&word) => {
                // `NAME=value cmd`: an assignment changes what the command does.
                plain = false;
                word.push(c);
            }
            other => {
                in_word = true;
                word.push(other);
            }
        }
        i += 1;
    }
    end_word(&mut word, &mut in_word, &mut words);
    end_command(&mut words, &mut commands);
    if commands.len() != 1 {
        plain = false;
    }
    Parsed {
        script: script.to_owned(),
        commands,
        plain,
    }
}

fn is_name(word: &str) -> bool {
    let mut chars = word.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Option<Vec<String>> {
        parse(s).argv().map(<[String]>::to_vec)
    }

    #[test]
    fn codex_wrappers_are_unwrapped_and_quotes_removed() {
        assert_eq!(
            argv("/bin/bash -lc 'git status'"),
            Some(vec!["git".into(), "status".into()])
        );
        assert_eq!(
            argv("bash -c \"cargo test -p 'my crate'\""),
            Some(vec![
                "cargo".into(),
                "test".into(),
                "-p".into(),
                "my crate".into()
            ])
        );
        assert_eq!(argv("ls -la"), Some(vec!["ls".into(), "-la".into()]));
        assert_eq!(parse("/bin/bash -lc 'git status'").script, "git status");
        assert_eq!(
            argv("git log --format=%H"),
            Some(vec!["git".into(), "log".into(), "--format=%H".into()])
        );
    }

    #[test]
    fn anything_more_than_one_plain_command_is_not_plain() {
        for s in [
            "git status; rm -rf /",
            "/bin/bash -lc 'git status && rm -rf x'",
            "git status | sh",
            "git status > out",
            "echo $(rm -rf x)",
            "echo \"$(id)\"",
            "echo `id`",
            "FOO=1 git status",
            "git status &",
            "git status\nrm -rf x",
            "(git status)",
            "'unterminated",
            "",
        ] {
            assert!(!parse(s).plain, "{s:?} is not plain");
        }
        let p = parse("/bin/bash -lc 'git status && rm -rf build'");
        assert_eq!(
            p.commands,
            vec![
                vec!["git".to_owned(), "status".into()],
                vec!["rm".to_owned(), "-rf".into(), "build".into()]
            ]
        );
        // `$HOME` and a `#` inside a word keep a command plain.
        assert!(parse("ls $HOME a#b").plain);
    }
}
