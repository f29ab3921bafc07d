//! Whether Codex can reach its model: a model provider that needs OpenAI credentials while
//! Codex holds none fails a session at once ("Codex is not logged in", with the command that
//! fixes it) instead of a turn that retries until its deadline.

use std::ffi::OsStr;

use codex_relay_codex::{AppServer, AppServerConfig};

use crate::auth::{AccountState, account_state};

/// Variables Codex takes an API key from when its own store holds none.
const KEY_VARS: [&str; 2] = ["OPENAI_API_KEY", "CODEX_API_KEY"];

/// `None` when `server` (started with `config`) can reach its model as far as Codex knows;
/// else what to tell the person. Asked only when the relay gives Codex no credentials itself.
/// A Codex that cannot say (`account/read` fails) is given the benefit of the doubt.
pub(crate) async fn missing_login(server: &AppServer, config: &AppServerConfig) -> Option<String> {
    let state = account_state(server).await.ok()?;
    not_logged_in(&state, config)
}

/// The message for `state`, when it says Codex is logged out and its provider needs a login.
pub fn not_logged_in(state: &AccountState, config: &AppServerConfig) -> Option<String> {
    if !matches!(
        state,
        AccountState::LoggedOut {
            requires_openai_auth: true
        }
    ) || KEY_VARS.iter().any(|v| key_in_env(config, v))
    {
        return None;
    }
    let home = match &config.codex_home {
        Some(h) => h.display().to_string(),
        None => "~/.codex".into(),
    };
    let login =
        codex_relay_codex::locate::login_command(&config.binary, config.codex_home.as_deref());
    Some(format!(
        "Codex is not logged in: its model provider needs OpenAI credentials and {home}/auth.json holds none. Log in with `{login}`, or give codex-relay an API key (--api-key-env OPENAI_API_KEY); `--demo` runs against a built-in scripted model with no account"
    ))
}

/// Whether Codex gets the variable `name` with a value: from the config's environment
/// changes, else from the relay's own environment, which Codex inherits.
fn key_in_env(config: &AppServerConfig, name: &str) -> bool {
    match config.env.iter().rev().find(|(k, _)| k == OsStr::new(name)) {
        Some((_, value)) => value.as_ref().is_some_and(|v| !v.is_empty()),
        None => std::env::var_os(name).is_some_and(|v| !v.is_empty()),
    }
}
