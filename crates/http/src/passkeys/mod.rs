//! Passkeys (WebAuthn) over HTTP: the relying party of a request (from `--public-url`, else
//! the address the browser used), the ceremony state kept in the store (one use, five
//! minutes), and the step-up check a risky approval carries ([`step_up`]). The routes are in
//! [`routes`] (register, list, remove, step-up options) and [`login`] (sign in with a passkey).
//! docs/SECURITY.md "Passkeys and step-up".

pub mod login;
pub mod routes;
pub mod step_up;
pub mod webauthn;

use axum::http::{HeaderMap, StatusCode, header};
use codex_relay_core::people::{CeremonyError, CeremonyKind, People, Role};
use codex_relay_core::{Answer, PendingView};
use serde_json::Value;

use crate::AppState;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::gate::Client;
pub use step_up::{StepUpMode, StepUpPolicy};
use webauthn::{RelyingParty, WebauthnError};

/// The passkey settings of the HTTP front.
#[derive(Debug, Clone, Default)]
pub struct PasskeyOptions {
    /// Where browsers reach the relay (`--public-url`): its host is the relying party ID and
    /// its origin the one assertions must come from. `None`: the address of each request (as
    /// the Host allow-list let it in).
    pub public_url: Option<url::Url>,
    pub step_up: StepUpPolicy,
}

impl From<WebauthnError> for ApiError {
    fn from(e: WebauthnError) -> Self {
        let message = e.to_string();
        match e {
            WebauthnError::Config(_) => {
                ApiError::new(StatusCode::CONFLICT, "passkeys_unavailable", message)
            }
            WebauthnError::Malformed(_) => ApiError::unprocessable("invalid_passkey", message),
            WebauthnError::Refused(_) => {
                ApiError::new(StatusCode::FORBIDDEN, "passkey_refused", message)
            }
        }
    }
}

impl From<CeremonyError> for ApiError {
    fn from(e: CeremonyError) -> Self {
        let message = e.to_string();
        match e {
            CeremonyError::Store(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                message,
            ),
            _ => ApiError::new(StatusCode::FORBIDDEN, "passkey_ceremony_unknown", message),
        }
    }
}

/// `--public-url`: an http(s) URL whose host can be a relying party (a domain, in a secure
/// context).
pub fn public_url(text: &str) -> Result<url::Url, String> {
    url::Url::parse(text)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| format!("{text:?} is not an http(s) URL"))
}

/// Why passkeys cannot be used at `url` (an IP address, an insecure origin), if they cannot:
/// the relay still serves there (single sign-on and links use the URL too), and passkey
/// routes answer `passkeys_unavailable`.
pub fn unusable_for_passkeys(url: &url::Url) -> Option<String> {
    RelyingParty::for_origin(url).err().map(|e| e.to_string())
}

pub(crate) fn store_error(e: codex_relay_core::store::StoreError) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        e.to_string(),
    )
}

pub(crate) fn people(st: &AppState) -> People {
    st.relay.people()
}

/// The relying party for a request: `--public-url`'s, else the origin the browser used.
pub(crate) fn relying_party(
    st: &AppState,
    headers: &HeaderMap,
    client: Option<&Client>,
) -> Result<RelyingParty, ApiError> {
    let origin = match &st.opts.passkeys.public_url {
        Some(u) => u.clone(),
        None => {
            let host = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let scheme = if client.is_some_and(|c| c.https) {
                "https"
            } else {
                "http"
            };
            url::Url::parse(&format!("{scheme}://{host}/")).map_err(|_| {
                ApiError::unprocessable("passkeys_unavailable", "no Host to name the relying party")
            })?
        }
    };
    Ok(RelyingParty::for_origin(&origin)?)
}

/// Whether an MCP `codex_respond` call's `answers` may approve: anything but a plain denial
/// or cancellation (an option's index, say) counts, so an unclear answer is held to the step-up.
pub fn mcp_answer_approves(answers: Option<&Value>) -> bool {
    let declines = |v: &Value| {
        v.as_str().is_some_and(|s| {
            let s = s.trim().to_ascii_lowercase();
            s.starts_with("deny") || s.starts_with("decline") || s.starts_with("cancel")
        })
    };
    match answers {
        None => true,
        Some(Value::Array(list)) => !list.iter().all(declines),
        Some(one) => !declines(one),
    }
}

/// The gate's check of MCP answers: `codex_respond` cannot carry a passkey assertion, so an
/// approval of a risky request that needs a step-up is refused there (`Some(refusal)`), with
/// where to approve it instead.
pub async fn mcp_refusal(
    creds: &crate::auth::Credentials,
    who: &Principal,
    arguments: Option<&Value>,
) -> Option<ApiError> {
    let (relay, policy) = creds.step_up()?;
    let args = arguments?;
    if !mcp_answer_approves(args.get("answers")) {
        return None;
    }
    let id = args.get("id")?.as_str()?;
    let p = relay.find_pending(id).await?;
    let needs = needs_under(&relay.people(), policy, &p, Some(who)).await;
    match needs {
        Ok(Needs::Nothing) => None,
        Ok(Needs::Refused(why)) => Some(ApiError::new(
            StatusCode::FORBIDDEN,
            "step_up_required",
            why,
        )),
        Ok(Needs::Passkey(_)) => Some(ApiError::new(
            StatusCode::FORBIDDEN,
            "step_up_required",
            format!(
                "approving this request needs a fresh passkey check, which MCP cannot carry. {} Approve it in the web UI or through its answer link; declining over MCP needs none.",
                p.reach.map(|r| r.text()).unwrap_or_default()
            ),
        )),
        Err(e) => Some(e),
    }
}

/// The purposes of a step-up that guards a user's own passkeys rather than a request: adding
/// one (`passkey.register`) or removing one (`passkey.remove:<id>`) once the user has any, so
/// that an open session alone (a stolen phone) can neither add the thief's passkey nor remove
/// the owner's to escape the step-up.
pub const SELF_PREFIX: &str = "passkey.";

/// Checks the step-up that changing `g`'s own passkeys needs once they have one (`purpose`:
/// `passkey.register` or `passkey.remove:<id>`); `Ok(None)` when none is needed.
pub(crate) async fn self_step_up(
    st: &AppState,
    headers: &HeaderMap,
    client: Option<&Client>,
    g: &codex_relay_core::people::Grant,
    purpose: &str,
    credential: Option<&Value>,
) -> Result<Option<SteppedUp>, ApiError> {
    if st.opts.passkeys.step_up.mode == StepUpMode::Off
        || !people(st)
            .has_passkey(Some(&g.user_id))
            .await
            .map_err(store_error)?
    {
        return Ok(None);
    }
    let Some(credential) = credential else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "step_up_required",
            format!(
                "changing your passkeys needs a fresh check with one you have: ask POST /api/passkeys/step-up {{\"request\": \"{purpose}\"}} for a challenge and send the assertion as `stepUp`; the Passkeys view does this for you"
            ),
        ));
    };
    let rp = relying_party(st, headers, client)?;
    check_step_up(st, &rp, purpose, Some(&g.user_id), credential)
        .await
        .map(Some)
}

/// Whether `answer` approves (declining, cancelling and answering questions never need a
/// step-up).
pub fn approves(answer: &Answer) -> bool {
    matches!(
        answer,
        Answer::Approve { .. } | Answer::ApproveWithCodexRule
    )
}

/// What approving a request needs from whoever answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Needs {
    /// Nothing beyond the role.
    Nothing,
    /// A fresh assertion of a passkey of this user (`None`: of any user who may approve).
    Passkey(Option<String>),
    /// It cannot be approved this way (why, and how instead).
    Refused(String),
}

/// What approving the risky-or-not `p` needs from `who`.
pub(crate) async fn needs_of(
    st: &AppState,
    p: &PendingView,
    who: Option<&Principal>,
) -> Result<Needs, ApiError> {
    needs_under(&people(st), &st.opts.passkeys.step_up, p, who).await
}

/// [`needs_of`] with the people and the policy given.
pub(crate) async fn needs_under(
    people: &People,
    policy: &StepUpPolicy,
    p: &PendingView,
    who: Option<&Principal>,
) -> Result<Needs, ApiError> {
    if policy.mode == StepUpMode::Off || !policy.risky(p) {
        return Ok(Needs::Nothing);
    }
    let user = match who {
        Some(Principal::User(g)) => Some(g.user_id.clone()),
        _ => None,
    };
    let has = match &user {
        Some(u) => people.has_passkey(Some(u)).await.map_err(store_error)?,
        None => false,
    };
    Ok(match (policy.mode, user, has) {
        (_, Some(u), true) => Needs::Passkey(Some(u)),
        (StepUpMode::All, Some(_), false) => Needs::Refused(
            "approving this request needs a passkey (step-up is on for everyone): register one under Passkeys, then approve from the browser".into(),
        ),
        (StepUpMode::All, None, _) => Needs::Refused(
            "approving this request needs a named user's passkey (step-up is on for everyone): the relay's token and its logins cannot approve risky requests; sign in as a named user with a passkey".into(),
        ),
        _ => Needs::Nothing,
    })
}

/// What approving `p` through its answer link needs: a passkey of anyone who may approve, as
/// soon as the relay has one (`passkey-users`), or always (`all`).
pub(crate) async fn needs_of_link(st: &AppState, p: &PendingView) -> Result<Needs, ApiError> {
    let policy = &st.opts.passkeys.step_up;
    if policy.mode == StepUpMode::Off || !policy.risky(p) {
        return Ok(Needs::Nothing);
    }
    if policy.mode == StepUpMode::All || people(st).has_passkey(None).await.map_err(store_error)? {
        Ok(Needs::Passkey(None))
    } else {
        Ok(Needs::Nothing)
    }
}

/// The refusal of an approval that lacks its step-up: 403 `step_up_required`, saying how.
pub fn step_up_required(p: &PendingView, link: bool) -> ApiError {
    let why = p
        .reach
        .filter(|r| step_up::RISKY_REACHES.contains(r))
        .map(|r| r.text())
        .unwrap_or("It is a command the admin named for step-up (--step-up-command).");
    let how = if link {
        "approve on this page with a passkey (the page asks for it)"
    } else {
        "ask POST /api/passkeys/step-up {\"request\": id} for a challenge, get a user-verified assertion from a passkey (navigator.credentials.get), and send it as `stepUp` with the approval; the web UI does this when you press Approve"
    };
    ApiError::new(
        StatusCode::FORBIDDEN,
        "step_up_required",
        format!(
            "approving this request needs a fresh passkey check. {why} To approve it, {how}. Declining needs none."
        ),
    )
}

/// A step-up that checked out: whose passkey approved.
#[derive(Debug, Clone)]
pub struct SteppedUp {
    pub user_id: String,
    pub user_name: String,
    pub role: Role,
    pub passkey: String,
}

impl SteppedUp {
    /// What the answer and the audit log record as the device.
    pub fn device(&self) -> String {
        format!("passkey \"{}\" (user verified)", self.passkey)
    }
}

/// Checks the assertion `credential` made to approve `request`: its ceremony was a step-up
/// for that request (taken now: one use), its passkey is `user`'s (`None`: any user's) and
/// the user may approve; the signature and user verification check out.
pub(crate) async fn check_step_up(
    st: &AppState,
    rp: &RelyingParty,
    request: &str,
    user: Option<&str>,
    credential: &Value,
) -> Result<SteppedUp, ApiError> {
    let assertion = RelyingParty::read_assertion(credential)?;
    let people = people(st);
    let ceremony = people
        .finish_ceremony(&assertion.challenge, CeremonyKind::StepUp)
        .await?;
    let refused = |m: &str| ApiError::new(StatusCode::FORBIDDEN, "step_up_failed", m.to_owned());
    if ceremony.request_id.as_deref() != Some(request) {
        return Err(refused(
            "this passkey check was made for another request; approve again",
        ));
    }
    if ceremony.user_id.is_some() && ceremony.user_id.as_deref() != user {
        return Err(refused("this passkey check was started by someone else"));
    }
    let Some(key) = people
        .passkey_record(&assertion.credential_id)
        .await
        .map_err(store_error)?
    else {
        return Err(refused(
            "this passkey is not registered here (it may have been removed)",
        ));
    };
    if user.is_some_and(|u| u != key.user_id) {
        return Err(refused("this passkey is not yours: use your own"));
    }
    let owner = people.user(&key.user_id).await?;
    // Approving needs an approver's passkey; a change to one's own passkeys (`passkey.…`),
    // only one's own.
    let approving = !request.starts_with(SELF_PREFIX);
    if owner.disabled_at.is_some() || (approving && owner.role < Role::Approver) {
        return Err(refused("this passkey's user may not approve requests"));
    }
    let counters = rp.finish_assertion(
        &ceremony.state,
        &assertion,
        &key.user_handle,
        &key.static_state,
        &key.dynamic_state,
    )?;
    if let Err(e) = people.passkey_used(&key.id, &counters).await {
        tracing::warn!("noting a passkey's use: {e}");
    }
    tracing::info!(target: "codex_relay::security", user = %owner.name, passkey = %key.name, request, "a risky approval was stepped up with a passkey");
    Ok(SteppedUp {
        user_id: owner.id,
        user_name: owner.name,
        role: owner.role,
        passkey: key.name,
    })
}
