//! Property tests of answers in words (`approve`, `deny: reason`, options, tool output, JSON),
//! read by the MCP front and replied by the engine, over every kind of server request in the
//! protocol seed corpus: it never panics, a refusal says what was wrong, and what a reply
//! carries (decision, reason, chosen option) is what was typed. Run longer with
//! `PROPTEST_CASES=100000 cargo test -p codex-relay-mcp fuzz_`.

use codex_relay_core::answer::{APPROVAL_OPTIONS, Decision, Reply, reply};
use codex_relay_core::pending::describe;
use codex_relay_protocol::v2::{ServerRequest, UserInputParams};
use proptest::prelude::*;
use serde_json::{Value, json};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn requests() -> Vec<ServerRequest> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../protocol/tests/fuzz-seeds/server_requests.json"
    );
    let seeds: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out: Vec<ServerRequest> = seeds
        .iter()
        .map(|s| ServerRequest::parse(s["method"].as_str().unwrap(), s["params"].clone()))
        .collect();
    out.push(ServerRequest::parse(
        "attestation/generate",
        json!({"nonce": 1}),
    ));
    out
}

/// Words → the front's typed answer → the engine's reply, as `codex_respond` does it.
fn parse(request: &ServerRequest, answers: &[String]) -> Result<Reply, String> {
    let view = describe(request, "req_1".into(), "s1".into(), 0, 1);
    let answer = codex_relay_mcp::words::answer(&view, answers)?;
    reply(request, answer)
}

fn question() -> UserInputParams {
    match requests()
        .into_iter()
        .find(|r| matches!(r, ServerRequest::UserInput(_)))
    {
        Some(ServerRequest::UserInput(q)) => q,
        _ => unreachable!("the corpus has a question"),
    }
}

fn answer_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,30}",
        prop::sample::select(APPROVAL_OPTIONS).prop_map(str::to_owned),
        ("(?i)(deny|decline|no|reject)", "[ \t]{0,2}", "\\PC{0,20}")
            .prop_map(|(w, s, r)| format!("{w}:{s}{r}")),
        Just("{\"page\": 1}".to_owned()),
        Just("error: not found".to_owned()),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_any_answer_to_any_request_is_a_reply_or_a_reason(
        request in prop::sample::select(requests()),
        answers in prop::collection::vec(answer_text(), 0..3),
    ) {
        match parse(&request, &answers) {
            Ok(reply) => prop_assert!(!reply.decision.as_str().is_empty()),
            Err(why) => prop_assert!(why.len() > 10, "{why}"),
        }
    }

    #[test]
    fn fuzz_a_denial_carries_its_reason_exactly(
        word in "(?i)(deny|denied|decline|reject|no|n)",
        reason in "\\PC{1,60}".prop_filter("a reason with text", |r| !r.trim().is_empty()),
        pad in "[ \t]{0,3}",
    ) {
        let approval = requests().remove(0);
        let reply = parse(&approval, &[format!("{pad}{word}{pad}:{pad}{reason}{pad}")]).unwrap();
        prop_assert_eq!(reply.decision, Decision::Deny);
        prop_assert_eq!(reply.reason.as_deref(), Some(reason.trim()));
        prop_assert_eq!(reply.result.unwrap(), json!({"decision": "decline"}));
    }

    #[test]
    fn fuzz_words_that_are_no_verdict_are_refused_with_the_choices(
        word in "[a-z]{1,12}".prop_filter("not a verdict word", |w| !matches!(w.as_str(),
            "approve" | "approved" | "accept" | "allow" | "yes" | "y" | "always"
            | "acceptforsession" | "approved_for_session" | "deny" | "denied" | "decline"
            | "reject" | "no" | "n" | "cancel" | "abort" | "stop")),
    ) {
        let approval = requests().remove(0);
        let why = parse(&approval, std::slice::from_ref(&word)).unwrap_err();
        prop_assert!(why.contains(&format!("{word:?}")) && why.contains("deny: <reason>"), "{why}");
    }

    #[test]
    fn fuzz_an_option_label_in_any_case_is_chosen_as_labelled(
        pick in any::<prop::sample::Index>(),
        upper in any::<bool>(),
        pad in "[ \t]{0,3}",
    ) {
        let q = question();
        let options = q.questions[0].options.clone().unwrap();
        let label = &options[pick.index(options.len())].label;
        let typed = if upper { label.to_ascii_uppercase() } else { label.clone() };
        let reply = parse(&ServerRequest::UserInput(q.clone()), &[format!("{pad}{typed}{pad}")]).unwrap();
        prop_assert_eq!(
            reply.result.unwrap(),
            json!({"answers": {q.questions[0].id.clone(): {"answers": [label]}}})
        );
    }

    #[test]
    fn fuzz_tool_output_is_passed_through_whole(text in "\\PC{0,80}") {
        let tool = requests().into_iter().find(|r| matches!(r, ServerRequest::ToolCall(_))).unwrap();
        let reply = parse(&tool, std::slice::from_ref(&text));
        if text.trim().is_empty() {
            prop_assert!(reply.is_err());
        } else {
            let sent = reply.unwrap().result.unwrap();
            let expected = match text.strip_prefix("error:") {
                Some(rest) => rest.trim(),
                None => text.as_str(),
            };
            prop_assert_eq!(sent["contentItems"][0]["text"].as_str(), Some(expected));
        }
    }
}
