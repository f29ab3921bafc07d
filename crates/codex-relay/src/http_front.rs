//! `serve`'s HTTP-front flags (token, CORS origins, body limit) and the one app it serves:
//! the API, streams and UI beside `/mcp`, all behind the same security layers.

use std::net::SocketAddr;

use codex_relay_core::Relay;
use codex_relay_http::{HttpOptions, Security};

#[derive(clap::Args)]
pub struct HttpArgs {
    /// A token every request (API, streams, MCP, UI) must carry, as `Authorization: Bearer
    /// <token>` or the UI's login cookie. Required to listen beyond loopback.
    #[arg(long, env = "CODEX_RELAY_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// An origin allowed to call the API from a browser page served elsewhere (CORS), e.g.
    /// `https://dash.example.com`; repeatable. None by default: no CORS headers.
    #[arg(long = "cors-origin")]
    cors_origins: Vec<String>,
    /// The largest request body accepted, in bytes (larger ones get 413).
    #[arg(long, env = "CODEX_RELAY_MAX_BODY", default_value_t = codex_relay_http::security::DEFAULT_BODY_LIMIT)]
    max_body_bytes: usize,
}

impl HttpArgs {
    /// Refuses to serve beyond loopback without a token, before anything starts.
    pub fn check_listen(&self, addr: SocketAddr) -> anyhow::Result<()> {
        codex_relay_http::check_listen(addr, self.token.as_deref()).map_err(anyhow::Error::msg)
    }

    /// The HTTP front and `/mcp`, behind the Host allow-list, token, body limit and CORS.
    /// The API and UI, plus `fronts` (the MCP endpoints), all behind the security layers.
    pub fn app(
        &self,
        relay: &Relay,
        fronts: axum::Router,
        allowed_hosts: Vec<String>,
    ) -> axum::Router {
        let opts = HttpOptions {
            token: self.token.clone(),
        };
        let app = codex_relay_http::router(relay.clone(), opts).merge(fronts);
        codex_relay_http::secure(
            app,
            Security {
                token: self.token.clone(),
                allowed_hosts,
                cors_origins: self.cors_origins.clone(),
                body_limit: self.max_body_bytes,
            },
        )
    }
}
