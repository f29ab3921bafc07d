//! The client: a relay (one `codex app-server`, the store) built with the same settings as the binary, and the sessions opened on it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use codex_relay_codex::{AppServer, AppServerConfig};
use codex_relay_core::login::LoginRefresh;
use codex_relay_core::store::Retention;
use codex_relay_core::{CreateOptions, Relay, RelayConfig};

use crate::credentials::{AuthConfig, AuthSource};
use crate::error::Error;
use crate::options::SessionOptions;
use crate::result::RunResult;
use crate::session::Session;

/// The libpq variables removed from Codex's environment when the relay's store is Postgres:
/// a password, or where one is kept.
const RELAY_PG_VARS: [&str; 2] = ["PGPASSWORD", "PGPASSFILE"];

/// Settings for a [`Client`]: the same ones `codex-relay serve`/`mcp`/`run` take, with the
/// same defaults. Start from [`ClientBuilder::from_env`] to honour the binary's environment
/// variables (`CODEX_CLI_PATH`, `CODEX_HOME`, `CODEX_RELAY_DATA_DIR`, `CODEX_RELAY_DB`,
/// `APPROVAL_TIMEOUT_MS`, `MAX_SESSIONS`, `EVENT_BUFFER_SIZE`, `CODEX_RELAY_API_KEY_ENV`,
/// `CODEX_RELAY_CHATGPT_TOKENS`, `CODEX_RELAY_LOGIN_REFRESH`).
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    codex: Option<PathBuf>,
    codex_home: Option<PathBuf>,
    data_dir: Option<PathBuf>,
    store: Option<String>,
    approval_timeout: Duration,
    max_sessions: usize,
    event_buffer: usize,
    startup_timeout: Option<Duration>,
    overrides: Vec<String>,
    env: Vec<(OsString, Option<OsString>)>,
    auth: Option<AuthSource>,
    login_refresh: LoginRefresh,
    retention: Retention,
    /// When a Codex process is replaced by a fresh one (docs/OPERATIONS.md).
    recycle: codex_relay_core::RecyclePolicy,
    /// A retention variable that could not be read: [`ClientBuilder::relay_config`] says so.
    retention_error: Option<String>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            codex: None,
            codex_home: None,
            data_dir: None,
            store: None,
            approval_timeout: Duration::from_millis(
                codex_relay_core::config::DEFAULT_APPROVAL_TIMEOUT_MS,
            ),
            max_sessions: codex_relay_core::config::DEFAULT_MAX_SESSIONS,
            event_buffer: codex_relay_core::config::DEFAULT_EVENT_BUFFER,
            startup_timeout: None,
            overrides: Vec::new(),
            env: Vec::new(),
            auth: None,
            login_refresh: LoginRefresh::Auto,
            retention: Retention::default(),
            recycle: Default::default(),
            retention_error: None,
        }
    }
}

fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn env_num<T: std::str::FromStr>(key: &str) -> Option<T> {
    std::env::var(key).ok().and_then(|v| v.trim().parse().ok())
}

impl ClientBuilder {
    /// Defaults only (no environment): `codex` on PATH, Codex's own `CODEX_HOME`, the store in
    /// `$XDG_DATA_HOME/codex-relay/relay.db` (else `~/.local/share/codex-relay/relay.db`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Defaults, overridden by the environment variables the binary reads.
    pub fn from_env() -> Self {
        let mut b = Self::new();
        b.codex = env_path("CODEX_CLI_PATH");
        b.codex_home = env_path("CODEX_HOME");
        b.data_dir = env_path("CODEX_RELAY_DATA_DIR");
        b.store = std::env::var("CODEX_RELAY_DB")
            .ok()
            .filter(|v| !v.is_empty());
        if let Some(ms) = env_num::<u64>("APPROVAL_TIMEOUT_MS") {
            b.approval_timeout = Duration::from_millis(ms);
        }
        if let Some(n) = env_num("MAX_SESSIONS") {
            b.max_sessions = n;
        }
        if let Some(n) = env_num("EVENT_BUFFER_SIZE") {
            b.event_buffer = n;
        }
        if let Some(path) = env_path("CODEX_RELAY_CHATGPT_TOKENS") {
            b = b.chatgpt_tokens_file(path);
        }
        if let Ok(name) = std::env::var("CODEX_RELAY_API_KEY_ENV")
            && !name.is_empty()
        {
            b = b.api_key_env(name);
        }
        if let Some(mode) = std::env::var("CODEX_RELAY_LOGIN_REFRESH")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            b.login_refresh = mode;
        }
        b.retention_from_env();
        b
    }

    /// `CODEX_RELAY_RETENTION` (an age) and `CODEX_RELAY_RETENTION_SIZE` (a size), as the
    /// binary reads them.
    fn retention_from_env(&mut self) {
        let read = |key: &str| std::env::var(key).ok().filter(|v| !v.trim().is_empty());
        if let Some(v) = read("CODEX_RELAY_RETENTION") {
            match Retention::parse_age(&v) {
                Ok(age) => self.retention.max_age = age,
                Err(e) => self.retention_error = Some(format!("CODEX_RELAY_RETENTION={e}")),
            }
        }
        if let Some(v) = read("CODEX_RELAY_RETENTION_SIZE") {
            match Retention::parse_size(&v) {
                Ok(size) => self.retention.max_bytes = size,
                Err(e) => self.retention_error = Some(format!("CODEX_RELAY_RETENTION_SIZE={e}")),
            }
        }
    }

    /// How long (and up to what size) the store keeps events, resolved requests and sent
    /// notifications (docs/STORE.md, "Retention"). Default: everything, for good.
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self.retention_error = None;
        self
    }

    /// Limits per Codex process (memory, turns, age) past which it is replaced by a fresh one
    /// once its sessions are idle (docs/OPERATIONS.md, "Recycling Codex processes"). Default:
    /// none.
    pub fn recycle(mut self, policy: codex_relay_core::RecyclePolicy) -> Self {
        self.recycle = policy;
        self
    }

    /// Who refreshes the ChatGPT login of CODEX_HOME when no other credentials are given
    /// (default [`LoginRefresh::Auto`]: the relay, when `auth.json` holds one, so the processes
    /// of this client never spend its single-use refresh token twice). Also
    /// `CODEX_RELAY_LOGIN_REFRESH=auto|relay|codex` with [`from_env`](Self::from_env).
    pub fn login_refresh(mut self, mode: LoginRefresh) -> Self {
        self.login_refresh = mode;
        self
    }

    /// The credentials in effect: the ones given, else the ChatGPT login of CODEX_HOME as
    /// [`login_refresh`](Self::login_refresh) decides.
    fn effective_auth(&self) -> Result<Option<AuthSource>, Error> {
        let mode = self.login_refresh;
        if let Some(given) = &self.auth {
            if mode == LoginRefresh::Relay {
                return Err(Error::setup(
                    "login refresh `relay` uses the ChatGPT login of CODEX_HOME; it cannot be combined with other credentials (--api-key-env, --chatgpt-tokens)",
                ));
            }
            return Ok(Some(given.clone()));
        }
        if mode == LoginRefresh::Codex {
            return Ok(None);
        }
        let home = self
            .codex_home
            .clone()
            .or_else(codex_relay_core::login::default_codex_home);
        let Some(home) = home else {
            return match mode {
                LoginRefresh::Relay => Err(Error::setup(
                    "login refresh `relay`: no CODEX_HOME (set it, or HOME)",
                )),
                _ => Ok(None),
            };
        };
        match codex_relay_core::login::has_chatgpt_login(&home) {
            Ok(true) => Ok(Some(AuthSource::CodexHomeLogin(home))),
            Ok(false) if mode == LoginRefresh::Relay => Err(Error::setup(format!(
                "login refresh `relay`: {} holds no ChatGPT login (run `codex login` with CODEX_HOME={})",
                home.join("auth.json").display(),
                home.display()
            ))),
            Ok(false) => Ok(None),
            Err(e) if mode == LoginRefresh::Relay => {
                Err(Error::setup(format!("login refresh `relay`: {e}")))
            }
            Err(e) => {
                tracing::warn!("not sharing the ChatGPT login of CODEX_HOME: {e}");
                Ok(None)
            }
        }
    }

    /// The `codex` executable (default: `codex` on PATH, else the pinned Codex the scripts
    /// install into `~/.cache/codex-relay`).
    pub fn codex_binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.codex = Some(path.into());
        self
    }

    /// `CODEX_HOME` for Codex (default: Codex's own, usually `~/.codex`).
    pub fn codex_home(mut self, path: impl Into<PathBuf>) -> Self {
        self.codex_home = Some(path.into());
        self
    }

    /// The directory of the default SQLite store (`relay.db` in it).
    pub fn data_dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(path.into());
        self
    }

    /// The store: a SQLite path or URL, or a `postgres://` URL. Sessions kept there can be
    /// continued by `codex-relay` (`run --resume`, MCP, HTTP) and by other clients.
    pub fn store(mut self, target: impl Into<String>) -> Self {
        self.store = Some(target.into());
        self
    }

    /// How long a request nobody answers waits before it is declined (default 300 s).
    pub fn approval_timeout(mut self, timeout: Duration) -> Self {
        self.approval_timeout = timeout;
        self
    }

    /// Sessions open at once (default 32).
    pub fn max_sessions(mut self, n: usize) -> Self {
        self.max_sessions = n.max(1);
        self
    }

    /// Events per session kept in memory; the rest is read from the store (default 1000).
    pub fn event_buffer(mut self, n: usize) -> Self {
        self.event_buffer = n;
        self
    }

    /// How long Codex may take to start and finish the `initialize` handshake (default 30 s:
    /// on a loaded machine its start-up alone has taken over 10 s).
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = Some(timeout);
        self
    }

    /// A `-c key=value` override for the `codex app-server` process (TOML value).
    pub fn codex_config(mut self, key_value: impl Into<String>) -> Self {
        self.overrides.push(key_value.into());
        self
    }

    /// An environment variable for Codex (`None` removes it).
    pub fn codex_env(mut self, key: impl Into<OsString>, value: Option<OsString>) -> Self {
        self.env.push((key.into(), value));
        self
    }

    /// The credentials every Codex this client starts is logged in with (`account/login/start`
    /// right after its handshake, again after a restart), and the token refresh callback. The
    /// default sends none: Codex uses what its `CODEX_HOME` holds (`codex login`). The last
    /// of [`auth`](Self::auth), [`api_key_env`](Self::api_key_env) and
    /// [`chatgpt_tokens_file`](Self::chatgpt_tokens_file) wins.
    pub fn auth(mut self, auth: AuthConfig) -> Self {
        self.auth = Some(AuthSource::Given(auth));
        self
    }

    /// Log Codex in with the API key held by the environment variable `name` (read when the
    /// client is built; unset or empty is an error naming the variable). Codex keeps the key in
    /// its `CODEX_HOME/auth.json`. Also `CODEX_RELAY_API_KEY_ENV=NAME` with
    /// [`from_env`](Self::from_env).
    pub fn api_key_env(mut self, name: impl Into<String>) -> Self {
        self.auth = Some(AuthSource::ApiKeyEnv(name.into()));
        self
    }

    /// Log Codex in with ChatGPT tokens from a JSON file, read again whenever Codex asks for
    /// fresh ones (see [`crate::credentials::chatgpt_tokens_from_file`]). Also
    /// `CODEX_RELAY_CHATGPT_TOKENS=FILE` with [`from_env`](Self::from_env).
    pub fn chatgpt_tokens_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.auth = Some(AuthSource::TokensFile(path.into()));
        self
    }

    /// Where the credentials come from, in words that never include a secret (`none`, `an
    /// API key from $OPENAI_API_KEY`, ...), for diagnostics.
    pub fn auth_source(&self) -> String {
        match self.effective_auth() {
            Ok(Some(source)) => source.describe(),
            Ok(None) => "none (Codex uses what its CODEX_HOME holds)".into(),
            Err(e) => format!("invalid: {e}"),
        }
    }

    /// The data directory these settings select (where the SQLite store and `serve`'s files
    /// live); creates nothing.
    pub fn data_dir_target(&self) -> PathBuf {
        self.data_dir.clone().unwrap_or_else(default_data_dir)
    }

    /// The store these settings select: the one given, else `relay.db` in the data directory
    /// (creates nothing; [`ClientBuilder::relay_config`] creates that directory).
    pub fn store_target(&self) -> String {
        match &self.store {
            Some(s) => s.clone(),
            None => self
                .data_dir
                .clone()
                .unwrap_or_else(default_data_dir)
                .join("relay.db")
                .display()
                .to_string(),
        }
    }

    /// The engine configuration these settings make (what [`ClientBuilder::build`] opens).
    pub fn relay_config(&self) -> Result<RelayConfig, Error> {
        let binary = match &self.codex {
            Some(b) => b.clone(),
            None => codex_relay_codex::locate::find_default()
                .map(|(path, _)| path)
                .ok_or_else(|| {
                    Error::setup(format!(
                        "{} (ClientBuilder::codex_binary)",
                        codex_relay_codex::locate::install_advice()
                    ))
                })?,
        };
        let mut codex = AppServerConfig::new(binary);
        codex.codex_home = self.codex_home.clone();
        codex
            .config_overrides
            .extend(self.overrides.iter().cloned());
        codex.env.extend(self.env.iter().cloned());
        // Codex is logged in with the key; neither it nor the commands it runs need the
        // variable that holds it.
        if let Some(AuthSource::ApiKeyEnv(name)) = &self.auth {
            codex.env.push((name.into(), None));
        }
        // With a Postgres store, the libpq variables that may hold or point at the relay's own
        // password (the driver reads them to complete the URL) are the relay's: with its
        // database a command could write an answer to its own approval.
        let store = self.store_target().to_ascii_lowercase();
        if store.starts_with("postgres://") || store.starts_with("postgresql://") {
            for name in RELAY_PG_VARS {
                codex.env.push((name.into(), None));
            }
        }
        if let Some(t) = self.startup_timeout {
            codex.startup_timeout = t;
        }
        if self.store.is_none() {
            let dir = self.data_dir.clone().unwrap_or_else(default_data_dir);
            std::fs::create_dir_all(&dir).map_err(|e| {
                Error::setup(format!(
                    "creating the data directory {}: {e}",
                    dir.display()
                ))
            })?;
        }
        if let Some(e) = &self.retention_error {
            return Err(Error::setup(e.clone()));
        }
        let mut config = RelayConfig::new(codex, self.store_target());
        config.store_options.retention = self.retention.clone();
        config.recycle = self.recycle.clone();
        config.approval_timeout = self.approval_timeout;
        config.max_sessions = self.max_sessions.max(1);
        config.event_buffer = self.event_buffer;
        // Sessions' git worktrees live in the relay's own data directory.
        config.worktree_dir = Some(self.data_dir_target().join("worktrees"));
        if let Some(auth) = self.effective_auth()? {
            config.auth = auth.resolve()?;
        }
        Ok(config)
    }

    /// Opens the store and the engine. Codex itself starts with the first session.
    pub async fn build(self) -> Result<Client, Error> {
        let relay = Relay::open(self.relay_config()?).await?;
        Ok(Client::from_relay(relay))
    }
}

fn default_data_dir() -> PathBuf {
    if let Some(d) = env_path("XDG_DATA_HOME") {
        return d.join("codex-relay");
    }
    let home = env_path("HOME").unwrap_or_else(std::env::temp_dir);
    home.join(".local").join("share").join("codex-relay")
}

/// A handle to the engine: one `codex app-server` (started on first use, restarted if it
/// dies), the store, and every session opened through it. Cheap to clone.
///
/// ```no_run
/// # async fn demo() -> Result<(), codex_relay::Error> {
/// use codex_relay::{Client, SessionOptions};
///
/// let client = Client::builder().build().await?;
/// let session = client.session(SessionOptions::new().cwd("/path/to/repo")).await?;
/// let result = session.run("Which files define the public API?").await?;
/// println!("{}", result.text);
/// client.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    relay: Relay,
    servers: Servers,
}

/// The app-servers this client's runs used, so [`Client::shutdown`] can find what they left.
#[derive(Clone, Default)]
pub(crate) struct Servers(Arc<Mutex<Vec<Weak<AppServer>>>>);

impl Servers {
    pub(crate) fn note(&self, server: &Arc<AppServer>) {
        let mut list = self.0.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|w| w.strong_count() > 0);
        if !list.iter().any(|w| w.as_ptr() == Arc::as_ptr(server)) {
            list.push(Arc::downgrade(server));
        }
    }

    fn live(&self) -> Vec<Arc<AppServer>> {
        let list = self.0.lock().unwrap_or_else(|e| e.into_inner());
        list.iter()
            .filter_map(Weak::upgrade)
            .filter(|s| s.exit_info().is_none())
            .collect()
    }
}

impl Client {
    /// Settings from the environment, as the binary reads them ([`ClientBuilder::from_env`]).
    pub fn builder() -> ClientBuilder {
        ClientBuilder::from_env()
    }

    /// A client over an engine you opened yourself (for instance one that also serves MCP or
    /// HTTP in the same process): its sessions are visible to every front.
    pub fn from_relay(relay: Relay) -> Self {
        Self {
            relay,
            servers: Servers::default(),
        }
    }

    /// The engine underneath, for everything this API does not wrap (events since a cursor,
    /// pending requests, listing).
    pub fn relay(&self) -> &Relay {
        &self.relay
    }

    /// Writes session `id`'s whole history to `out` as JSON lines, page by page: a `session`
    /// line, one `event` line per logged event, one `request` line per request with its
    /// resolution (docs/STORE.md, "Retention": keep it before the store prunes it; the HTTP
    /// front serves the same at `GET /api/sessions/{id}/export`).
    pub async fn export(
        &self,
        id: &str,
        out: &mut (impl tokio::io::AsyncWrite + Unpin),
    ) -> Result<(), Error> {
        use tokio::io::AsyncWriteExt;
        let mut export = self.relay.export(id).await?;
        while let Some(chunk) = export.next_chunk().await {
            out.write_all(chunk?.as_bytes())
                .await
                .map_err(|e| Error::setup(format!("writing the export of {id}: {e}")))?;
        }
        out.flush()
            .await
            .map_err(|e| Error::setup(format!("writing the export of {id}: {e}")))
    }

    /// The models Codex offers (hidden ones too with `include_hidden`), with the reasoning
    /// efforts each takes: what [`SessionOptions::model`] and [`SessionOptions::effort`] take.
    pub async fn models(
        &self,
        include_hidden: bool,
    ) -> Result<Vec<codex_relay_core::ModelInfo>, Error> {
        Ok(self.relay.models(include_hidden).await?)
    }

    /// Opens a new session (a new Codex thread) with `options`; no turn runs yet.
    /// With [`SessionOptions::workspace`], the session works in a fresh isolated copy.
    pub async fn session(&self, options: SessionOptions) -> Result<Session, Error> {
        let create = options.create_options();
        let (handle, workspace) = match &options.workspace {
            Some(spec) => {
                let ((handle, _), ws) = self.relay.create_isolated(spec, create).await?;
                (handle, Some(ws))
            }
            None => (self.relay.create(create).await?.0, None),
        };
        Ok(Session::new(
            self.relay.clone(),
            self.servers.clone(),
            handle,
            options,
            workspace,
        ))
    }

    /// Continues a session by id: one of this store's, or any Codex thread id, which Codex
    /// resumes. `options` give the approval policy, deadline and grace for its runs; the
    /// thread keeps its own model and sandbox, and tools are not offered again.
    ///
    /// Where it works: with [`SessionOptions::workspace`], in a fresh copy of that spec's
    /// mounts; else with [`SessionOptions::cwd`], in that directory; else a session created
    /// in an isolated workspace gets a fresh copy of the same mounts (its old copy is gone,
    /// and what the earlier runs wrote there is not brought back); else where it was. The new
    /// directory goes to Codex as `cwd` on `thread/resume` and on the next `turn/start`.
    pub async fn resume(&self, id: &str, options: SessionOptions) -> Result<Session, Error> {
        let (handle, workspace) = match (&options.workspace, &options.cwd) {
            (Some(spec), _) => self.relay.resume_isolated(id, Some(spec)).await?,
            (None, Some(cwd)) => (self.relay.resume_in(id, Some(cwd)).await?, None),
            (None, None) => self.relay.resume_isolated(id, None).await?,
        };
        Ok(Session::new(
            self.relay.clone(),
            self.servers.clone(),
            handle,
            options,
            workspace,
        ))
    }

    /// One prompt in a new session with `options`: the shortest way to a result. The session
    /// is closed afterwards, so one-shot runs do not pile up against `max_sessions`; its thread
    /// stays in the store (`RunResult::session_id`) for `codex-relay run --resume` or a later
    /// client. For a conversation, use [`Client::session`].
    pub async fn run(
        &self,
        options: SessionOptions,
        prompt: impl Into<String>,
    ) -> Result<RunResult, Error> {
        let session = self.session(options).await?;
        let result = session.run(prompt).await;
        if let Err(e) = session.close().await {
            tracing::debug!("closing a one-shot session: {e}");
        }
        result
    }

    /// Stops Codex (its whole process group, and the commands Codex 0.169 runs outside it in
    /// its sandbox helper) and flushes the store. Sessions stay in the store and can be resumed
    /// by a later client.
    pub async fn shutdown(&self) {
        let left: Vec<_> = self
            .servers
            .live()
            .iter()
            .flat_map(|s| codex_relay_codex::platform::tree::descendants(s.pid()))
            .collect();
        self.relay.shutdown().await;
        // What outlived its app-server: asked to stop, killed after a short grace.
        use codex_relay_codex::platform::tree;
        let left = tree::stop(0, None, &left, tree::STOP_GRACE);
        if left.any_left() {
            tokio::time::sleep(tree::STOP_GRACE).await;
            left.kill_now();
        }
    }
}

impl SessionOptions {
    pub(crate) fn create_options(&self) -> CreateOptions {
        CreateOptions {
            cwd: self.cwd.clone(),
            model: self.model.clone(),
            effort: self.effort.clone(),
            approval_policy: Some(self.approval.codex_policy()),
            sandbox: Some(self.sandbox),
            config: (!self.config.is_empty()).then(|| self.config.clone()),
            profile: self.profile.clone(),
            base_instructions: self.base_instructions.clone(),
            developer_instructions: self.developer_instructions.clone(),
            dynamic_tools: self.tools.iter().map(|t| t.to_dynamic()).collect(),
            budget: self.budget,
            prices: self.prices,
            worktree: self.worktree.clone().map(|mut w| {
                if w.repo.is_empty() {
                    w.repo = self.cwd.clone().unwrap_or_else(|| ".".into());
                }
                w.repo = codex_relay_core::api::start::absolute(&w.repo, None)
                    .display()
                    .to_string();
                w
            }),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn removed(b: &ClientBuilder) -> Vec<String> {
        let config = b.relay_config().unwrap();
        config
            .codex
            .env
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_postgres_store_keeps_its_password_variables_from_codex() {
        let b = ClientBuilder::new()
            .codex_binary("/bin/true")
            .store("postgres://relay@db.example/relay");
        let gone = removed(&b);
        for name in RELAY_PG_VARS {
            assert!(
                gone.iter().any(|g| g == name),
                "{name} reaches Codex: {gone:?}"
            );
        }
        // A SQLite store leaves them to the commands (they may be the user's own database's).
        let dir = tempfile::tempdir().unwrap();
        let b = ClientBuilder::new()
            .codex_binary("/bin/true")
            .store(dir.path().join("relay.db").display().to_string());
        assert!(!removed(&b).iter().any(|g| g.starts_with("PG")));
    }
}
