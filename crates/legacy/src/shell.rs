//! Splitting a shell command line into words (POSIX quoting), for the legacy events and
//! elicitations that carry a command as an argv array.

/// Splits `line` the way `sh` would (single quotes, double quotes, backslashes); unbalanced
/// quotes end the word at the end of the line.
pub fn split(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                            word.extend(chars.next());
                        }
                        other => word.push(other),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            other => {
                in_word = true;
                word.push(other);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn quoted_words_stay_whole() {
        assert_eq!(
            split("/bin/bash -lc 'touch made.txt'"),
            ["/bin/bash", "-lc", "touch made.txt"]
        );
        assert_eq!(
            split(r#"echo "a \"b\"" c\ d ''"#),
            ["echo", "a \"b\"", "c d", ""]
        );
        assert!(split("   ").is_empty());
    }
}
