//! A ChatGPT login shared by every Codex process of the relay (and of the cluster): the relay
//! reads `CODEX_HOME/auth.json`, logs each app-server in with the tokens as external
//! `chatgptAuthTokens` (Codex then keeps them in memory and asks the relay for fresh ones
//! after a 401 instead of refreshing on its own), and answers those requests itself with one
//! refresh at a time: a request waits for the refresh in flight and gets its result; a request
//! from a process whose token was already replaced gets the current tokens with no refresh;
//! the new tokens are written back to `auth.json` atomically, so the `codex` CLI of that
//! machine keeps working. Across relays: a file lock beside `auth.json` on one machine, a row
//! per spent refresh token in Postgres across machines (docs/CLUSTER.md, "One login, many
//! Codex processes"). No token is logged or stored anywhere but `auth.json`.

mod auth_file;
mod coord;
mod oauth;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::PgPool;

use crate::auth::ChatgptTokens;
pub use crate::error::LoginError;
use auth_file::Tokens;
pub use oauth::{CODEX_CLIENT_ID, DEFAULT_TOKEN_URL, TOKEN_URL_ENV};

impl LoginError {
    fn io(what: &'static str, path: &Path, source: std::io::Error) -> Self {
        LoginError::Io {
            what,
            path: path.to_owned(),
            source,
        }
    }

    fn postgres(e: sqlx::Error) -> Self {
        LoginError::Postgres {
            reason: e.to_string(),
        }
    }
}

/// An access token this close to its `exp` is refreshed before a Codex starts with it.
const EXPIRY_MARGIN_SECS: i64 = 120;
/// Codex 0.98 refreshes at start once `last_refresh` is 8 days old; the relay does at 7.
const STALE_AFTER_SECS: i64 = 7 * 86_400;

/// Who refreshes the ChatGPT login of CODEX_HOME (the binary's `--login-refresh`, the
/// library's `ClientBuilder::login_refresh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoginRefresh {
    /// The relay, when `CODEX_HOME/auth.json` holds a ChatGPT login and no other credentials
    /// are given; else Codex, as before.
    #[default]
    Auto,
    /// The relay; starting without a ChatGPT login in `auth.json` is an error.
    Relay,
    /// Every Codex process on its own (safe only with one Codex process on that login).
    Codex,
}

impl std::str::FromStr for LoginRefresh {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(LoginRefresh::Auto),
            "relay" => Ok(LoginRefresh::Relay),
            "codex" => Ok(LoginRefresh::Codex),
            other => Err(format!("{other:?}: expected auto, relay or codex")),
        }
    }
}

impl std::fmt::Display for LoginRefresh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LoginRefresh::Auto => "auto",
            LoginRefresh::Relay => "relay",
            LoginRefresh::Codex => "codex",
        })
    }
}

/// Where and how the login is refreshed.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    /// The token endpoint (default: `CODEX_REFRESH_TOKEN_URL_OVERRIDE` from the environment
    /// Codex is given, else the relay's own, else [`DEFAULT_TOKEN_URL`]).
    pub token_url: Option<String>,
    /// The OAuth client id (default: Codex's, [`CODEX_CLIENT_ID`]).
    pub client_id: String,
    /// How long one refresh may take (the endpoint's answer, or the wait for the lock).
    pub timeout: Duration,
    /// What the Codex processes are given as `CODEX_REFRESH_TOKEN_URL_OVERRIDE` (default
    /// [`CODEX_REFRESH_BLOCKED`]: a loopback port only root may listen on, so a Codex that
    /// tried to refresh on its own would fail harmlessly instead of spending the token; the
    /// relay refreshes for it). A test that wants to see such attempts points it at its
    /// endpoint.
    pub codex_refresh_url: Option<String>,
}

/// Where Codex processes of a relay-managed login are told to refresh: nothing listens there
/// (a privileged port, so no unprivileged process can pose as the endpoint).
pub const CODEX_REFRESH_BLOCKED: &str = "http://127.0.0.1:1/codex-relay-refreshes-this-login";

impl Default for LoginOptions {
    fn default() -> Self {
        Self {
            token_url: None,
            client_id: CODEX_CLIENT_ID.into(),
            timeout: Duration::from_secs(20),
            codex_refresh_url: None,
        }
    }
}

/// How the relays sharing the login agree on who refreshes.
pub(crate) enum Coordination {
    /// The relays of one machine: a file lock beside `auth.json`.
    File,
    /// A cluster on Postgres, under this instance's name.
    Postgres { pool: PgPool, instance: String },
}

struct Current {
    tokens: Tokens,
    /// Bumped each time the tokens change (a refresh, or new tokens found in the file).
    generation: u64,
}

/// The shared login; see the module docs. One per relay.
pub struct CodexLogin {
    file: PathBuf,
    lock: PathBuf,
    current: Mutex<Current>,
    /// Single flight: one refresh (or look at the file) at a time in this relay.
    flight: tokio::sync::Mutex<()>,
    coordination: Coordination,
    http: reqwest::Client,
    token_url: String,
    client_id: String,
    timeout: Duration,
    /// The generation each Codex process (by pid) was given last.
    held: Mutex<HashMap<u32, u64>>,
    /// Refreshes this relay made at the endpoint.
    refreshes: AtomicU64,
    /// Times it took tokens another relay (or the `codex` CLI) had put in the file.
    adopted: AtomicU64,
}

impl std::fmt::Debug for CodexLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodexLogin")
            .field("file", &self.file)
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

/// Whether `codex_home` holds a ChatGPT login the relay can share (`auth.json` with tokens).
pub fn has_chatgpt_login(codex_home: &Path) -> Result<bool, LoginError> {
    Ok(auth_file::read(&auth_file::path_in(codex_home))?.is_some())
}

/// The CODEX_HOME Codex uses when none is given: `$CODEX_HOME`, else `~/.codex`.
pub fn default_codex_home() -> Option<PathBuf> {
    std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".codex")))
}

impl CodexLogin {
    /// Reads the login in `codex_home`; an error when there is none.
    pub(crate) fn open(
        codex_home: &Path,
        options: &LoginOptions,
        token_url: String,
        coordination: Coordination,
    ) -> Result<CodexLogin, LoginError> {
        let file = auth_file::path_in(codex_home);
        let found =
            auth_file::read(&file)?.ok_or_else(|| LoginError::NoLogin { path: file.clone() })?;
        Ok(CodexLogin {
            lock: coord::lock_path(codex_home),
            file,
            current: Mutex::new(Current {
                tokens: found.tokens,
                generation: 0,
            }),
            flight: tokio::sync::Mutex::new(()),
            coordination,
            http: oauth::client(options.timeout)?,
            token_url,
            client_id: options.client_id.clone(),
            timeout: options.timeout,
            held: Mutex::default(),
            refreshes: AtomicU64::new(0),
            adopted: AtomicU64::new(0),
        })
    }

    fn lock_held(&self) -> std::sync::MutexGuard<'_, HashMap<u32, u64>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Codex process `pid` was given the tokens of `generation`.
    pub(crate) fn holds(&self, pid: u32, generation: u64) {
        self.lock_held().insert(pid, generation);
    }

    /// Codex process `pid` is gone.
    pub(crate) fn forget(&self, pid: u32) {
        self.lock_held().remove(&pid);
    }

    fn lock_current(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The generation of the tokens this relay holds now.
    pub fn generation(&self) -> u64 {
        self.lock_current().generation
    }

    /// Refreshes this relay made at the token endpoint.
    pub fn refreshes(&self) -> u64 {
        self.refreshes.load(Ordering::Relaxed)
    }

    /// Times this relay took tokens another one had refreshed (found in `auth.json`).
    pub fn adopted(&self) -> u64 {
        self.adopted.load(Ordering::Relaxed)
    }

    /// The tokens to log a Codex in with, and their generation.
    pub fn tokens(&self) -> (ChatgptTokens, u64) {
        let c = self.lock_current();
        (for_codex(&c.tokens), c.generation)
    }

    /// Called before each Codex process starts: refreshes first when Codex would refresh on its
    /// own at start (Codex 0.98 does when `auth.json`'s `last_refresh` is older than 8 days;
    /// 0.169 when the access token's `exp` has passed), so that no process ever does. A failure
    /// is logged; the process then starts with the tokens there are.
    pub async fn ensure_fresh(&self) {
        let (generation, expires) = {
            let c = self.lock_current();
            let exp = auth_file::jwt_claims(&c.tokens.access_token)
                .and_then(|claims| claims.get("exp")?.as_i64());
            (c.generation, exp)
        };
        let last = match auth_file::read(&self.file) {
            Ok(Some(f)) => f
                .doc
                .get("last_refresh")
                .and_then(|v| v.as_str())
                .and_then(auth_file::parse_rfc3339),
            _ => None,
        };
        let now = auth_file::now_secs();
        let expiring = expires.is_some_and(|exp| exp <= now + EXPIRY_MARGIN_SECS);
        let old = last.is_some_and(|t| t < now - STALE_AFTER_SECS);
        if !(expiring || old) {
            return;
        }
        if let Err(e) = self.refresh(generation).await {
            tracing::warn!(
                file = %self.file.display(),
                "the ChatGPT login is due for a refresh and it failed ({e}); Codex starts with the tokens there are"
            );
        }
    }

    /// Fresh tokens for a Codex that holds generation `held` and got a 401 with it. Tokens
    /// newer than `held` are answered as they are; else this waits for the refresh in flight,
    /// or makes the one refresh (unless another relay already did: then its tokens are taken
    /// from `auth.json`).
    pub async fn refresh(&self, held: u64) -> Result<(ChatgptTokens, u64), LoginError> {
        let _flight = self.flight.lock().await;
        {
            let c = self.lock_current();
            if c.generation > held {
                return Ok((for_codex(&c.tokens), c.generation));
            }
        }
        match &self.coordination {
            Coordination::File => {
                let _lock = coord::FileLock::acquire(&self.lock, self.timeout).await?;
                self.refresh_locked(None).await
            }
            Coordination::Postgres { pool, instance } => {
                self.refresh_locked(Some((pool, instance))).await
            }
        }
    }

    /// Under the machine's (or the cluster's) lock: takes newer tokens from the file, else
    /// spends the refresh token.
    async fn refresh_locked(
        &self,
        cluster: Option<(&PgPool, &String)>,
    ) -> Result<(ChatgptTokens, u64), LoginError> {
        let held = self.lock_current().tokens.clone();
        if let Some(adopted) = self.adopt_from_file(&held)? {
            return Ok(adopted);
        }
        let used = auth_file::fingerprint(&held.refresh_token);
        let claim = match cluster {
            None => None,
            Some((pool, instance)) => {
                let account = held.account();
                let claimed = coord::claim(pool, &used, account.as_deref(), instance);
                match tokio::time::timeout(self.timeout, claimed).await {
                    Err(_) => {
                        return Err(LoginError::Busy {
                            what: "the cluster's refresh of the login".into(),
                            waited: self.timeout,
                        });
                    }
                    Ok(Err(e)) => return Err(e),
                    Ok(Ok(coord::Claim::Mine(tx))) => Some((pool, tx)),
                    Ok(Ok(coord::Claim::Spent { by, at })) => {
                        // Spent while this relay waited: the new tokens are in the file.
                        return match self.adopt_from_file(&held)? {
                            Some(adopted) => Ok(adopted),
                            None => Err(LoginError::NotShared {
                                by,
                                at,
                                path: self.file.clone(),
                            }),
                        };
                    }
                }
            }
        };
        let new = oauth::refresh(&self.http, &self.token_url, &self.client_id, &held).await;
        let new = match new {
            Ok(new) => new,
            Err(e) => {
                tracing::warn!(file = %self.file.display(), "refreshing the ChatGPT login failed: {e}");
                return Err(e);
            }
        };
        // The file first: were the commit lost, the others still find the tokens there.
        let doc = auth_file::read(&self.file)?
            .map(|f| f.doc)
            .unwrap_or_default();
        auth_file::write(&self.file, doc, &new)?;
        if let Some((pool, tx)) = claim {
            coord::finish(pool, tx, &used, &auth_file::fingerprint(&new.refresh_token)).await?;
        }
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        let generation = self.replace(new.clone());
        tracing::info!(
            file = %self.file.display(),
            generation,
            "refreshed the ChatGPT login for every Codex of this relay"
        );
        Ok((for_codex(&new), generation))
    }

    /// Tokens in `auth.json` other than `held` (another relay, or the `codex` CLI, refreshed):
    /// taken as the next generation.
    fn adopt_from_file(&self, held: &Tokens) -> Result<Option<(ChatgptTokens, u64)>, LoginError> {
        let Some(on_disk) = auth_file::read(&self.file)? else {
            return Err(LoginError::NoLogin {
                path: self.file.clone(),
            });
        };
        if on_disk.tokens.refresh_token == held.refresh_token {
            return Ok(None);
        }
        self.adopted.fetch_add(1, Ordering::Relaxed);
        let generation = self.replace(on_disk.tokens.clone());
        tracing::info!(
            file = %self.file.display(),
            generation,
            "took the ChatGPT login another relay refreshed"
        );
        Ok(Some((for_codex(&on_disk.tokens), generation)))
    }

    fn replace(&self, tokens: Tokens) -> u64 {
        let mut c = self.lock_current();
        c.tokens = tokens;
        c.generation += 1;
        c.generation
    }
}

/// The answer to an `account/chatgptAuthTokens/refresh` of Codex process `pid`: fresh tokens
/// (recorded as what it holds now), or an error that says why there are none.
pub(crate) async fn answer(
    login: &CodexLogin,
    pid: u32,
    timeout: Duration,
) -> Result<serde_json::Value, codex_relay_protocol::RpcError> {
    let method = codex_relay_protocol::v2::ServerRequest::CHATGPT_AUTH_REFRESH;
    let fail = |message: String| {
        codex_relay_protocol::RpcError::new(
            codex_relay_protocol::RpcError::INTERNAL_ERROR,
            format!("{method}: {message}"),
        )
    };
    // A process the relay did not log in (none such) is treated as holding the newest tokens.
    let held = login.lock_held().get(&pid).copied();
    let held = held.unwrap_or_else(|| login.generation());
    match tokio::time::timeout(timeout, login.refresh(held)).await {
        Ok(Ok((tokens, generation))) => {
            login.holds(pid, generation);
            tracing::info!(pid, held, generation, "gave Codex fresh ChatGPT tokens");
            Ok(serde_json::to_value(&tokens).unwrap_or_default())
        }
        Ok(Err(e)) => {
            tracing::warn!(pid, "Codex asked for fresh ChatGPT tokens: {e}");
            Err(fail(e.to_string()))
        }
        Err(_) => Err(fail(format!("no fresh ChatGPT tokens within {timeout:?}"))),
    }
}

/// What Codex is logged in with: every field both pinned versions read (0.98 the id token,
/// 0.169 the account id and plan).
fn for_codex(t: &Tokens) -> ChatgptTokens {
    let mut out = ChatgptTokens::new(t.access_token.clone()).id_token(t.id_token.clone());
    if let Some(account) = t.account() {
        out = out.account_id(account);
    }
    if let Some(plan) = t.plan() {
        out = out.plan_type(plan);
    }
    out
}

/// `config.auth` with the relay-managed login opened (the others as they are): the login of
/// the relay's CODEX_HOME, coordinated through Postgres when the store is Postgres, else a file
/// lock beside `auth.json`.
pub(crate) fn resolve(
    config: &mut crate::RelayConfig,
    store: &crate::store::Store,
) -> Result<crate::auth::AuthConfig, LoginError> {
    let mut auth = config.auth.clone();
    let Some(crate::auth::Credentials::CodexHomeLogin(wanted)) = &auth.credentials else {
        return Ok(auth);
    };
    let home = config
        .codex
        .codex_home
        .clone()
        .or_else(default_codex_home)
        .ok_or_else(|| LoginError::NoLogin {
            path: PathBuf::from("$CODEX_HOME/auth.json (neither CODEX_HOME nor HOME is set)"),
        })?;
    let coordination = match store.postgres() {
        Some(pool) => Coordination::Postgres {
            pool: pool.clone(),
            instance: config
                .cluster
                .instance_id
                .clone()
                .unwrap_or_else(|| format!("pid-{}", std::process::id())),
        },
        None => Coordination::File,
    };
    let url = token_url(&wanted.options, &config.codex);
    let login = CodexLogin::open(&home, &wanted.options, url, coordination)?;
    let blocked = wanted.options.codex_refresh_url.as_deref();
    config.codex.env.push((
        TOKEN_URL_ENV.into(),
        Some(blocked.unwrap_or(CODEX_REFRESH_BLOCKED).into()),
    ));
    tracing::info!(
        file = %login.file.display(),
        across = if store.postgres().is_some() { "the cluster (Postgres)" } else { "this machine (file lock)" },
        "every Codex of this relay uses the ChatGPT login of its CODEX_HOME, refreshed by the relay"
    );
    let opened = wanted.opened(std::sync::Arc::new(login));
    auth.credentials = Some(crate::auth::Credentials::CodexHomeLogin(opened));
    Ok(auth)
}

/// The token endpoint: the options', else `CODEX_REFRESH_TOKEN_URL_OVERRIDE` as Codex would
/// see it (the environment the relay gives Codex, else the relay's own), else Codex's default.
pub(crate) fn token_url(
    options: &LoginOptions,
    codex: &codex_relay_codex::AppServerConfig,
) -> String {
    if let Some(url) = &options.token_url {
        return url.clone();
    }
    let given = codex
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == TOKEN_URL_ENV)
        .map(|(_, v)| v.clone());
    let url = match given {
        Some(v) => v,
        None => std::env::var_os(TOKEN_URL_ENV),
    };
    url.and_then(|v| v.into_string().ok())
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| DEFAULT_TOKEN_URL.into())
}

#[cfg(test)]
mod tests;
