//! What a model server says about the account's rate limits, as Codex reads it: the
//! `x-codex-primary-*` / `x-codex-secondary-*` response headers (used percent, window in
//! minutes, reset time in Unix seconds), and the HTTP 429 `usage_limit_reached` body that Codex
//! reports as the error kind `usageLimitExceeded`.

use serde_json::json;

use crate::model::Reply;

/// One rate-limit window as the headers carry it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub used_percent: f64,
    pub window_minutes: i64,
    /// When the window resets, in Unix seconds.
    pub resets_at: i64,
}

impl Window {
    /// A window `used_percent` full that resets `resets_in_seconds` from now.
    pub fn used(used_percent: f64, window_minutes: i64, resets_in_seconds: i64) -> Self {
        Window {
            used_percent,
            window_minutes,
            resets_at: now_secs() + resets_in_seconds,
        }
    }
}

/// The headers of a primary (and optional secondary) window, named as Codex reads them.
pub fn headers(primary: Window, secondary: Option<Window>) -> Vec<(String, String)> {
    let mut out = family("primary", primary);
    if let Some(w) = secondary {
        out.extend(family("secondary", w));
    }
    out
}

fn family(which: &str, w: Window) -> Vec<(String, String)> {
    vec![
        (
            format!("x-codex-{which}-used-percent"),
            w.used_percent.to_string(),
        ),
        (
            format!("x-codex-{which}-window-minutes"),
            w.window_minutes.to_string(),
        ),
        (format!("x-codex-{which}-reset-at"), w.resets_at.to_string()),
    ]
}

/// OpenAI's answer to a request over the account's usage limit: HTTP 429 with
/// `{"error": {"type": "usage_limit_reached", "plan_type", "resets_at"}}` and the window's
/// headers. Codex does not retry it and fails the turn with `usageLimitExceeded`.
pub fn usage_limit_reached(primary: Window) -> Reply {
    Reply::StatusBody {
        code: 429,
        body: json!({"error": {
            "type": "usage_limit_reached",
            "message": "You've hit your usage limit.",
            "plan_type": "plus",
            "resets_at": primary.resets_at,
        }}),
    }
    .with_headers(headers(primary, None))
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
