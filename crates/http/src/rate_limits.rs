//! `GET /api/rate-limits`: the account's rate limits as Codex last reported them, the limit
//! that is hit (if one is), and the turns waiting in the relay's queue for it to clear.

use axum::Json;
use axum::extract::State;
use serde_json::Value;

use crate::AppState;

#[utoipa::path(get, path = "/api/rate-limits", tag = "sessions",
    responses((status = 200, description = "`{limits: [{limitId, primary?: {usedPercent, windowMinutes?, resetsAt?}, secondary?, planType?, seenAtMs}], hold?: {limitId, window, usedPercent, resetsAt?}, queued: [{sessionId, position, queuedAtMs}], maxQueued, maxWaitMs, queuedTotal, refusedTotal}`")))]
pub async fn get(State(st): State<AppState>) -> Json<Value> {
    Json(serde_json::to_value(st.relay.rate_limits()).unwrap_or_default())
}
