//! The HTTP front's JSON for pending requests, pinned by snapshots taken before the engine's
//! types changed: the reference-001 `permission_request` / `ask_user_question` events the SSE
//! streams carry.

use codex_relay_core::PendingView;

#[test]
fn reference_events_keep_their_json() {
    for f in codex_relay_testkit::fixtures::pending() {
        let p: PendingView = serde_json::from_value(f).expect("stored rows load");
        insta::assert_json_snapshot!(
            format!("compat_event_{}", p.id),
            json(&crate::permission::compat_event(&p))
        );
    }
}

/// JSON as a client reads it: objects compared by their fields, whatever their order.
fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("serializable")
}
