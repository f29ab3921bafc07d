//! The legacy contract's JSON for pending requests, pinned by snapshots taken before the
//! engine's types changed: the `elicitation/create` params and the `codex/event` approval
//! messages old clients read.

use codex_relay_core::{Envelope, Ev, PendingView, Role};

#[test]
fn approvals_keep_their_legacy_json() {
    for f in codex_relay_testkit::fixtures::pending() {
        let p: PendingView = serde_json::from_value(f).expect("stored rows load");
        insta::assert_json_snapshot!(
            format!("elicitation_{}", p.id),
            json(&crate::approval::elicitation_params(&p, "thread-1", "7"))
        );
        let env = Envelope {
            id: "s1:7".into(),
            seq: 7,
            time: 1,
            role: Role::System,
            turn: p.turn.clone(),
            invoke: None,
            agent: None,
            ev: codex_relay_core::event::request_opened(&p),
        };
        let mut t = crate::events::Translator::default();
        let out = t.event(&env);
        insta::assert_json_snapshot!(format!("codex_event_{}", p.id), json(&out.msgs));
        assert_eq!(out.request.map(|r| r.id), Some(p.id.clone()));
        let _ = Ev::TurnStart {};
    }
}

/// JSON as a client reads it: objects compared by their fields, whatever their order.
fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("serializable")
}
