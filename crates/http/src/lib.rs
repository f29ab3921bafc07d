//! The HTTP front of codex-relay: the session API under `/api`, Server-Sent Events per session
//! and for the whole relay, reference-001 compatible permission endpoints, OpenAPI, health,
//! metrics and the web UI, all thin over [`Relay`] (see docs/HTTP.md).
//!
//! - [`sessions`]: create, list, snapshot, message, interrupt, close, history; [`threads`]:
//!   review, fork, rollback, compact, a session's model and effort, the model list.
//! - [`sse`] and [`relay_stream`]: the streams; [`permission`]: reference-001 shapes.
//! - [`security`]: Host allow-list, body limit, CORS, listen check, assembled by [`secure`];
//!   [`gate`]: the token, browser logins and the cross-site check; [`auth`]: the credentials;
//!   [`access`]: the one table of the role each route and MCP tool needs, enforced (and each
//!   action audited) by [`enforce`]; [`people`]: users, personal tokens, invitations, audit;
//!   [`streams`]: the cap on open event streams.
//! - [`server`]: the server loop (header timeout, connection cap, the peer check).
//! - [`notify`]: the notification outbox and Web Push subscriptions.
//! - [`rules`]: approval rules (list, put, delete, suggest from a request).
//! - [`health`]: `/healthz`, `/metrics`; [`openapi`]: the generated document.

pub mod access;
pub mod auth;
pub mod body_deadline;
pub mod daemon_threads;
pub mod deliveries;
pub mod enforce;
pub mod error;
pub mod export;
pub mod frames;
pub mod gate;
pub mod health;
pub mod notify;
pub mod openapi;
pub mod passkeys;
pub mod people;
pub mod permission;
pub mod rate_limits;
pub mod relay_stream;
pub mod rules;
pub mod security;
pub mod server;
pub mod sessions;
pub mod sse;
pub mod sso;
pub mod streams;
pub mod threads;
pub mod types;
mod ui;
#[cfg(test)]
mod wire_snapshots;
pub mod worktree;

use std::sync::Arc;

use axum::routing::{get, post};
use codex_relay_core::Relay;

pub use security::{Security, check_listen, secure};

/// Settings of the HTTP front.
#[derive(Clone)]
pub struct HttpOptions {
    /// The token and the browser logins granted with it: checked by [`secure`], used by the
    /// UI's login pages.
    pub credentials: Arc<auth::Credentials>,
    /// The VAPID public key browsers subscribe to push with; `None`: push is off.
    pub vapid_public_key: Option<String>,
    /// The notification channels `serve` delivers to (webhook names, and `push` when Web Push
    /// is on): what `POST /api/notifications/test` accepts.
    pub notify_channels: Vec<String>,
    /// Passkeys: the relying party's URL and the step-up policy for risky approvals.
    pub passkeys: passkeys::PasskeyOptions,
    /// Single sign-on through an OpenID provider; `None`: not configured.
    pub oidc: Option<Arc<sso::Oidc>>,
    /// Cancelled when the server stops: every event stream ends at once (a browser's stream
    /// would otherwise hold the connection, and the shutdown, open).
    pub stop: tokio_util::sync::CancellationToken,
}

impl Default for HttpOptions {
    /// No token (what `--no-auth` serves).
    fn default() -> Self {
        Self {
            credentials: Arc::new(auth::Credentials::new(None, None)),
            vapid_public_key: None,
            notify_channels: Vec::new(),
            passkeys: Default::default(),
            oidc: None,
            stop: Default::default(),
        }
    }
}

/// What every handler gets.
#[derive(Clone)]
pub struct AppState {
    pub relay: Relay,
    pub opts: Arc<HttpOptions>,
    pub metrics: Arc<health::HttpMetrics>,
    /// Serialized frames shared by the subscribers of a session.
    pub frames: Arc<frames::Frames>,
}

/// Everything the HTTP front serves (the caller adds `/mcp` and wraps it all in [`secure`]).
pub fn router(relay: Relay, opts: HttpOptions) -> axum::Router {
    opts.credentials
        .set_step_up(relay.clone(), opts.passkeys.step_up.clone());
    let state = AppState {
        relay,
        opts: Arc::new(opts),
        metrics: Arc::default(),
        frames: Arc::default(),
    };
    axum::Router::new()
        .route("/api/sessions", post(sessions::create).get(sessions::list))
        .route(
            "/api/sessions/{id}",
            get(sessions::get).delete(sessions::close),
        )
        .route("/api/sessions/{id}/messages", post(sessions::message))
        .route("/api/sessions/{id}/interrupt", post(sessions::interrupt))
        .route("/api/sessions/{id}/events", get(sessions::events))
        .route(
            "/api/sessions/{id}/limits",
            get(sessions::limits).post(sessions::set_limits),
        )
        .route("/api/sessions/{id}/review", post(threads::review))
        .route("/api/sessions/{id}/fork", post(threads::fork))
        .route("/api/sessions/{id}/rollback", post(threads::rollback))
        .route("/api/sessions/{id}/compact", post(threads::compact))
        .route("/api/sessions/{id}/model", post(threads::set_model))
        .route("/api/models", get(threads::models))
        .route("/api/sessions/{id}/stream", get(sse::stream))
        .route("/api/sessions/{id}/worktree", get(worktree::diff))
        .route("/api/sessions/{id}/worktree/export", post(worktree::export))
        .route("/api/sessions/{id}/worktree/merge", post(worktree::merge))
        .route("/api/sessions/{id}/export", get(export::export))
        .route("/api/threads/{id}", get(daemon_threads::read))
        .route("/api/threads/{id}/fork", post(daemon_threads::fork))
        .route("/api/stream", get(relay_stream::stream))
        .route("/api/rate-limits", get(rate_limits::get))
        .route("/api/codex/permission/respond", post(permission::respond))
        .route("/api/codex/permission/pending", get(permission::pending))
        .route("/api/rules", get(rules::list).post(rules::put))
        .route("/api/rules/suggest", get(rules::suggest))
        .route("/api/rules/{name}", axum::routing::delete(rules::delete))
        .route("/api/notifications", get(notify::list))
        .route("/api/notifications/channels", get(deliveries::channels))
        .route("/api/notifications/test", post(deliveries::send_test))
        .route(
            "/api/notifications/{id}/deliveries",
            get(deliveries::for_notification),
        )
        .route(
            "/api/requests/{id}/deliveries",
            get(deliveries::for_request),
        )
        .route("/api/push/key", get(notify::key))
        .route("/api/push/subscriptions", post(notify::subscribe))
        .route("/api/push/unsubscribe", post(notify::unsubscribe))
        .route("/api/me", get(people::me))
        .route(
            "/api/users",
            get(people::list_users).post(people::create_user),
        )
        .route("/api/users/{id}", post(people::update_user))
        .route(
            "/api/users/{id}/identities",
            get(sso::identities::list)
                .post(sso::identities::bind)
                .delete(sso::identities::unbind),
        )
        .route(
            "/api/tokens",
            get(people::list_tokens).post(people::create_token),
        )
        .route(
            "/api/tokens/{id}",
            axum::routing::delete(people::revoke_token),
        )
        .route(
            "/api/invitations",
            get(people::list_invitations).post(people::create_invitation),
        )
        .route(
            "/api/passkeys",
            get(passkeys::routes::list).post(passkeys::routes::register),
        )
        .route(
            "/api/passkeys/register",
            post(passkeys::routes::register_options),
        )
        .route(
            "/api/passkeys/step-up",
            post(passkeys::routes::step_up_options),
        )
        .route(
            "/api/passkeys/{id}",
            axum::routing::delete(passkeys::routes::remove),
        )
        .route("/login/passkey/options", post(passkeys::login::options))
        .route("/login/passkey", post(passkeys::login::sign_in))
        .route("/api/audit", get(people::audit))
        .route("/api/audit/export", get(people::export))
        .route("/api/openapi.json", get(openapi::document))
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(health::metrics))
        .merge(ui::routes())
        .fallback(not_found)
        .with_state(state)
}

async fn not_found(uri: axum::http::Uri) -> error::ApiError {
    error::ApiError::not_found(
        "not_found",
        format!("no such endpoint: {}; see /api/openapi.json", uri.path()),
    )
}
