//! The answer-link pages (`/answer/{request}?t=…`), open without a login: GET shows the
//! request and asks (it never answers: link previews and scanners fetch URLs), POST answers
//! it with the link, once. The token never leaves in a Referer. Approving a risky request
//! (docs/SECURITY.md "Passkeys and step-up") also needs a fresh passkey assertion: then the
//! page's one script (`/answer-step-up.js`) gets it for the approve button.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use codex_relay_core::links::LinkError;
use codex_relay_core::{Answer, PendingDetails, PendingView};
use serde::Deserialize;

use crate::AppState;
use crate::error::link_status;

#[derive(Deserialize)]
pub(crate) struct LinkQuery {
    #[serde(default)]
    t: String,
    /// `approve` or `deny`: which button the notification's link pointed at.
    #[serde(default)]
    a: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct LinkForm {
    t: String,
    a: String,
    #[serde(default)]
    reason: Option<String>,
    /// The passkey assertion of a stepped-up approval (JSON text).
    #[serde(default)]
    step_up: Option<String>,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn page(status: StatusCode, body: &str) -> Response {
    page_with(status, body, false)
}

/// The page; `script`: with the step-up script (its own file, and calls to this relay only).
fn page_with(status: StatusCode, body: &str, script: bool) -> Response {
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>codex-relay · answer</title>
<style>
body {{ font: 16px/1.5 system-ui, sans-serif; margin: 0; display: grid; place-items: center; min-height: 100vh; }}
main {{ width: min(94vw, 560px); display: grid; gap: 14px; padding: 16px 0; }}
h1 {{ font-size: 1.3rem; margin: 0; }}
blockquote {{ margin: 0; padding: 6px 10px; border-left: 3px solid #8a94a3; white-space: pre-wrap; }}
pre {{ white-space: pre-wrap; word-break: break-word; padding: 10px; border-radius: 8px; background: #8881; margin: 0; }}
form {{ display: grid; gap: 10px; }}
label {{ display: grid; gap: 4px; font-weight: 600; }}
input {{ font: inherit; padding: 10px; border-radius: 8px; border: 1px solid #8a94a3; }}
button {{ font: inherit; font-weight: 600; padding: 12px; border-radius: 8px; border: 0; cursor: pointer; }}
.approve {{ background: #17602f; color: #fff; }} .deny {{ background: #8c1d1d; color: #fff; }}
.error {{ color: #c62828; }} p {{ margin: 0; }}
</style></head>
<body><main>{body}</main></body></html>"#
    );
    let mut res = (status, Html(html)).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(if script {
            "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
        } else {
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
        }),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert("x-robots-tag", HeaderValue::from_static("noindex"));
    res
}

fn refused(e: &LinkError) -> Response {
    let (status, code) = link_status(e);
    page(
        status,
        &format!(
            r#"<h1>This link does not answer</h1><p class="error" role="alert" data-code="{code}">{}</p><p><a href="/">Open codex-relay</a></p>"#,
            escape(&e.to_string())
        ),
    )
}

/// The request in full, escaped: the whole command (or every file's diff), where, and the
/// model's stated reason.
fn describe(p: &PendingView) -> String {
    let reach = p
        .reach
        .map(|r| format!("<p class=\"reach\">{}</p>", escape(r.text())))
        .unwrap_or_default();
    let because = |reason: &Option<String>| {
        reason
            .as_deref()
            .filter(|r| !r.trim().is_empty())
            .map(|r| {
                format!(
                    "<p>The model's reason:</p><blockquote class=\"reason\">{}</blockquote>",
                    escape(r)
                )
            })
            .unwrap_or_default()
    };
    let what = match &p.details {
        PendingDetails::CommandApproval {
            command,
            cwd,
            reason,
            ..
        } => format!(
            "<p>Codex asks to run:</p><pre class=\"command\">{}</pre>{}{}",
            escape(command),
            cwd.as_deref()
                .map(|c| format!("<p>in <code>{}</code></p>", escape(c)))
                .unwrap_or_default(),
            because(reason)
        ),
        PendingDetails::FileChangeApproval {
            changes, reason, ..
        } => {
            let files: String = changes
                .iter()
                .map(|c| {
                    format!(
                        "<p><code>{}</code></p><pre class=\"diff\">{}</pre>",
                        escape(&c.path),
                        escape(if c.diff.is_empty() {
                            "(no diff given)"
                        } else {
                            &c.diff
                        })
                    )
                })
                .collect();
            format!("<p>Codex asks to change:</p>{files}{}", because(reason))
        }
        PendingDetails::PermissionsApproval {
            permissions,
            reason,
            ..
        } => format!(
            "<p>Codex asks for these permissions:</p><pre>{}</pre>{}",
            escape(&serde_json::to_string_pretty(permissions).unwrap_or_default()),
            because(reason)
        ),
        _ => format!("<p>{}</p>", escape(&p.question)),
    };
    what + &reach
}

/// The answer page was shown from a genuine link: the request's notification was opened
/// (recorded once per request; re-notify and escalation stop).
async fn record_opened(st: &AppState, p: &PendingView) {
    let store = st.relay.store();
    if store.request_opened(&p.id).await.unwrap_or(true) {
        return;
    }
    let _ = store
        .record_delivery(&codex_relay_core::store::DeliveryRecord {
            outbox_id: "answer-link".into(),
            request_id: Some(p.id.clone()),
            target: "answer-link".into(),
            status: "opened".into(),
            detail: Some("the answer link's page was shown".into()),
            at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or_default(),
        })
        .await;
}

pub(crate) async fn page_get(
    st: &AppState,
    request: &str,
    q: &LinkQuery,
) -> Result<Response, LinkError> {
    let p = st.relay.check_answer_link(request, &q.t).await?;
    record_opened(st, &p).await;
    let deny_first = q.a.as_deref() == Some("deny");
    let token = escape(&q.t);
    let step_up = matches!(
        crate::passkeys::needs_of_link(st, &p).await,
        Ok(crate::passkeys::Needs::Passkey(_)) | Err(_)
    );
    let approve = if step_up {
        format!(
            r#"<form method="post" data-step-up="{id}"><input type="hidden" name="t" value="{token}"><input type="hidden" name="a" value="approve"><input type="hidden" name="step_up" value=""><button class="approve" type="submit">Approve once with a passkey</button><p class="note">Approving this needs a passkey of someone who may approve: your device asks for your PIN or biometric.</p><p class="error" role="alert" hidden></p></form><script type="module" src="/answer-step-up.js"></script>"#,
            id = escape(&p.id)
        )
    } else {
        format!(
            r#"<form method="post"><input type="hidden" name="t" value="{token}"><input type="hidden" name="a" value="approve"><button class="approve" type="submit">Approve once</button></form>"#
        )
    };
    let deny = format!(
        r#"<form method="post"><input type="hidden" name="t" value="{token}"><input type="hidden" name="a" value="deny"><label>Reason (the model reads it)<input name="reason" type="text" maxlength="500"></label><button class="deny" type="submit">Deny</button></form>"#
    );
    let (first, second) = if deny_first {
        (deny, approve)
    } else {
        (approve, deny)
    };
    Ok(page_with(
        StatusCode::OK,
        &format!(
            r#"<h1>Answer this request</h1>{}{first}{second}<p>This link answers this one request, once. <a href="/#/s/{}?request={}">Open it in codex-relay</a></p>"#,
            describe(&p),
            escape(&p.session_id),
            escape(&p.id)
        ),
        step_up,
    ))
}

/// `GET /answer/{request}?t=…&a=…`: the request and two buttons; nothing is answered.
pub(crate) async fn show(
    State(st): State<AppState>,
    Path(request): Path<String>,
    Query(q): Query<LinkQuery>,
) -> Response {
    page_get(&st, &request, &q)
        .await
        .unwrap_or_else(|e| refused(&e))
}

/// `POST /answer/{request}/step-up` (`t`): the challenge of a passkey step-up for approving
/// this request with its link (any passkey of a user who may approve; five minutes, once).
pub(crate) async fn step_up_options(
    State(st): State<AppState>,
    Path(request): Path<String>,
    client: Option<axum::Extension<crate::gate::Client>>,
    headers: axum::http::HeaderMap,
    Form(f): Form<StepUpForm>,
) -> Response {
    use crate::error::ApiError;
    let p = match st.relay.check_answer_link(&request, &f.t).await {
        Ok(p) => p,
        Err(e) => {
            let (status, code) = link_status(&e);
            return ApiError::new(status, code, e.to_string()).into_response();
        }
    };
    let options = async {
        let rp = crate::passkeys::relying_party(&st, &headers, client.as_deref())?;
        crate::passkeys::routes::begin_step_up(&st, &rp, &p.id, None).await
    };
    match options.await {
        Ok(o) => axum::Json(serde_json::json!({"options": o})).into_response(),
        Err(e) => e.into_response(),
    }
}

#[derive(Deserialize)]
pub(crate) struct StepUpForm {
    #[serde(default)]
    t: String,
}

/// A risky approval through a link: its step-up checked (the person it names), or why not.
async fn link_step_up(
    st: &AppState,
    request: &str,
    f: &LinkForm,
    headers: &axum::http::HeaderMap,
    client: Option<&crate::gate::Client>,
) -> Result<Option<(codex_relay_core::people::Person, String)>, Response> {
    let fail = |code: &str, msg: String| {
        page(
            StatusCode::FORBIDDEN,
            &format!(
                r#"<h1>Not answered</h1><p class="error" role="alert" data-code="{code}">{}</p><p>The link still works: go back and try again.</p>"#,
                escape(&msg)
            ),
        )
    };
    let p = st
        .relay
        .check_answer_link(request, &f.t)
        .await
        .map_err(|e| refused(&e))?;
    match crate::passkeys::needs_of_link(st, &p).await {
        Ok(crate::passkeys::Needs::Nothing) => return Ok(None),
        Ok(_) => {}
        Err(e) => return Err(fail(e.code, e.message)),
    }
    let Some(credential) = f
        .step_up
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
    else {
        let e = crate::passkeys::step_up_required(&p, true);
        return Err(fail(e.code, e.message));
    };
    let checked = async {
        let rp = crate::passkeys::relying_party(st, headers, client)?;
        crate::passkeys::check_step_up(st, &rp, &p.id, None, &credential).await
    };
    match checked.await {
        Ok(done) => Ok(Some((
            codex_relay_core::people::Person {
                id: done.user_id.clone(),
                name: done.user_name.clone(),
                role: done.role,
                front: "link".into(),
                device: None,
            }
            .with_device(Some(&done.device())),
            p.session_id.clone(),
        ))),
        Err(e) => Err(fail(e.code, e.message)),
    }
}

/// `POST /answer/{request}` (`t`, `a`, `reason`, and `step_up` for a risky approval): answers
/// with the link, once.
pub(crate) async fn submit(
    State(st): State<AppState>,
    Path(request): Path<String>,
    client: Option<axum::Extension<crate::gate::Client>>,
    headers: axum::http::HeaderMap,
    Form(f): Form<LinkForm>,
) -> Response {
    let answer = match f.a.as_str() {
        "approve" => Answer::approve(),
        "deny" => Answer::Deny {
            reason: f
                .reason
                .clone()
                .map(|r| r.trim().to_owned())
                .filter(|r| !r.is_empty()),
        },
        _ => return refused(&LinkError::Invalid),
    };
    let person = if crate::passkeys::approves(&answer) {
        match link_step_up(&st, &request, &f, &headers, client.as_deref()).await {
            Ok(p) => p,
            Err(res) => return res,
        }
    } else {
        None
    };
    let audit = person.clone();
    match st
        .relay
        .answer_by_link_as(&request, &f.t, answer, person.map(|(p, _)| p))
        .await
    {
        Ok(r) => {
            if let Some((person, session)) = audit {
                let mut entry = codex_relay_core::people::AuditEntry::new(person, "request.answer");
                entry.session = Some(session);
                entry.request = Some(r.id.clone());
                entry.decision = Some(r.decision.as_str().to_owned());
                entry.ip = client.as_ref().map(|c| c.ip.to_string());
                entry.detail = Some(serde_json::json!({"path": format!("/answer/{request}"),
                    "stepUp": {"userVerified": true}}));
                if let Err(e) = st.relay.people().audit(&entry).await {
                    tracing::warn!("the audit log did not take a link's answer: {e}");
                }
            }
            page(
                StatusCode::OK,
                &format!(
                    r#"<h1>Answered</h1><p role="status" data-decision="{0}">{0}: done. Codex goes on.</p><p><a href="/">Open codex-relay</a></p>"#,
                    escape(r.decision.as_str())
                ),
            )
        }
        Err(e) => refused(&e),
    }
}

#[cfg(test)]
mod tests {
    use codex_relay_core::answer::PendingKind;
    use codex_relay_core::{PendingDetails, PendingView};
    use codex_relay_protocol::v2::FileUpdateChange;

    fn view(kind: PendingKind, details: PendingDetails) -> PendingView {
        PendingView {
            id: "r1".into(),
            session_id: "s1".into(),
            kind,
            question: "?".into(),
            options: vec![],
            details,
            turn: None,
            created_at: 0,
            deadline: 0,
            agent: None,
            invoke: None,
            reach: None,
        }
    }

    /// A file change's page shows every file's whole diff and the model's reason, escaped.
    #[test]
    fn a_file_change_shows_every_diff_and_the_reason_escaped() {
        let html = super::describe(&view(
            PendingKind::FileChangeApproval,
            PendingDetails::FileChangeApproval {
                reason: Some("needs <em>both</em> & more".into()),
                grant_root: None,
                item_id: None,
                changes: vec![
                    FileUpdateChange {
                        path: "a.html".into(),
                        kind: serde_json::json!({"type": "add"}),
                        diff: "+<script>alert('x')</script>\n".into(),
                    },
                    FileUpdateChange {
                        path: "b\".txt".into(),
                        kind: serde_json::json!({"type": "update"}),
                        diff: "-old\n+new\n".into(),
                    },
                ],
            },
        ));
        assert!(
            html.contains("+&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            html.contains("b&quot;.txt") && html.contains("-old\n+new"),
            "{html}"
        );
        assert!(
            html.contains("needs &lt;em&gt;both&lt;/em&gt; &amp; more"),
            "{html}"
        );
        assert!(
            !html.contains("<script>") && !html.contains("<em>"),
            "{html}"
        );
    }
}
