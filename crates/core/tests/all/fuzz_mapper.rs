//! Property tests of the mapper (Codex notifications → session events) over the protocol seed
//! corpus, mutated: it never panics, every event it makes is stored and read back unchanged,
//! and members Codex may add later change no event's kind.
//! Run longer with `PROPTEST_CASES=100000 cargo test -p codex-relay-core fuzz_`.

#[path = "../../../protocol/tests/all/fuzz.rs"]
mod fuzz;

use codex_relay_core::Ev;
use codex_relay_core::mapper::{Mapped, map};
use codex_relay_protocol::v2::ServerNotification;
use fuzz::{add_extra_everywhere, any_json, apply, config, mutation, seeds};
use proptest::prelude::*;
use serde_json::Value;

fn mapped(message: &Value) -> (ServerNotification, Mapped) {
    let method = message["method"].as_str().unwrap_or("");
    let n = ServerNotification::parse(method, message.get("params").cloned().unwrap_or_default());
    let m = map(&n);
    (n, m)
}

fn kinds(m: &Mapped) -> Vec<&'static str> {
    m.events.iter().map(|(_, _, ev)| ev.kind()).collect()
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn fuzz_mutated_notifications_map_to_events_that_store_and_read_back(
        message in prop::sample::select(seeds("notifications.json")),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut doc = message;
        for m in &mutations {
            apply(&mut doc, m);
        }
        let (_, m) = mapped(&doc);
        for (_, _, ev) in &m.events {
            let stored = serde_json::to_string(ev).unwrap();
            let back: Ev = serde_json::from_str(&stored).unwrap();
            prop_assert_eq!(&back, ev);
        }
    }

    #[test]
    fn fuzz_extra_members_change_no_event_kind(
        message in prop::sample::select(seeds("notifications.json")),
        key in "[a-z]{1,6}",
        extra in any_json(),
    ) {
        let (_, before) = mapped(&message);
        let mut grown = message.clone();
        add_extra_everywhere(&mut grown, &key, &extra);
        let (_, after) = mapped(&grown);
        prop_assert_eq!(kinds(&after), kinds(&before));
        prop_assert_eq!(after.delta.is_some(), before.delta.is_some());
    }
}
