//! The OpenAPI document, generated from the handlers' types (`GET /api/openapi.json`).

use axum::Json;
use utoipa::OpenApi;

use crate::{
    daemon_threads, deliveries, export, health, notify, passkeys, people, permission, rate_limits,
    relay_stream, rules, sessions, sse, sso, threads, worktree,
};

#[derive(OpenApi)]
#[openapi(
    info(title = "codex-relay HTTP API", description = "Codex sessions over HTTP and Server-Sent Events; see docs/HTTP.md."),
    paths(
        sessions::create, sessions::list, sessions::get, sessions::message, sessions::interrupt,
        sessions::close, sessions::events, sessions::limits, sessions::set_limits,
        daemon_threads::read, daemon_threads::fork,
        threads::review, threads::fork, threads::rollback, threads::compact, threads::set_model,
        threads::models, export::export, sse::stream, relay_stream::stream, rate_limits::get,
        worktree::diff, worktree::export, worktree::merge,
        permission::respond, permission::pending, rules::list, rules::put, rules::delete,
        rules::suggest, notify::list, notify::key, notify::subscribe, notify::unsubscribe,
        deliveries::for_request, deliveries::for_notification, deliveries::channels, deliveries::send_test,
        people::me, people::list_users, people::create_user, people::update_user,
        people::list_tokens, people::create_token, people::revoke_token,
        people::list_invitations, people::create_invitation, people::audit, people::export,
        passkeys::routes::register_options, passkeys::routes::register, passkeys::routes::list,
        passkeys::routes::remove, passkeys::routes::step_up_options, passkeys::login::options,
        passkeys::login::sign_in,
        sso::identities::list, sso::identities::bind, sso::identities::unbind,
        health::healthz, health::metrics, document,
    ),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[utoipa::path(get, path = "/api/openapi.json", tag = "operations",
    responses((status = 200, description = "this document")))]
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
