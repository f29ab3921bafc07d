//! Property test of the peer's line handling end to end: whatever hostile lines Codex writes
//! (random bytes, mutated protocol messages, truncated lines), the peer answers every server
//! request it could read, keeps routing, and still completes the next call.
//! Run longer with `PROPTEST_CASES=5000 cargo test -p codex-relay-codex --test all fuzz_peer`.

// The protocol crate's strategies, shared with its tests and core's. The peer's lines need no
// extra members added everywhere, so `add_extra_everywhere` is unused here (and only here).
// (`#[expect]` is not fulfilled by dead code inside a module, so this is an `allow`.)
#[allow(dead_code)]
#[path = "../../../protocol/tests/all/fuzz.rs"]
mod fuzz;

use std::time::Duration;

use codex_relay_codex::{Peer, PeerConfig, PeerEvent};
use codex_relay_protocol::Incoming;
use fuzz::{apply, config, mutation, seeds};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// One hostile line: raw bytes, a mutated seed, or a seed cut short.
fn hostile_line() -> impl Strategy<Value = Vec<u8>> {
    let all: Vec<Value> = [seeds("notifications.json"), seeds("server_requests.json")].concat();
    prop_oneof![
        prop::collection::vec(any::<u8>().prop_filter("one line", |b| *b != b'\n'), 0..64),
        (
            prop::sample::select(all.clone()),
            prop::collection::vec(mutation(), 0..3)
        )
            .prop_map(|(mut doc, ms)| {
                ms.iter().for_each(|m| apply(&mut doc, m));
                doc.to_string().into_bytes()
            }),
        (prop::sample::select(all), any::<prop::sample::Index>()).prop_map(|(doc, cut)| {
            let text = doc.to_string().into_bytes();
            let at = cut.index(text.len());
            text[..at].to_vec()
        }),
    ]
}

/// Server requests among `lines` (what the peer must answer, fail-closed).
fn requests_in(lines: &[Vec<u8>]) -> usize {
    lines
        .iter()
        .filter_map(|l| std::str::from_utf8(l).ok())
        .filter(|l| l.len() <= 4096)
        .filter(|l| matches!(Incoming::parse(l), Ok(Incoming::Request { .. })))
        .count()
}

async fn survives(lines: Vec<Vec<u8>>) -> Result<(), TestCaseError> {
    let (peer_out, fake_in) = tokio::io::duplex(1 << 20);
    let (mut fake_out, peer_in) = tokio::io::duplex(1 << 20);
    let config = PeerConfig {
        max_line_bytes: 4096,
        request_timeout: Duration::from_secs(5),
        ..PeerConfig::default()
    };
    let peer = Peer::spawn(peer_in, peer_out, config, None);
    let mut from_peer = BufReader::new(fake_in).lines();
    let mut sentinel = peer.subscribe_thread("fuzz-sentinel");
    for line in &lines {
        fake_out.write_all(line).await.unwrap();
        fake_out.write_all(b"\n").await.unwrap();
    }
    fake_out
        .write_all(b"{\"method\":\"fuzz/done\",\"params\":{\"threadId\":\"fuzz-sentinel\"}}\n")
        .await
        .unwrap();
    // Every line before the sentinel has been handled once it arrives.
    loop {
        let event = tokio::time::timeout(Duration::from_secs(5), sentinel.recv()).await;
        match event {
            Ok(Some(PeerEvent::Notification(n))) if n.raw.contains("fuzz/done") => break,
            Ok(Some(PeerEvent::Closed(e))) => prop_assert!(false, "the peer closed: {e}"),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => prop_assert!(false, "the sentinel never came"),
        }
    }
    prop_assert!(peer.closed().is_none());
    let call = tokio::spawn({
        let peer = peer.clone();
        async move { peer.request("fuzz/ping", &json!({}), None).await }
    });
    // Fail-closed answers to the hostile requests come first, then our call.
    let mut answers = 0;
    let ping = loop {
        let line = tokio::time::timeout(Duration::from_secs(5), from_peer.next_line())
            .await
            .expect("the peer writes")
            .unwrap()
            .expect("a line");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "fuzz/ping" {
            break v;
        }
        answers += 1;
    };
    prop_assert_eq!(answers, requests_in(&lines));
    let reply = format!("{{\"id\":{},\"result\":{{\"pong\":true}}}}\n", ping["id"]);
    fake_out.write_all(reply.as_bytes()).await.unwrap();
    let result = call.await.unwrap();
    prop_assert_eq!(result.ok(), Some(json!({"pong": true})));
    Ok(())
}

proptest! {
    #![proptest_config(config(32))]

    #[test]
    fn fuzz_hostile_lines_never_stop_the_peer(lines in prop::collection::vec(hostile_line(), 0..12)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(survives(lines))?;
    }
}
