//! The browser's round trip through the provider: `GET /login/oidc` starts a sign-in (state,
//! nonce and PKCE verifier kept in the store for ten minutes, single use, so any relay of a
//! cluster can finish it; the state also in a `SameSite=Lax` cookie, so only the browser that
//! started it can), and `GET /login/oidc/callback` finishes it: the code exchanged with the
//! verifier, the ID token checked (signature against the provider's keys, issuer, audience,
//! expiry, nonce), the identity mapped to a user, and this browser signed in as them with a
//! personal token that expires on the server after the SSO login lifetime.

use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use codex_relay_core::people::{AuditEntry, PendingSso, SsoClaims, SsoRefused};
use openidconnect::core::CoreAuthenticationFlow;
use openidconnect::{
    AuthorizationCode, CsrfToken, Nonce, OAuth2TokenResponse, PkceCodeChallenge, PkceCodeVerifier,
    Scope, TokenResponse,
};
use serde::Deserialize;

use super::{Oidc, reason};
use crate::AppState;
use crate::gate::Client;
use crate::ui::{cookie_attrs, cookie_name, escape, page, redirect, safe_next};

/// How long a sign-in may take at the provider.
const PENDING_TTL: std::time::Duration = std::time::Duration::from_secs(600);
/// The cookie that ties a sign-in to the browser that started it (holds its state).
const STATE_COOKIE: &str = "codex_relay_sso";
const SECURE_STATE_COOKIE: &str = "__Secure-codex_relay_sso";

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Start {
    next: Option<String>,
    /// An invitation's code: the sign-in uses it and binds the identity to its new user.
    invite: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    /// RFC 9207: the issuer that sent the browser back, when the provider says.
    iss: Option<String>,
}

fn failed(status: StatusCode, what: &str) -> Response {
    page(
        status,
        &format!(
            "<h1>Single sign-on</h1><p class=\"error\" role=\"alert\" id=\"sso-error\">{}</p>\
             <p><a href=\"/login\">Back to the login page</a></p>",
            escape(what)
        ),
    )
}

fn state_cookie(https: bool, value: &str, max_age: u64) -> Option<HeaderValue> {
    // Lax, not Strict: the provider sends the browser back with a top-level GET from its own
    // site, and a Strict cookie would not come with it.
    let (name, secure) = if https {
        (SECURE_STATE_COOKIE, "; Secure")
    } else {
        (STATE_COOKIE, "")
    };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/login/oidc; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}"
    ))
    .ok()
}

fn state_from_cookie(headers: &HeaderMap, https: bool) -> Option<String> {
    let name = if https {
        SECURE_STATE_COOKIE
    } else {
        STATE_COOKIE
    };
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// The configured provider, or the page saying there is none.
fn oidc(st: &AppState) -> Result<std::sync::Arc<Oidc>, Box<Response>> {
    st.opts.oidc.clone().ok_or_else(|| {
        Box::new(failed(
            StatusCode::NOT_FOUND,
            "Single sign-on is not configured on this relay.",
        ))
    })
}

/// `GET /login/oidc`: off to the provider.
pub(crate) async fn start(
    State(st): State<AppState>,
    client: Option<Extension<Client>>,
    Query(q): Query<Start>,
) -> Response {
    let oidc = match oidc(&st) {
        Ok(o) => o,
        Err(res) => return *res,
    };
    if let Some(c) = client.as_ref()
        && let Err(wait) = oidc.may_start(c.0.ip)
    {
        return crate::gate::throttled(wait);
    }
    let people = st.relay.people();
    let invite_hash = match q.invite.as_deref() {
        Some(code) => match people.invitation_for_sso(code).await {
            Ok(hash) => Some(hash),
            Err(e) => return failed(StatusCode::GONE, &e.to_string()),
        },
        None => None,
    };
    let metadata = match oidc.metadata(false).await {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(target: "codex_relay::security", "single sign-on cannot start: {e}");
            return failed(
                StatusCode::BAD_GATEWAY,
                &format!("The sign-in provider cannot be reached: {e}"),
            );
        }
    };
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let scopes = oidc
        .settings
        .scopes
        .iter()
        .filter(|s| s.as_str() != "openid")
        .map(|s| Scope::new(s.clone()));
    let (url, state, nonce) = oidc
        .client(metadata)
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_scopes(scopes)
        .set_pkce_challenge(challenge)
        .url();
    let pending = PendingSso {
        nonce: nonce.secret().clone(),
        verifier: verifier.secret().clone(),
        next: safe_next(q.next.as_deref()),
        invite_hash,
    };
    if let Err(e) = people
        .begin_sso(state.secret(), &pending, PENDING_TTL)
        .await
    {
        return failed(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("The relay's store cannot keep the sign-in: {e}"),
        );
    }
    let https = client.is_some_and(|c| c.0.https);
    redirect(
        url.as_str(),
        state_cookie(https, state.secret(), PENDING_TTL.as_secs()),
    )
}

/// Counts a wrong or spent state as a failed login of the client's address (like a wrong
/// token at `/login`); past the budget, how long it must wait. A right state is never
/// throttled.
fn guessing(st: &AppState, client: Option<Client>) -> Option<std::time::Duration> {
    let ip = client.map(|c| c.ip)?;
    let creds = &st.opts.credentials;
    let wait = creds.throttled(ip);
    creds.failed(ip);
    wait
}

/// Equal secrets, compared through their hashes (no timing of the comparison leaks them).
fn same_secret(a: &str, b: &str) -> bool {
    codex_relay_core::people::hash_secret(a) == codex_relay_core::people::hash_secret(b)
}

/// `GET /login/oidc/callback`: back from the provider.
pub(crate) async fn callback(
    State(st): State<AppState>,
    client: Option<Extension<Client>>,
    headers: HeaderMap,
    Query(q): Query<Callback>,
) -> Response {
    let oidc = match oidc(&st) {
        Ok(o) => o,
        Err(res) => return *res,
    };
    let client = client.map(|c| c.0);
    let https = client.is_some_and(|c| c.https);
    let mut res = finish(&st, &oidc, client, &headers, q).await;
    // Whatever happened, this browser's sign-in under way is over.
    if let Some(v) = state_cookie(https, "", 0) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    res
}

async fn finish(
    st: &AppState,
    oidc: &Oidc,
    client: Option<Client>,
    headers: &HeaderMap,
    q: Callback,
) -> Response {
    let https = client.is_some_and(|c| c.https);
    let Some(state) = q.state.filter(|s| !s.is_empty()) else {
        return failed(
            StatusCode::BAD_REQUEST,
            "The provider sent no state back; start again from the login page.",
        );
    };
    // The state must be the one this browser's cookie holds: a callback link made by someone
    // else (their sign-in, forwarded) signs nobody in here.
    if !state_from_cookie(headers, https).is_some_and(|c| same_secret(&c, &state)) {
        tracing::info!(target: "codex_relay::security", "single sign-on refused: the state is not this browser's");
        if let Some(wait) = guessing(st, client) {
            return crate::gate::throttled(wait);
        }
        return failed(
            StatusCode::BAD_REQUEST,
            "This sign-in was not started in this browser, or is already over; start again from the login page.",
        );
    }
    let people = st.relay.people();
    let pending = match people.finish_sso(&state).await {
        Ok(Some(p)) => p,
        Ok(None) => {
            tracing::info!(target: "codex_relay::security", "single sign-on refused: the state was used or expired");
            if let Some(wait) = guessing(st, client) {
                return crate::gate::throttled(wait);
            }
            return failed(
                StatusCode::BAD_REQUEST,
                "This sign-in was already used or has expired; start again from the login page.",
            );
        }
        Err(e) => {
            return failed(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("The relay's store cannot finish the sign-in: {e}"),
            );
        }
    };
    // A provider that names itself must be ours (a mix-up with another provider otherwise).
    if let Some(iss) = q.iss.as_deref()
        && iss.trim_end_matches('/') != oidc.issuer().trim_end_matches('/')
    {
        tracing::warn!(target: "codex_relay::security", "single sign-on refused: the callback came from issuer {iss:?}");
        return failed(
            StatusCode::BAD_REQUEST,
            "The sign-in came back from another provider than this relay's.",
        );
    }
    if let Some(error) = q.error {
        let detail = q.error_description.unwrap_or_default();
        return failed(
            StatusCode::UNAUTHORIZED,
            &format!("The provider did not sign you in: {error} {detail}"),
        );
    }
    let Some(code) = q.code.filter(|c| !c.is_empty()) else {
        return failed(StatusCode::BAD_REQUEST, "The provider sent no code back.");
    };
    let claims = match verify(oidc, code, &pending).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(target: "codex_relay::security", "single sign-on refused: {e}");
            return failed(
                StatusCode::UNAUTHORIZED,
                &format!("The sign-in could not be verified: {e}"),
            );
        }
    };
    let policy = oidc.settings.policy;
    let (user, matched) = match people
        .sso_user(&claims, policy, pending.invite_hash.as_deref())
        .await
    {
        Ok(found) => found,
        Err(e) => {
            tracing::info!(target: "codex_relay::security", subject = %claims.subject, "single sign-on refused: {e}");
            let status = match e {
                SsoRefused::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::FORBIDDEN,
            };
            return failed(status, &format!("You cannot sign in here: {e}."));
        }
    };
    let token = match people
        .login_token(
            &user,
            &oidc.settings.display_name,
            oidc.settings.login_lifetime,
        )
        .await
    {
        Ok(t) => t,
        Err(e) => {
            return failed(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("The relay cannot sign you in now: {e}"),
            );
        }
    };
    let mut entry = AuditEntry::new(
        codex_relay_core::people::Person {
            id: user.id.clone(),
            name: user.name.clone(),
            role: user.role,
            front: "ui".into(),
            device: None,
        },
        "user.sign_in",
    );
    entry.ip = client.map(|c| c.ip.to_string());
    entry.detail = Some(serde_json::json!({
        "method": "oidc",
        "issuer": claims.issuer,
        "subject": claims.subject,
        "matched": matched.as_str(),
        "token": token.info.id,
    }));
    if let Err(e) = people.audit(&entry).await {
        tracing::warn!("the audit log did not take a sign-in: {e}");
    }
    tracing::info!(target: "codex_relay::security", user = %user.name, matched = matched.as_str(), "signed in through single sign-on");
    // A page that moves on by itself, not a redirect: the login cookie is SameSite=Strict,
    // and a redirect chain that began at the provider's site would not carry it to `next`.
    let mut res = page(
        StatusCode::OK,
        &format!(
            "<meta http-equiv=\"refresh\" content=\"0;url={next}\"><h1>Signed in</h1>\
             <p>as <b id=\"sso-user\">{name}</b> ({role}).</p><p><a href=\"{next}\">Continue</a></p>",
            next = escape(&pending.next),
            name = escape(&user.name),
            role = user.role
        ),
    );
    let cookie = format!(
        "{}={}; {}; Max-Age={}",
        cookie_name(https),
        token.token,
        cookie_attrs(https),
        oidc.settings.login_lifetime.as_secs()
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    res.into_response()
}

/// Exchanges the code (with the PKCE verifier) and checks the ID token: signed by a key of
/// the provider's, for this client, from this issuer, not expired, with this sign-in's nonce.
async fn verify(oidc: &Oidc, code: String, pending: &PendingSso) -> Result<SsoClaims, String> {
    let metadata = oidc.metadata(false).await?;
    let http = oidc.http.clone();
    let call = move |req| Oidc::call(http.clone(), req);
    let client = oidc.client(metadata);
    let answer = client
        .exchange_code(AuthorizationCode::new(code))
        .map_err(|e| format!("the provider has no token endpoint: {e}"))?
        .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier.clone()))
        .request_async(&call)
        .await
        .map_err(|e| format!("exchanging the code: {}", reason(&e)))?;
    let _ = answer.access_token();
    let id_token = answer
        .id_token()
        .ok_or("the provider sent no ID token")?
        .clone();
    let nonce = Nonce::new(pending.nonce.clone());
    let checked = id_token
        .claims(&client.id_token_verifier(), &nonce)
        .cloned();
    let claims = match checked {
        Ok(c) => c,
        // A key the cached set does not have: the provider rotated its keys; fetch them once.
        Err(openidconnect::ClaimsVerificationError::SignatureVerification(_)) => {
            let client = oidc.client(oidc.metadata(true).await?);
            id_token
                .claims(&client.id_token_verifier(), &nonce)
                .map_err(|e| format!("the ID token: {}", reason(&e)))?
                .clone()
        }
        Err(e) => return Err(format!("the ID token: {}", reason(&e))),
    };
    Ok(SsoClaims {
        issuer: oidc.issuer().to_owned(),
        subject: claims.subject().as_str().to_owned(),
        email: claims.email().map(|e| e.as_str().to_owned()),
        email_verified: claims.email_verified().unwrap_or(false),
        name: claims
            .preferred_username()
            .map(|n| n.as_str().to_owned())
            .or_else(|| {
                claims
                    .name()
                    .and_then(|n| n.get(None))
                    .map(|n| n.as_str().to_owned())
            }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_cookie_is_lax_httponly_and_scoped_to_the_round_trip() {
        let plain = state_cookie(false, "abc", 600).unwrap();
        let plain = plain.to_str().unwrap();
        assert!(plain.starts_with("codex_relay_sso=abc;"), "{plain}");
        for part in [
            "Path=/login/oidc",
            "HttpOnly",
            "SameSite=Lax",
            "Max-Age=600",
        ] {
            assert!(plain.contains(part), "{plain}");
        }
        assert!(!plain.contains("Secure"));
        let secure = state_cookie(true, "abc", 600).unwrap();
        let secure = secure.to_str().unwrap();
        assert!(
            secure.starts_with("__Secure-codex_relay_sso=abc;") && secure.ends_with("; Secure")
        );
    }

    #[test]
    fn the_state_is_read_from_its_own_cookie_only() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("x=1; codex_relay_sso_other=no; codex_relay_sso=yes"),
        );
        assert_eq!(state_from_cookie(&h, false).as_deref(), Some("yes"));
        assert_eq!(state_from_cookie(&h, true), None);
        assert!(same_secret("a", "a") && !same_secret("a", "b"));
    }
}
