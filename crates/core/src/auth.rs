//! Credentials for every `codex app-server` the relay starts: an API key or externally managed
//! ChatGPT tokens sent with `account/login/start` right after `initialize` (and again after a
//! restart), and Codex's `account/chatgptAuthTokens/refresh` requests answered by a callback.
//!
//! ```no_run
//! # async fn demo(codex: codex_relay_codex::AppServerConfig) -> Result<(), codex_relay_core::RelayError> {
//! use codex_relay_core::auth::{AuthConfig, ChatgptTokens, Credentials};
//! use codex_relay_core::{Relay, RelayConfig};
//!
//! let mut config = RelayConfig::new(codex, "relay.db");
//! config.auth = AuthConfig::api_key(std::env::var("OPENAI_API_KEY").unwrap_or_default());
//! // Or tokens your application manages, refreshed when Codex gets a 401:
//! config.auth = AuthConfig::chatgpt_tokens(ChatgptTokens::new("access-jwt").account_id("acct"))
//!     .refresher(|_req| async { Ok(ChatgptTokens::new("fresh-jwt").account_id("acct")) });
//! let relay = Relay::open(config).await?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use codex_relay_codex::{AppServer, PeerError, PeerEvent, Subscription};
use codex_relay_protocol::RpcError;
use codex_relay_protocol::v2::ServerRequest;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub use crate::error::AuthError;

/// How Codex authenticates to the model provider.
#[derive(Clone)]
pub enum Credentials {
    /// An OpenAI API key; Codex sends it as the bearer token (and stores it in its
    /// `CODEX_HOME/auth.json`, as `codex login --with-api-key` does).
    ApiKey(String),
    /// ChatGPT tokens your application obtains and refreshes; Codex keeps them in memory only.
    ChatgptTokens(ChatgptTokens),
    /// The ChatGPT login in the relay's `CODEX_HOME/auth.json` (`codex login`), shared by every
    /// Codex the relay starts and refreshed by the relay alone, one refresh at a time across
    /// its processes and the cluster ([`crate::login`]). Opened by [`crate::Relay::open`].
    CodexHomeLogin(CodexHomeLogin),
}

/// The relay-managed login of [`Credentials::CodexHomeLogin`]: its options, and the login
/// itself once the relay opened it.
#[derive(Clone, Debug, Default)]
pub struct CodexHomeLogin {
    pub options: crate::login::LoginOptions,
    live: Option<Arc<crate::login::CodexLogin>>,
}

impl CodexHomeLogin {
    /// The open login (set by [`crate::Relay::open`]).
    pub fn login(&self) -> Option<&Arc<crate::login::CodexLogin>> {
        self.live.as_ref()
    }

    pub(crate) fn opened(&self, login: Arc<crate::login::CodexLogin>) -> Self {
        Self {
            options: self.options.clone(),
            live: Some(login),
        }
    }
}

/// Externally managed ChatGPT tokens. Which fields Codex needs depends on its version: 0.98
/// takes `access_token` + `id_token`, 0.169 takes `access_token` + `account_id` (and an
/// optional `plan_type`). Every field you set is sent; Codex names a missing one.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatgptTokens {
    pub access_token: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id_token: Option<String>,
    #[serde(rename = "chatgptAccountId", skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    #[serde(rename = "chatgptPlanType", skip_serializing_if = "Option::is_none")]
    pub plan_type: Option<String>,
}

impl ChatgptTokens {
    pub fn new(access_token: impl Into<String>) -> Self {
        Self {
            access_token: access_token.into(),
            ..Default::default()
        }
    }

    pub fn id_token(mut self, id_token: impl Into<String>) -> Self {
        self.id_token = Some(id_token.into());
        self
    }

    pub fn account_id(mut self, account_id: impl Into<String>) -> Self {
        self.account_id = Some(account_id.into());
        self
    }

    pub fn plan_type(mut self, plan_type: impl Into<String>) -> Self {
        self.plan_type = Some(plan_type.into());
        self
    }

    /// The JSON object Codex reads (`accessToken`, `idToken`, `chatgptAccountId`, ...).
    fn to_wire(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }
}

impl std::fmt::Debug for ChatgptTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatgptTokens")
            .field("access_token", &"<redacted>")
            .field("id_token", &self.id_token.as_ref().map(|_| "<redacted>"))
            .field("account_id", &self.account_id)
            .field("plan_type", &self.plan_type)
            .finish()
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
            Credentials::ChatgptTokens(t) => f.debug_tuple("ChatgptTokens").field(t).finish(),
            Credentials::CodexHomeLogin(l) => f.debug_tuple("CodexHomeLogin").field(l).finish(),
        }
    }
}

/// What Codex says when it asks for fresh tokens (`account/chatgptAuthTokens/refresh`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefreshRequest {
    /// Why: `unauthorized` (the model server answered 401) is the only reason Codex sends.
    pub reason: String,
    /// The account the rejected token was for, when Codex knows it.
    #[serde(default)]
    pub previous_account_id: Option<String>,
}

/// Produces fresh ChatGPT tokens when Codex asks. `Err(message)` is passed to Codex as the
/// answer's error; the turn that needed the tokens then fails instead of waiting.
pub trait TokenRefresher: Send + Sync {
    fn refresh(&self, request: RefreshRequest)
    -> BoxFuture<'static, Result<ChatgptTokens, String>>;
}

impl<F, Fut> TokenRefresher for F
where
    F: Fn(RefreshRequest) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ChatgptTokens, String>> + Send + 'static,
{
    fn refresh(
        &self,
        request: RefreshRequest,
    ) -> BoxFuture<'static, Result<ChatgptTokens, String>> {
        Box::pin(self(request))
    }
}

/// The relay's authentication settings (`RelayConfig::auth`). The default sends nothing:
/// Codex uses whatever its `CODEX_HOME` already holds.
#[derive(Clone)]
pub struct AuthConfig {
    /// Sent with `account/login/start` after every app-server start.
    pub credentials: Option<Credentials>,
    /// Answers `account/chatgptAuthTokens/refresh`. Without one such requests are refused at
    /// once with an error that says so (an unanswered one would block the turn forever).
    pub refresher: Option<Arc<dyn TokenRefresher>>,
    /// How long the refresher may take before Codex gets an error instead.
    pub refresh_timeout: Duration,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            credentials: None,
            refresher: None,
            refresh_timeout: Duration::from_secs(30),
        }
    }
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("credentials", &self.credentials)
            .field("refresher", &self.refresher.as_ref().map(|_| "<callback>"))
            .field("refresh_timeout", &self.refresh_timeout)
            .finish()
    }
}

impl AuthConfig {
    /// Log in with an OpenAI API key.
    pub fn api_key(key: impl Into<String>) -> Self {
        Self {
            credentials: Some(Credentials::ApiKey(key.into())),
            ..Default::default()
        }
    }

    /// Log in with ChatGPT tokens you manage; add a [`refresher`](Self::refresher).
    pub fn chatgpt_tokens(tokens: ChatgptTokens) -> Self {
        Self {
            credentials: Some(Credentials::ChatgptTokens(tokens)),
            ..Default::default()
        }
    }

    /// Log every Codex in with the ChatGPT login of the relay's `CODEX_HOME/auth.json`,
    /// refreshed by the relay alone ([`Credentials::CodexHomeLogin`]); no refresher needed.
    pub fn codex_home_login(options: crate::login::LoginOptions) -> Self {
        Self {
            credentials: Some(Credentials::CodexHomeLogin(CodexHomeLogin {
                options,
                live: None,
            })),
            ..Default::default()
        }
    }

    /// The relay-managed login, once open.
    pub fn codex_login(&self) -> Option<&Arc<crate::login::CodexLogin>> {
        match &self.credentials {
            Some(Credentials::CodexHomeLogin(l)) => l.login(),
            _ => None,
        }
    }

    /// Sets the callback that answers Codex's token refresh requests.
    pub fn refresher(mut self, refresher: impl TokenRefresher + 'static) -> Self {
        self.refresher = Some(Arc::new(refresher));
        self
    }

    /// The `account/login/start` params for the credentials, if any (for the relay-managed
    /// login: its current tokens, once open).
    pub fn login_params(&self) -> Option<Value> {
        Some(match self.credentials.as_ref()? {
            Credentials::ApiKey(key) => json!({"type": "apiKey", "apiKey": key}),
            Credentials::ChatgptTokens(tokens) => chatgpt_params(tokens),
            Credentials::CodexHomeLogin(l) => chatgpt_params(&l.login()?.tokens().0),
        })
    }
}

fn chatgpt_params(tokens: &ChatgptTokens) -> Value {
    let mut map = tokens.to_wire();
    map.insert("type".into(), json!("chatgptAuthTokens"));
    Value::Object(map)
}

const LOGIN: &str = "account/login/start";
const ACCOUNT_READ: &str = "account/read";

/// Logs a freshly started app-server in with the configured credentials (a no-op without).
pub async fn login(server: &AppServer, auth: &AuthConfig) -> Result<(), AuthError> {
    let params = match &auth.credentials {
        None => return Ok(()),
        Some(Credentials::CodexHomeLogin(l)) => {
            let login = l.login().ok_or(AuthError::NotOpen)?;
            let (tokens, generation) = login.tokens();
            // Before Codex can ask: what this process holds decides whether a 401 of it needs
            // a refresh.
            login.holds(server.pid(), generation);
            chatgpt_params(&tokens)
        }
        Some(_) => auth.login_params().unwrap_or_default(),
    };
    let kind = match auth.credentials {
        Some(Credentials::ApiKey(_)) => "apiKey",
        _ => "chatgptAuthTokens",
    };
    let answer = server
        .peer()
        .request(LOGIN, &params, None)
        .await
        .map_err(|source| AuthError::Login { kind, source })?;
    if answer.get("type").and_then(Value::as_str) != Some(kind) {
        return Err(AuthError::UnexpectedLogin { kind, answer });
    }
    tracing::info!(kind, "logged the app-server in");
    Ok(())
}

/// What `account/read` says about the credentials Codex holds.
#[derive(Debug, Clone, PartialEq)]
pub enum AccountState {
    /// No credentials; `requires_openai_auth` says whether the provider needs any.
    LoggedOut { requires_openai_auth: bool },
    /// Logged in with an API key.
    ApiKey,
    /// Logged in to ChatGPT (Codex-managed or external tokens).
    Chatgpt {
        email: Option<String>,
        plan: Option<String>,
    },
    /// An account kind this relay does not know (Bedrock, ...), as Codex sent it.
    Other(Value),
}

impl std::fmt::Display for AccountState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccountState::LoggedOut {
                requires_openai_auth: true,
            } => f.write_str("not logged in (the model provider needs OpenAI credentials)"),
            AccountState::LoggedOut { .. } => {
                f.write_str("not logged in (the model provider needs none)")
            }
            AccountState::ApiKey => f.write_str("API key"),
            AccountState::Chatgpt { email, plan } => write!(
                f,
                "ChatGPT account {} (plan {})",
                email.as_deref().unwrap_or("(no email)"),
                plan.as_deref().unwrap_or("unknown")
            ),
            AccountState::Other(v) => write!(f, "other account: {v}"),
        }
    }
}

impl AccountState {
    /// Reads an `account/read` answer.
    pub fn from_answer(answer: &Value) -> Self {
        let account = answer.get("account").unwrap_or(&Value::Null);
        let text = |k: &str| account.get(k).and_then(Value::as_str).map(str::to_owned);
        match account.get("type").and_then(Value::as_str) {
            None if account.is_null() => AccountState::LoggedOut {
                requires_openai_auth: answer
                    .get("requiresOpenaiAuth")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            },
            Some("apiKey") => AccountState::ApiKey,
            Some("chatgpt") => AccountState::Chatgpt {
                email: text("email"),
                plan: text("planType"),
            },
            _ => AccountState::Other(account.clone()),
        }
    }
}

/// Codex's notification of the account's rate limits (sent per process, with no thread id).
pub const RATE_LIMITS_UPDATED: &str = "account/rateLimits/updated";

/// Asks Codex which credentials it holds (`account/read`).
pub async fn account_state(server: &AppServer) -> Result<AccountState, PeerError> {
    let answer = server
        .peer()
        .request(ACCOUNT_READ, &json!({}), None)
        .await?;
    Ok(AccountState::from_answer(&answer))
}

/// Takes the app-server's unrouted traffic (thread-less requests and notifications) and answers
/// token refreshes through the callback; every other unrouted request is answered fail-closed,
/// as it would be without a subscriber. Call before [`login`]: Codex may ask at any time.
pub fn serve_unrouted(server: &AppServer, auth: &AuthConfig) {
    let sub = server.peer().subscribe_default();
    tokio::spawn(unrouted_loop(sub, auth.clone(), server.pid(), None));
}

/// As [`serve_unrouted`], and the process's rate-limit notifications (`account/rateLimits/
/// updated`, which carry no thread id) update the relay's rate limits.
pub(crate) fn serve_unrouted_into(
    server: &AppServer,
    auth: &AuthConfig,
    feed: Arc<crate::feed::Feed>,
) {
    let sub = server.peer().subscribe_default();
    tokio::spawn(unrouted_loop(sub, auth.clone(), server.pid(), Some(feed)));
}

async fn unrouted_loop(
    mut sub: Subscription,
    auth: AuthConfig,
    pid: u32,
    feed: Option<Arc<crate::feed::Feed>>,
) {
    while let Some(event) = sub.recv().await {
        match event {
            PeerEvent::Request(req) => match req.request() {
                ServerRequest::ChatgptAuthRefresh(params) => {
                    let params = params.clone();
                    let auth = auth.clone();
                    // The refresher may take a while; the loop goes on reading.
                    tokio::spawn(async move {
                        let answer = match auth.codex_login() {
                            Some(login) => {
                                crate::login::answer(login, pid, auth.refresh_timeout).await
                            }
                            None => refresh_answer(&auth, params).await,
                        };
                        req.responder.respond(answer);
                    });
                }
                ServerRequest::CommandApproval(_)
                | ServerRequest::FileChangeApproval(_)
                | ServerRequest::ToolCall(_)
                | ServerRequest::UserInput(_)
                | ServerRequest::McpElicitation(_)
                | ServerRequest::PermissionsApproval(_)
                | ServerRequest::Unknown { .. } => {
                    req.responder
                        .fail_closed("no session of this relay follows its thread");
                }
            },
            PeerEvent::Notification(n) => {
                tracing::trace!(raw = %n.raw, "unrouted notification");
                if let Some(feed) = &feed
                    && let codex_relay_protocol::v2::ServerNotification::Unknown { method, params } =
                        &n.notification
                    && method == RATE_LIMITS_UPDATED
                {
                    feed.rate_limits.update(params);
                }
            }
            PeerEvent::Closed(_) => break,
        }
    }
    if let Some(login) = auth.codex_login() {
        login.forget(pid);
    }
}

/// The answer to one `account/chatgptAuthTokens/refresh`: the callback's tokens, or an error
/// that says why there are none.
pub async fn refresh_answer(auth: &AuthConfig, params: Value) -> Result<Value, RpcError> {
    let method = ServerRequest::CHATGPT_AUTH_REFRESH;
    let Some(refresher) = auth.refresher.clone() else {
        tracing::warn!("Codex asked for fresh ChatGPT tokens and no refresher is set");
        return Err(RpcError::new(
            RpcError::INTERNAL_ERROR,
            format!(
                "{method}: codex-relay has no token refresher (set AuthConfig::refresher); the tokens cannot be renewed"
            ),
        ));
    };
    let request: RefreshRequest =
        serde_json::from_value(params.clone()).unwrap_or(RefreshRequest {
            reason: params
                .get("reason")
                .map(Value::to_string)
                .unwrap_or_else(|| "unknown".into()),
            previous_account_id: None,
        });
    match tokio::time::timeout(auth.refresh_timeout, refresher.refresh(request)).await {
        Ok(Ok(tokens)) => Ok(Value::Object(tokens.to_wire())),
        Ok(Err(message)) => Err(RpcError::new(
            RpcError::INTERNAL_ERROR,
            format!("{method}: the token refresher failed: {message}"),
        )),
        Err(_) => Err(RpcError::new(
            RpcError::INTERNAL_ERROR,
            format!(
                "{method}: the token refresher did not answer within {:?}",
                auth.refresh_timeout
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_params_carry_every_given_token_field_and_debug_hides_secrets() {
        let auth = AuthConfig::chatgpt_tokens(
            ChatgptTokens::new("acc")
                .id_token("idt")
                .account_id("acct-1"),
        );
        assert_eq!(
            auth.login_params().unwrap(),
            json!({"type": "chatgptAuthTokens", "accessToken": "acc", "idToken": "idt", "chatgptAccountId": "acct-1"})
        );
        assert_eq!(
            AuthConfig::api_key("sk-1").login_params().unwrap(),
            json!({"type": "apiKey", "apiKey": "sk-1"})
        );
        assert_eq!(AuthConfig::default().login_params(), None);
        let shown = format!("{auth:?} {:?}", AuthConfig::api_key("sk-secret"));
        assert!(
            !shown.contains("acc\"") && !shown.contains("idt") && !shown.contains("sk-secret"),
            "{shown}"
        );
    }

    #[tokio::test]
    async fn a_refresh_without_a_refresher_is_refused_with_a_clear_error() {
        let err = refresh_answer(&AuthConfig::default(), json!({"reason": "unauthorized"}))
            .await
            .unwrap_err();
        assert!(
            err.message.contains("no token refresher"),
            "{}",
            err.message
        );
    }

    #[tokio::test]
    async fn a_refresher_sees_the_request_and_its_tokens_are_the_answer() {
        let auth = AuthConfig::default().refresher(|req: RefreshRequest| async move {
            Ok(ChatgptTokens::new(format!(
                "new-for-{}",
                req.previous_account_id.unwrap_or_default()
            ))
            .account_id("acct-1"))
        });
        let answer = refresh_answer(
            &auth,
            json!({"reason": "unauthorized", "previousAccountId": "acct-1"}),
        )
        .await
        .unwrap();
        assert_eq!(
            answer,
            json!({"accessToken": "new-for-acct-1", "chatgptAccountId": "acct-1"})
        );

        let failing =
            AuthConfig::default().refresher(|_| async { Err("vault is sealed".to_owned()) });
        let err = refresh_answer(&failing, json!({"reason": "unauthorized"}))
            .await
            .unwrap_err();
        assert!(err.message.contains("vault is sealed"), "{}", err.message);

        let mut slow = AuthConfig::default().refresher(|_| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(ChatgptTokens::new("late"))
        });
        slow.refresh_timeout = Duration::from_millis(20);
        let err = refresh_answer(&slow, json!({"reason": "unauthorized"}))
            .await
            .unwrap_err();
        assert!(err.message.contains("did not answer"), "{}", err.message);
    }

    #[test]
    fn account_read_answers_of_both_versions_are_understood() {
        assert_eq!(
            AccountState::from_answer(&json!({"account": null, "requiresOpenaiAuth": true})),
            AccountState::LoggedOut {
                requires_openai_auth: true
            }
        );
        assert_eq!(
            AccountState::from_answer(
                &json!({"account": {"type": "apiKey"}, "requiresOpenaiAuth": true})
            ),
            AccountState::ApiKey
        );
        assert_eq!(
            AccountState::from_answer(
                &json!({"account": {"type": "chatgpt", "email": "a@b.c", "planType": "pro"}})
            ),
            AccountState::Chatgpt {
                email: Some("a@b.c".into()),
                plan: Some("pro".into())
            }
        );
        assert!(matches!(
            AccountState::from_answer(&json!({"account": {"type": "gcp"}})),
            AccountState::Other(_)
        ));
    }
}
