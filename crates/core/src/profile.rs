//! Codex profiles for one session. Newer Codex keeps a profile in `$CODEX_HOME/<name>.config.toml`
//! and selects it per process (`--profile`); it refuses the older per-config `profile = "<name>"`
//! key. One app-server serves many sessions, so a session's profile is applied as that file's
//! settings passed as the thread's config overrides (explicit overrides win). Without such a
//! file the `profile` key is passed on, which older Codex versions resolve from their
//! `[profiles.<name>]` tables (and newer ones refuse with their own message).

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::RelayError;

/// The config overrides for a session started with `profile`, given the explicit `config`.
pub(crate) fn overrides(
    codex_home: Option<&Path>,
    profile: &str,
    config: Option<Map<String, Value>>,
) -> Result<Map<String, Value>, RelayError> {
    if profile.is_empty()
        || !profile
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        || profile.starts_with('.')
    {
        return Err(RelayError::InvalidOption(format!(
            "profile {profile:?}: use the name of a Codex profile (letters, digits, '-', '_', '.')"
        )));
    }
    let mut out = Map::new();
    let file = codex_home.map(|h| h.join(format!("{profile}.config.toml")));
    match file.filter(|f| f.is_file()) {
        Some(file) => {
            let text = std::fs::read_to_string(&file).map_err(|e| {
                RelayError::InvalidOption(format!("profile {profile}: {}: {e}", file.display()))
            })?;
            let table: toml::Table = toml::from_str(&text).map_err(|e| {
                RelayError::InvalidOption(format!("profile {profile}: {}: {e}", file.display()))
            })?;
            match serde_json::to_value(table) {
                Ok(Value::Object(settings)) => out.extend(settings),
                _ => {
                    return Err(RelayError::InvalidOption(format!(
                        "profile {profile}: {} is not a table of settings",
                        file.display()
                    )));
                }
            }
        }
        None => {
            out.insert("profile".into(), Value::String(profile.to_owned()));
        }
    }
    out.extend(config.unwrap_or_default());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_profile_file_becomes_overrides_and_explicit_ones_win() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("fast.config.toml"),
            "model = \"m1\"\nmodel_reasoning_effort = \"high\"\n[tools]\nweb_search = true\n",
        )
        .unwrap();
        let explicit = json!({"model_reasoning_effort": "low"});
        let out = overrides(Some(home.path()), "fast", explicit.as_object().cloned()).unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"model": "m1", "model_reasoning_effort": "low", "tools": {"web_search": true}})
        );
        let legacy = overrides(Some(home.path()), "old", None).unwrap();
        assert_eq!(Value::Object(legacy), json!({"profile": "old"}));
        assert!(overrides(None, "../etc", None).is_err());
        std::fs::write(home.path().join("bad.config.toml"), "model = ").unwrap();
        let err = overrides(Some(home.path()), "bad", None).unwrap_err();
        assert!(err.to_string().contains("bad.config.toml"), "{err}");
    }
}
