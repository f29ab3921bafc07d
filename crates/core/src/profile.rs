//! Codex profiles for one session. Newer Codex keeps a profile in `$CODEX_HOME/<name>.config.toml`
//! and selects it per process (`--profile`); it refuses the older per-config `profile = "<name>"`
//! key. One app-server serves many sessions, so a session's profile is applied as that file's
//! settings passed as the thread's config overrides (explicit overrides win). Without such a
//! file the `profile` key is passed on, which older Codex versions resolve from their
//! `[profiles.<name>]` tables in `config.toml` (and newer ones refuse with their own message).
//! Either way the settings are read here, so the operator's limits can be checked against
//! what the profile brings.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::RelayError;

/// A profile as found in CODEX_HOME.
#[derive(Debug, Clone)]
pub(crate) struct Profile {
    pub name: String,
    /// Its settings; `None` when CODEX_HOME has no such profile.
    pub settings: Option<Map<String, Value>>,
    /// Where they were read: `<name>.config.toml`, or `config.toml` for a `[profiles.<name>]`
    /// table (which Codex resolves itself from the `profile` key).
    pub file: Option<PathBuf>,
    /// Whether Codex is given the settings themselves (a profile file) rather than the key.
    pub as_settings: bool,
}

impl Profile {
    /// Where the settings come from, for messages: `profile "fast" (/home/…/fast.config.toml)`.
    pub fn described(&self) -> String {
        match &self.file {
            Some(f) => format!("profile {:?} ({})", self.name, f.display()),
            None => format!("profile {:?}", self.name),
        }
    }
}

fn invalid(profile: &str, why: String) -> RelayError {
    RelayError::InvalidOption(format!("profile {profile}: {why}"))
}

fn table_of(file: &Path, profile: &str) -> Result<toml::Table, RelayError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| invalid(profile, format!("{}: {e}", file.display())))?;
    toml::from_str(&text).map_err(|e| invalid(profile, format!("{}: {e}", file.display())))
}

fn as_map(
    table: toml::Table,
    file: &Path,
    profile: &str,
) -> Result<Map<String, Value>, RelayError> {
    match serde_json::to_value(table) {
        Ok(Value::Object(settings)) => Ok(settings),
        _ => Err(invalid(
            profile,
            format!("{} is not a table of settings", file.display()),
        )),
    }
}

/// Finds the profile `name` in `codex_home`: its own file first, else a `[profiles.<name>]`
/// table of `config.toml`.
pub(crate) fn load(codex_home: Option<&Path>, name: &str) -> Result<Profile, RelayError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        || name.starts_with('.')
    {
        return Err(RelayError::InvalidOption(format!(
            "profile {name:?}: use the name of a Codex profile (letters, digits, '-', '_', '.')"
        )));
    }
    let own = codex_home
        .map(|h| h.join(format!("{name}.config.toml")))
        .filter(|f| f.is_file());
    if let Some(file) = own {
        let settings = as_map(table_of(&file, name)?, &file, name)?;
        return Ok(Profile {
            name: name.to_owned(),
            settings: Some(settings),
            file: Some(file),
            as_settings: true,
        });
    }
    let main = codex_home
        .map(|h| h.join("config.toml"))
        .filter(|f| f.is_file());
    let table = match &main {
        Some(file) => table_of(file, name)?
            .remove("profiles")
            .and_then(|p| match p {
                toml::Value::Table(mut t) => t.remove(name),
                _ => None,
            })
            .and_then(|p| match p {
                toml::Value::Table(t) => Some(t),
                _ => None,
            }),
        None => None,
    };
    let settings = match (table, &main) {
        (Some(t), Some(file)) => Some(as_map(t, file, name)?),
        _ => None,
    };
    Ok(Profile {
        name: name.to_owned(),
        file: settings.as_ref().and(main),
        settings,
        as_settings: false,
    })
}

/// The config overrides for a session started with `profile`, given the explicit `config`.
pub(crate) fn overrides(
    profile: &Profile,
    config: Option<Map<String, Value>>,
) -> Map<String, Value> {
    let mut out = Map::new();
    match (&profile.settings, profile.as_settings) {
        (Some(settings), true) => out.extend(settings.clone()),
        _ => {
            out.insert("profile".into(), Value::String(profile.name.clone()));
        }
    }
    out.extend(config.unwrap_or_default());
    out
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
        let fast = load(Some(home.path()), "fast").unwrap();
        let out = overrides(&fast, explicit.as_object().cloned());
        assert_eq!(
            Value::Object(out),
            json!({"model": "m1", "model_reasoning_effort": "low", "tools": {"web_search": true}})
        );
        let legacy = load(Some(home.path()), "old").unwrap();
        assert!(legacy.settings.is_none());
        assert_eq!(
            Value::Object(overrides(&legacy, None)),
            json!({"profile": "old"})
        );
        assert!(load(None, "../etc").is_err());
        std::fs::write(home.path().join("bad.config.toml"), "model = ").unwrap();
        let err = load(Some(home.path()), "bad").unwrap_err();
        assert!(err.to_string().contains("bad.config.toml"), "{err}");
    }

    #[test]
    fn a_profiles_table_is_read_for_checking_and_passed_on_by_name() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            "model = \"m0\"\n[profiles.full]\nsandbox_mode = \"danger-full-access\"\n",
        )
        .unwrap();
        let full = load(Some(home.path()), "full").unwrap();
        assert_eq!(
            full.settings.clone().map(Value::Object),
            Some(json!({"sandbox_mode": "danger-full-access"}))
        );
        assert!(full.described().contains("config.toml"));
        let full = load(Some(home.path()), "full").unwrap();
        assert_eq!(
            Value::Object(overrides(&full, None)),
            json!({"profile": "full"})
        );
    }
}
