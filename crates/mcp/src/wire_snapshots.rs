//! The MCP front's JSON for pending requests, pinned by snapshots taken before the engine's
//! types changed: `pendingQuestion` in `codex_status` and the elicitation forms (message and
//! schema) clients are sent.

use codex_relay_core::PendingView;

fn views() -> Vec<PendingView> {
    codex_relay_testkit::fixtures::pending()
        .into_iter()
        .map(|f| serde_json::from_value(f).expect("stored rows load"))
        .collect()
}

#[test]
fn pending_questions_keep_their_json() {
    let views = views();
    for p in &views {
        insta::assert_json_snapshot!(
            format!("pending_question_{}", p.id),
            json(&crate::view::pending_question(std::slice::from_ref(p)))
        );
    }
    insta::assert_json_snapshot!(
        "pending_question_all",
        json(&crate::view::pending_question(&views))
    );
}

#[test]
fn elicitation_forms_keep_their_json() {
    for p in views() {
        let form = crate::elicit::Form::for_request(&p)
            .map(|f| serde_json::json!({"message": f.message, "schema": f.schema}));
        insta::assert_json_snapshot!(format!("form_{}", p.id), json(&form));
    }
}

/// JSON as a client reads it: objects compared by their fields, whatever their order.
fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("serializable")
}
