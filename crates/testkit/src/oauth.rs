//! A fake ChatGPT OAuth token endpoint on loopback, the one Codex refreshes a ChatGPT login at
//! (`CODEX_REFRESH_TOKEN_URL_OVERRIDE`) and the relay's refresher too. It issues JWT-shaped
//! tokens with the claims Codex reads, rotates the refresh token on every refresh, refuses a
//! spent one as OpenAI does (`refresh_token_reused`), and counts what it got. The scripted
//! model server can be told to accept only the access tokens it currently considers valid
//! ([`crate::ModelServer::require_access`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// The account every token of a server belongs to.
pub const ACCOUNT_ID: &str = "acct-relay-test";
/// What OpenAI's token endpoint answers a spent refresh token (the `code` is what Codex reads).
pub const REUSED_MESSAGE: &str = "Your refresh token has already been used to generate a new access token. Please try signing in again.";

/// One refresh request the endpoint got.
#[derive(Debug, Clone)]
pub struct RefreshRecord {
    pub client_id: Option<String>,
    pub grant_type: Option<String>,
    /// Which generation of refresh token it spent (0 = the one the login started with), or
    /// `None` for a token this server never issued.
    pub generation: Option<u64>,
    /// Whether new tokens were issued (false: refused).
    pub granted: bool,
}

/// One generation of tokens.
#[derive(Debug, Clone)]
pub struct TokenSet {
    pub id_token: String,
    pub access_token: String,
    pub refresh_token: String,
}

struct OAuthState {
    issued: Vec<TokenSet>,
    used: HashSet<String>,
    /// Access tokens the model accepts.
    valid: HashSet<String>,
    records: Vec<RefreshRecord>,
    delay: Duration,
}

impl OAuthState {
    fn issue(&mut self) -> TokenSet {
        let n = self.issued.len();
        let set = TokenSet {
            id_token: jwt(&claims(n, "id")),
            access_token: jwt(&claims(n, "access")),
            refresh_token: format!("rt_relay_test_{n}_{}", nonce()),
        };
        self.valid.insert(set.access_token.clone());
        self.issued.push(set.clone());
        set
    }
}

/// The endpoint; stops when dropped.
pub struct OAuthServer {
    state: Arc<Mutex<OAuthState>>,
    url: String,
    _serving: crate::loopback::Serving,
}

impl OAuthServer {
    /// Binds `127.0.0.1:0`, with generation 0 of the tokens issued.
    pub async fn start() -> Self {
        let mut state = OAuthState {
            issued: Vec::new(),
            used: HashSet::new(),
            valid: HashSet::new(),
            records: Vec::new(),
            delay: Duration::ZERO,
        };
        state.issue();
        let state = Arc::new(Mutex::new(state));
        let app = Router::new()
            .route("/oauth/token", post(token))
            .with_state(state.clone());
        let serving = crate::loopback::serve(app, "oauth server").await;
        let addr = serving.addr;
        Self {
            state,
            url: format!("http://{addr}/oauth/token"),
            _serving: serving,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OAuthState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The token URL (for `CODEX_REFRESH_TOKEN_URL_OVERRIDE` and the relay's refresher).
    pub fn token_url(&self) -> &str {
        &self.url
    }

    /// Answers each refresh only after `delay` (the token is marked spent on arrival), so
    /// concurrent refreshes overlap as they would against a real, slower endpoint.
    pub fn set_delay(&self, delay: Duration) {
        self.lock().delay = delay;
    }

    /// The tokens of generation `n` (0: the login's first).
    pub fn generation(&self, n: usize) -> TokenSet {
        self.lock().issued[n].clone()
    }

    /// How many generations were issued after the first (successful refreshes).
    pub fn generations(&self) -> usize {
        self.lock().issued.len() - 1
    }

    /// Every refresh request received, in order.
    pub fn records(&self) -> Vec<RefreshRecord> {
        self.lock().records.clone()
    }

    /// Refresh requests received (granted or not).
    pub fn refreshes(&self) -> usize {
        self.lock().records.len()
    }

    /// Refresh requests refused because their refresh token was already spent.
    pub fn reused(&self) -> usize {
        let s = self.lock();
        s.records
            .iter()
            .filter(|r| !r.granted && r.generation.is_some())
            .count()
    }

    /// The model rejects every access token issued so far (as if they had expired).
    pub fn expire_access_tokens(&self) {
        self.lock().valid.clear();
    }

    /// Whether the model should accept this access token.
    pub fn accepts(&self, access_token: &str) -> bool {
        self.lock().valid.contains(access_token)
    }

    /// A check for [`crate::ModelServer::require_access`].
    pub fn access_check(&self) -> Arc<dyn Fn(&str) -> bool + Send + Sync> {
        let state = self.state.clone();
        Arc::new(move |token: &str| {
            state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .valid
                .contains(token)
        })
    }

    /// An `auth.json` holding generation `n`, refreshed `age` ago, as `codex login` writes it.
    pub fn auth_json(&self, n: usize, age: Duration) -> Value {
        let set = self.generation(n);
        json!({
            "OPENAI_API_KEY": null,
            "tokens": {
                "id_token": set.id_token,
                "access_token": set.access_token,
                "refresh_token": set.refresh_token,
                "account_id": ACCOUNT_ID,
            },
            "last_refresh": utc(now().saturating_sub(age.as_secs())),
        })
    }

    /// Writes [`auth_json`](Self::auth_json) of generation 0, refreshed a minute ago, into
    /// `codex_home`.
    pub fn write_login(&self, codex_home: &std::path::Path) {
        self.write_login_aged(codex_home, Duration::from_secs(60));
    }

    /// The same, refreshed `age` ago (Codex 0.98 refreshes a login 8 days old at start).
    pub fn write_login_aged(&self, codex_home: &std::path::Path, age: Duration) {
        let text = serde_json::to_string_pretty(&self.auth_json(0, age)).expect("auth.json");
        std::fs::write(codex_home.join("auth.json"), text).expect("write auth.json");
    }
}

async fn token(State(state): State<Arc<Mutex<OAuthState>>>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
    let refresh_token = text("refresh_token").unwrap_or_default();
    let (answer, delay) = {
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        let generation = s
            .issued
            .iter()
            .position(|t| t.refresh_token == refresh_token)
            .map(|n| n as u64);
        let fresh = generation.is_some() && !s.used.contains(&refresh_token);
        let answer = if fresh && text("grant_type").as_deref() == Some("refresh_token") {
            s.used.insert(refresh_token);
            let set = s.issue();
            Ok(json!({
                "id_token": set.id_token, "access_token": set.access_token,
                "refresh_token": set.refresh_token, "token_type": "Bearer", "expires_in": 3600,
            }))
        } else if generation.is_some() {
            Err(
                json!({"error": {"message": REUSED_MESSAGE, "type": "invalid_request_error",
                "param": null, "code": "refresh_token_reused"}}),
            )
        } else {
            Err(json!({"error": {"message": "Invalid refresh token.",
                "type": "invalid_request_error", "param": null, "code": "invalid_grant"}}))
        };
        s.records.push(RefreshRecord {
            client_id: text("client_id"),
            grant_type: text("grant_type"),
            generation,
            granted: answer.is_ok(),
        });
        (answer, s.delay)
    };
    tokio::time::sleep(delay).await;
    match answer {
        Ok(v) => axum::Json(v).into_response(),
        Err(v) => (StatusCode::UNAUTHORIZED, axum::Json(v)).into_response(),
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// `secs` since the epoch as RFC 3339 in UTC.
fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let (era, doe) = (z.div_euclid(146_097), z.rem_euclid(146_097));
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
}

fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(now());
    h.finish()
}

/// The claims Codex reads from a ChatGPT token (email, plan, account, user), valid for an hour.
fn claims(n: usize, kind: &str) -> Value {
    json!({
        "email": "relay-test@example.com",
        "exp": now() + 3600,
        "iat": now(),
        "jti": format!("{kind}-{n}-{}", nonce()),
        "https://api.openai.com/auth": {
            "chatgpt_account_id": ACCOUNT_ID, "chatgpt_plan_type": "pro",
            "chatgpt_user_id": "user-relay-test"
        }
    })
}

/// An unsigned JWT (`header.claims.sig`, base64url without padding, as Codex decodes it).
pub fn jwt(claims: &Value) -> String {
    format!(
        "{}.{}.sig",
        b64url(br#"{"alg":"none","typ":"JWT"}"#),
        b64url(claims.to_string().as_bytes())
    )
}

fn b64url(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| n << 8 | *b as u32) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn post(url: &str, body: Value) -> (u16, Value) {
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/oauth/token");
        let body = body.to_string();
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!(
            "POST /oauth/token HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        tcp.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        tcp.read_to_string(&mut out).await.unwrap();
        let status = out[9..12].parse().unwrap();
        let json = out.split("\r\n\r\n").nth(1).unwrap_or_default();
        (status, serde_json::from_str(json).unwrap_or(Value::Null))
    }

    #[tokio::test]
    async fn a_refresh_token_is_good_once_and_the_reuse_is_refused_as_openai_does() {
        let server = OAuthServer::start().await;
        let first = server.generation(0);
        assert!(server.accepts(&first.access_token));
        let ask = |rt: &str| json!({"client_id": "c", "grant_type": "refresh_token", "refresh_token": rt});
        let (status, body) = post(server.token_url(), ask(&first.refresh_token)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["refresh_token"],
            json!(server.generation(1).refresh_token)
        );
        assert_ne!(body["refresh_token"], json!(first.refresh_token));
        let (status, body) = post(server.token_url(), ask(&first.refresh_token)).await;
        assert_eq!(status, 401);
        assert_eq!(body["error"]["code"], json!("refresh_token_reused"));
        let (status, _) = post(server.token_url(), ask("rt_never_issued")).await;
        assert_eq!(status, 401);
        assert_eq!(
            (server.refreshes(), server.reused(), server.generations()),
            (3, 1, 1)
        );
        server.expire_access_tokens();
        assert!(!server.accepts(&first.access_token));
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_767_225_599), "2025-12-31T23:59:59Z");
    }
}
