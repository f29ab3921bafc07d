//! The engine's wire JSON for pending requests and their resolutions, pinned by snapshots taken
//! before the engine's types changed: the stored request rows, `/api/codex/permission/pending`,
//! and the `request-opened` / `request-resolved` envelopes (docs/EVENTS.md) must not move.

use crate::broker::{PendingView, Resolution};
use crate::event::{Envelope, Ev, Role};

fn envelope(seq: u64, ev: Ev) -> Envelope {
    Envelope {
        id: format!("s1:{seq}"),
        seq,
        time: 1,
        role: Role::System,
        turn: Some("t1".into()),
        invoke: None,
        agent: None,
        ev,
    }
}

#[test]
fn pending_requests_and_their_envelopes_keep_their_json() {
    for fixture in codex_relay_testkit::fixtures::pending() {
        let id = fixture["id"].as_str().unwrap().to_owned();
        let view: PendingView = serde_json::from_value(fixture).expect("stored rows load");
        insta::assert_json_snapshot!(format!("pending_{id}"), json(&view));
        let opened = envelope(7, crate::event::request_opened(&view));
        insta::assert_json_snapshot!(format!("opened_{id}"), json(&opened));
    }
}

#[test]
fn resolutions_and_their_envelopes_keep_their_json() {
    for (i, fixture) in codex_relay_testkit::fixtures::resolutions()
        .into_iter()
        .enumerate()
    {
        let r: Resolution = serde_json::from_value(fixture).expect("resolutions load");
        insta::assert_json_snapshot!(format!("resolution_{i}"), json(&r));
        let resolved = envelope(8, crate::event::request_resolved(&r));
        insta::assert_json_snapshot!(format!("resolved_{i}"), json(&resolved));
    }
}

/// JSON as a client reads it: objects compared by their fields, whatever their order.
fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("serializable")
}
