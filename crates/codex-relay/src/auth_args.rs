//! The credential flags every subcommand that starts Codex shares (`--api-key-env`, `--chatgpt-tokens`): they name where a secret is, never the secret itself.

use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct AuthArgs {
    /// Log every Codex the relay starts in with the API key held by this environment variable
    /// (e.g. OPENAI_API_KEY); Codex stores it in CODEX_HOME/auth.json. Without this or
    /// --chatgpt-tokens, Codex uses what CODEX_HOME already holds.
    #[arg(
        long,
        env = "CODEX_RELAY_API_KEY_ENV",
        value_name = "NAME",
        conflicts_with = "chatgpt_tokens"
    )]
    pub api_key_env: Option<String>,
    /// Log Codex in with ChatGPT tokens from this JSON file ({"accessToken", "chatgptAccountId",
    /// "idToken", "chatgptPlanType"}); it is read again whenever Codex asks for fresh tokens.
    #[arg(long, env = "CODEX_RELAY_CHATGPT_TOKENS", value_name = "FILE")]
    pub chatgpt_tokens: Option<PathBuf>,
    /// Who refreshes the ChatGPT login of CODEX_HOME/auth.json: `auto` (the relay, when
    /// auth.json holds one and no other credentials are given), `relay` (the relay; refuse to
    /// start without one), `codex` (each Codex process on its own: safe only with one Codex on
    /// that login). The relay refreshes once for all its Codex processes and, on Postgres, for
    /// the whole cluster, and writes the new tokens back to auth.json.
    #[arg(
        long,
        env = "CODEX_RELAY_LOGIN_REFRESH",
        value_name = "auto|relay|codex",
        default_value = "auto"
    )]
    pub login_refresh: codex_relay_core::login::LoginRefresh,
}

impl AuthArgs {
    /// The builder with these credentials (checked when the builder is built).
    pub fn apply(&self, mut b: codex_relay::ClientBuilder) -> codex_relay::ClientBuilder {
        if let Some(name) = &self.api_key_env {
            b = b.api_key_env(name);
        }
        if let Some(file) = &self.chatgpt_tokens {
            b = b.chatgpt_tokens_file(file);
        }
        b.login_refresh(self.login_refresh)
    }
}
