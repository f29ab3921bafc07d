//! The rules file (`--rules FILE`): TOML, one `[[rule]]` table per rule, with errors that
//! name the line and the field (unknown fields, bad globs, a missing name, a name twice).

use super::RuleSpec;

/// What is wrong with a rules file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct RulesFileError {
    pub file: String,
    pub message: String,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    #[serde(default)]
    rule: Vec<toml::Spanned<RuleSpec>>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Reads the rules of a file's `text` (`file` names it in errors).
pub fn parse_toml(file: &str, text: &str) -> Result<Vec<RuleSpec>, RulesFileError> {
    let err = |message: String| RulesFileError {
        file: file.to_owned(),
        message,
    };
    let parsed: FileToml = toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| format!("line {}: ", line_of(text, s.start)))
            .unwrap_or_default();
        // The first line of toml's message says what is wrong (the rest repeats the source).
        let what = e.message().trim().to_owned();
        err(format!(
            "{at}{what} (a rule is a [[rule]] table with name, action and conditions: kinds, argv, command, cwd, paths, labels, reason, outside_sandbox)"
        ))
    })?;
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    let mut out = Vec::new();
    for spanned in parsed.rule {
        let line = line_of(text, spanned.span().start);
        let spec = spanned.into_inner();
        spec.check().map_err(|e| err(format!("line {line}: {e}")))?;
        if let Some(first) = seen.insert(spec.name.clone(), line) {
            return Err(err(format!(
                "line {line}: rule {:?} is already defined at line {first}",
                spec.name
            )));
        }
        out.push(spec);
    }
    Ok(out)
}
