//! OpenID Connect single sign-on: the provider as configured (issuer, client, scopes, who an
//! identity may be), its discovery document fetched and kept a while, and the HTTP client
//! the protocol uses (reqwest with rustls and ring, no redirects followed, bounded answers).
//! The browser's round trip is [`flow`]; admins bind identities to users in [`identities`].
//! docs/SECURITY.md "Single sign-on".

pub(crate) mod flow;
pub(crate) mod identities;

use std::sync::Arc;
use std::time::{Duration, Instant};

use codex_relay_core::people::SsoPolicy;
use openidconnect::core::{CoreClient, CoreProviderMetadata};
use openidconnect::{
    ClientId, ClientSecret, EndpointMaybeSet, EndpointNotSet, EndpointSet, HttpRequest,
    HttpResponse, IssuerUrl, RedirectUrl,
};

use crate::AppState;

/// How long a discovery document (and the keys it names) is kept before it is fetched again.
const METADATA_TTL: Duration = Duration::from_secs(600);
/// The largest answer read from the provider.
const MAX_ANSWER: usize = 1 << 20;
/// Sign-ins one address may start a minute (each keeps a row in the store for ten minutes).
const STARTS_PER_MINUTE: usize = 30;
/// Addresses remembered for that count.
const STARTS_CLIENTS: usize = 10_000;
/// The path the provider sends the browser back to.
pub const CALLBACK_PATH: &str = "/login/oidc/callback";

/// What `serve` configures.
#[derive(Clone)]
pub struct OidcSettings {
    /// The issuer URL; its discovery document is `<issuer>/.well-known/openid-configuration`.
    pub issuer: String,
    pub client_id: String,
    /// From a file or the environment, never the command line; `None`: a public client
    /// (PKCE alone).
    pub client_secret: Option<String>,
    /// The relay's public URL (the callback is under it).
    pub public_url: String,
    pub scopes: Vec<String>,
    /// What the login page's button names ("Sign in with <name>").
    pub display_name: String,
    pub policy: SsoPolicy,
    /// How long an SSO browser login lasts (on the server: its token expires).
    pub login_lifetime: Duration,
}

impl std::fmt::Debug for OidcSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSettings")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<set>"),
            )
            .field("public_url", &self.public_url)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// Why the settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("the OIDC issuer {0:?} is not a URL")]
    Issuer(String),
    #[error("the OIDC issuer must be https (plain http only on loopback, for tests): {0:?}")]
    Insecure(String),
    #[error("the relay's public URL {0:?} is not an http(s) URL")]
    PublicUrl(String),
    #[error("building the HTTP client for the OIDC provider: {0}")]
    Client(String),
}

/// A client as built from the provider's metadata (authorize and token endpoints known).
type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// The configured provider: settings, the HTTP client, the discovery document kept a while.
pub struct Oidc {
    settings: OidcSettings,
    issuer: IssuerUrl,
    redirect: RedirectUrl,
    http: reqwest::Client,
    metadata: tokio::sync::Mutex<Option<(Instant, CoreProviderMetadata)>>,
    /// When each address started its recent sign-ins.
    starts: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, Vec<Instant>>>,
}

fn loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// The reason a provider call failed, said without any secret (reqwest's errors name the
/// URL, never the body; the library's errors name what did not match).
fn reason(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// A failed call to the provider.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CallError(String);

impl Oidc {
    pub fn new(settings: OidcSettings) -> Result<Arc<Self>, SettingsError> {
        let issuer_url = url::Url::parse(settings.issuer.trim())
            .map_err(|_| SettingsError::Issuer(settings.issuer.clone()))?;
        if issuer_url.scheme() != "https"
            && !(issuer_url.scheme() == "http" && loopback(&issuer_url))
        {
            return Err(SettingsError::Insecure(settings.issuer.clone()));
        }
        let public = url::Url::parse(settings.public_url.trim())
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .ok_or_else(|| SettingsError::PublicUrl(settings.public_url.clone()))?;
        let redirect = public
            .join(CALLBACK_PATH)
            .map_err(|_| SettingsError::PublicUrl(settings.public_url.clone()))?;
        // reqwest is built without a TLS provider of its own: rustls with ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(15))
            // A redirect from the provider's endpoints is not followed (no SSRF through it).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| SettingsError::Client(e.to_string()))?;
        Ok(Arc::new(Self {
            issuer: IssuerUrl::new(settings.issuer.trim().to_owned())
                .map_err(|_| SettingsError::Issuer(settings.issuer.clone()))?,
            redirect: RedirectUrl::from_url(redirect),
            settings,
            http,
            metadata: tokio::sync::Mutex::new(None),
            starts: Default::default(),
        }))
    }

    /// Whether `ip` may start another sign-in now; else how long it must wait.
    pub(crate) fn may_start(&self, ip: std::net::IpAddr) -> Result<(), Duration> {
        const MINUTE: Duration = Duration::from_secs(60);
        let mut starts = self.starts.lock().unwrap_or_else(|e| e.into_inner());
        if starts.len() >= STARTS_CLIENTS && !starts.contains_key(&ip) {
            starts.retain(|_, at| at.iter().any(|t| t.elapsed() < MINUTE));
            if starts.len() >= STARTS_CLIENTS {
                return Err(MINUTE);
            }
        }
        let at = starts.entry(ip).or_default();
        at.retain(|t| t.elapsed() < MINUTE);
        if at.len() >= STARTS_PER_MINUTE {
            return Err(MINUTE.saturating_sub(at[0].elapsed()));
        }
        at.push(Instant::now());
        Ok(())
    }

    pub fn settings(&self) -> &OidcSettings {
        &self.settings
    }

    /// The issuer, as configured (what identities are bound under).
    pub fn issuer(&self) -> &str {
        self.issuer.as_str()
    }

    /// The callback URL the provider must have registered for this client.
    pub fn redirect_url(&self) -> &str {
        self.redirect.as_str()
    }

    /// One HTTP call for the protocol library.
    async fn call(http: reqwest::Client, req: HttpRequest) -> Result<HttpResponse, CallError> {
        let (parts, body) = req.into_parts();
        let res = http
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body)
            .send()
            .await
            .map_err(|e| CallError(reason(&e)))?;
        let status = res.status();
        let headers = res.headers().clone();
        if res.content_length().is_some_and(|n| n > MAX_ANSWER as u64) {
            return Err(CallError("the provider's answer is too large".into()));
        }
        let mut body = Vec::new();
        let mut res = res;
        while let Some(chunk) = res.chunk().await.map_err(|e| CallError(reason(&e)))? {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(CallError("the provider's answer is too large".into()));
            }
            body.extend_from_slice(&chunk);
        }
        let mut out = HttpResponse::new(body);
        *out.status_mut() = status;
        *out.headers_mut() = headers;
        Ok(out)
    }

    /// The provider's discovery document (and its keys), fetched when missing or stale;
    /// `fresh` fetches it now (a key the cached set does not have).
    async fn metadata(&self, fresh: bool) -> Result<CoreProviderMetadata, String> {
        let mut kept = self.metadata.lock().await;
        if !fresh
            && let Some((at, m)) = kept.as_ref()
            && at.elapsed() < METADATA_TTL
        {
            return Ok(m.clone());
        }
        let http = self.http.clone();
        let client = move |req| Self::call(http.clone(), req);
        // The library checks the document's `issuer` is the one configured.
        let m = CoreProviderMetadata::discover_async(self.issuer.clone(), &client)
            .await
            .map_err(|e| {
                format!(
                    "discovering the provider at {}: {}",
                    self.issuer.as_str(),
                    reason(&e)
                )
            })?;
        *kept = Some((Instant::now(), m.clone()));
        Ok(m)
    }

    fn client(&self, m: CoreProviderMetadata) -> Client {
        CoreClient::from_provider_metadata(
            m,
            ClientId::new(self.settings.client_id.clone()),
            self.settings.client_secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(self.redirect.clone())
    }
}

/// The login page's "Sign in with <provider>" link, when SSO is configured; its own element
/// so other sign-in methods sit beside it.
pub(crate) fn login_button(st: &AppState, next: &str) -> String {
    let Some(oidc) = st.opts.oidc.as_ref() else {
        return String::new();
    };
    let href = format!(
        "/login/oidc?next={}",
        url::form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>()
    );
    format!(
        r#"<section class="sso" aria-label="Single sign-on"><p><a class="button" id="sso" href="{}">Sign in with {}</a></p></section>"#,
        crate::ui::escape(&href),
        crate::ui::escape(&oidc.settings.display_name)
    )
}

/// The invitation page's "Accept with <provider>" link: the sign-in uses the invitation and
/// binds the identity to its new user. Not offered for an invitation limited to sessions (a
/// sign-in's login cannot keep that limit).
pub(crate) fn invite_button(st: &AppState, code: &str, unlimited: bool) -> String {
    let Some(oidc) = st.opts.oidc.as_ref().filter(|_| unlimited) else {
        return String::new();
    };
    let href = format!(
        "/login/oidc?invite={}",
        url::form_urlencoded::byte_serialize(code.as_bytes()).collect::<String>()
    );
    format!(
        r#"<p><a class="button" id="sso-invite" href="{}">Accept with {}</a></p>"#,
        crate::ui::escape(&href),
        crate::ui::escape(&oidc.settings.display_name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(issuer: &str, public_url: &str) -> OidcSettings {
        OidcSettings {
            issuer: issuer.into(),
            client_id: "relay".into(),
            client_secret: Some("s3cret-value".into()),
            public_url: public_url.into(),
            scopes: vec!["openid".into()],
            display_name: "Corp <ID>".into(),
            policy: SsoPolicy::default(),
            login_lifetime: Duration::from_secs(3600),
        }
    }

    #[test]
    fn the_issuer_is_https_or_loopback_and_the_callback_is_under_the_public_url() {
        let o = Oidc::new(settings(
            "https://id.example.com",
            "https://relay.example.com/",
        ))
        .unwrap();
        assert_eq!(
            o.redirect_url(),
            "https://relay.example.com/login/oidc/callback"
        );
        assert!(Oidc::new(settings("http://localhost:9000", "http://127.0.0.1:7878")).is_ok());
        assert!(Oidc::new(settings("http://[::1]:9000", "http://127.0.0.1:7878")).is_ok());
        assert!(matches!(
            Oidc::new(settings(
                "http://id.example.com",
                "https://relay.example.com"
            )),
            Err(SettingsError::Insecure(_))
        ));
        assert!(matches!(
            Oidc::new(settings("not a url", "https://relay.example.com")),
            Err(SettingsError::Issuer(_))
        ));
        assert!(matches!(
            Oidc::new(settings("https://id.example.com", "relay.example.com")),
            Err(SettingsError::PublicUrl(_))
        ));
    }

    #[test]
    fn an_address_starts_a_bounded_number_of_sign_ins_a_minute() {
        let o = Oidc::new(settings(
            "https://id.example.com",
            "https://relay.example.com",
        ))
        .unwrap();
        let (a, b) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        for _ in 0..STARTS_PER_MINUTE {
            assert!(o.may_start(a).is_ok());
        }
        let wait = o.may_start(a).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(60));
        assert!(o.may_start(b).is_ok());
    }

    #[test]
    fn the_client_secret_is_never_printed() {
        let s = settings("https://id.example.com", "https://relay.example.com");
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("s3cret-value") && shown.contains("<set>"),
            "{shown}"
        );
    }

    #[test]
    fn the_identity_routes_are_in_the_api_document() {
        use utoipa::OpenApi;
        let doc = serde_json::to_value(crate::openapi::ApiDoc::openapi()).unwrap();
        let path = &doc["paths"]["/api/users/{id}/identities"];
        for method in ["get", "post", "delete"] {
            assert!(path[method].is_object(), "{method}: {path}");
        }
    }
}
