//! Property tests (fuzzing on stable) of the line classifier and of notification and
//! server-request parsing, starting from seeds valid against Codex 0.169's schema
//! (`tests/fuzz-seeds`, checked by `crates/codex/tests/all/fuzz_seeds_schema.rs`) and mutating them.
//! Run longer with `PROPTEST_CASES=100000 cargo test -p codex-relay-protocol fuzz_`.

use crate::fuzz;

use codex_relay_protocol::jsonrpc::{
    FrameError, OutgoingNotification, OutgoingRequest, OutgoingResponse, Params,
};
use codex_relay_protocol::v2::{ApprovalDecision, ServerNotification, ServerRequest};
use codex_relay_protocol::{Incoming, RequestId, RpcError};
use fuzz::{Mutation, add_extra_everywhere, any_json, apply, config, mutation, seeds};
use proptest::prelude::*;
use serde_json::{Value, json};

fn request_id() -> impl Strategy<Value = RequestId> {
    prop_oneof![
        any::<i64>().prop_map(RequestId::Integer),
        fuzz::nasty_string().prop_map(RequestId::String),
    ]
}

/// Members the classifier does not read, so adding them changes nothing.
fn extra_members() -> impl Strategy<Value = Vec<(String, Value)>> {
    prop::collection::vec(
        (
            "[a-zA-Z_]{1,10}".prop_filter("not a JSON-RPC member", |k| {
                !matches!(k.as_str(), "id" | "method" | "params" | "result" | "error")
            }),
            any_json(),
        ),
        0..4,
    )
}

fn with_extras(line: String, extras: &[(String, Value)]) -> String {
    let mut v: Value = serde_json::from_str(&line).unwrap();
    for (k, x) in extras {
        v[k] = x.clone();
    }
    v.to_string()
}

/// A notification parsed from a whole seed message (as the peer does: line → params text).
fn notification_of(message: &Value) -> (String, Result<ServerNotification, String>) {
    let line = message.to_string();
    let method = message["method"].as_str().unwrap_or("").to_owned();
    let parsed = match Incoming::parse(&line) {
        Ok(Incoming::Notification { method, params }) => {
            let lenient = ServerNotification::from_params(&method, &params);
            match ServerNotification::try_from_params(&method, &params) {
                Ok(strict) => assert_eq!(strict, lenient),
                Err(e) => {
                    assert_eq!(lenient, ServerNotification::raw(&method, &params));
                    let said = e.to_string();
                    assert!(
                        said.contains(&method) && said.len() > method.len() + 20,
                        "{said}"
                    );
                }
            }
            Ok(lenient)
        }
        other => Err(format!("{other:?}")),
    };
    (method, parsed)
}

fn request_of(message: &Value) -> Option<ServerRequest> {
    let line = message.to_string();
    match Incoming::parse(&line).ok()? {
        Incoming::Request { method, params, .. } => {
            let lenient = ServerRequest::from_params(&method, &params);
            match ServerRequest::try_from_params(&method, &params) {
                Ok(strict) => assert_eq!(strict, lenient),
                Err(e) => {
                    assert_eq!(lenient, ServerRequest::raw(&method, &params));
                    assert!(e.to_string().contains(&method), "{e}");
                }
            }
            Some(lenient)
        }
        _ => None,
    }
}

fn seed(file: &'static str) -> impl Strategy<Value = Value> {
    prop::sample::select(seeds(file))
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn fuzz_any_text_is_classified_or_refused_with_a_reason(line in "\\PC{0,200}") {
        match Incoming::parse(&line) {
            Ok(_) => {}
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn fuzz_any_json_is_classified_or_refused_with_a_reason(v in any_json()) {
        let line = v.to_string();
        match Incoming::parse(&line) {
            Ok(_) => prop_assert!(v.is_object()),
            // Valid JSON is never a syntax error, whatever its depth or numbers.
            Err(FrameError::Json(e)) => prop_assert!(false, "{e}"),
            Err(FrameError::Shape(why)) => {
                prop_assert!(!why.is_empty());
                if !v.is_object() {
                    prop_assert_eq!(why, "not a JSON object");
                }
            }
        }
    }

    #[test]
    fn fuzz_requests_and_notifications_round_trip_with_extra_members(
        id in request_id(),
        method in fuzz::nasty_string(),
        params in any_json(),
        extras in extra_members(),
    ) {
        let line = serde_json::to_string(&OutgoingRequest { id: &id, method: &method, params: &params }).unwrap();
        match Incoming::parse(&with_extras(line, &extras)).unwrap() {
            Incoming::Request { id: i, method: m, params: p } => {
                prop_assert_eq!(i, id.clone());
                prop_assert_eq!(m, method.clone());
                prop_assert_eq!(p.value(), params.clone());
            }
            other => prop_assert!(false, "a request read as {:?}", other),
        }
        let line = serde_json::to_string(&OutgoingNotification { method: &method, params: Some(&params) }).unwrap();
        match Incoming::parse(&with_extras(line, &extras)).unwrap() {
            Incoming::Notification { method: m, params: p } => {
                prop_assert_eq!(m, method);
                prop_assert_eq!(p.value(), params);
            }
            other => prop_assert!(false, "a notification read as {:?}", other),
        }
    }

    #[test]
    fn fuzz_responses_and_errors_round_trip_with_extra_members(
        id in request_id(),
        result in any_json(),
        code in any::<i64>(),
        message in fuzz::nasty_string(),
        extras in extra_members(),
    ) {
        let line = serde_json::to_string(&OutgoingResponse { id: &id, result: Some(&result), error: None }).unwrap();
        match Incoming::parse(&with_extras(line, &extras)).unwrap() {
            Incoming::Response { id: i, result: r } => {
                prop_assert_eq!(i, id.clone());
                prop_assert_eq!(r, result);
            }
            other => prop_assert!(false, "a response read as {:?}", other),
        }
        let error = RpcError::new(code, message);
        let line = serde_json::to_string(&OutgoingResponse { id: &id, result: None, error: Some(&error) }).unwrap();
        match Incoming::parse(&with_extras(line, &extras)).unwrap() {
            Incoming::Error { id: i, error: e } => {
                prop_assert_eq!(i, Some(id));
                prop_assert_eq!(e, error);
            }
            other => prop_assert!(false, "an error read as {:?}", other),
        }
    }

    #[test]
    fn fuzz_a_truncated_line_is_a_json_error(
        message in prop_oneof![seed("notifications.json"), seed("server_requests.json")],
        cut in any::<prop::sample::Index>(),
    ) {
        let line = message.to_string();
        let mut at = cut.index(line.len());
        while !line.is_char_boundary(at) {
            at -= 1;
        }
        prop_assert!(matches!(Incoming::parse(&line[..at]), Err(FrameError::Json(_))));
    }

    #[test]
    fn fuzz_notification_seeds_stay_typed_under_extra_fields(
        message in seed("notifications.json"),
        key in "[a-z]{1,6}",
        extra in any_json(),
    ) {
        let (method, before) = notification_of(&message);
        let before = before.unwrap();
        let mut grown = message.clone();
        add_extra_everywhere(&mut grown, &key, &extra);
        let (_, after) = notification_of(&grown);
        let after = after.unwrap();
        prop_assert!(!matches!(after, ServerNotification::Unknown { .. }), "{method} became raw: {after:?}");
        prop_assert_eq!(std::mem::discriminant(&after), std::mem::discriminant(&before));
        prop_assert_eq!(after.thread_id(), before.thread_id());
    }

    #[test]
    fn fuzz_mutated_notifications_are_typed_or_kept_whole(
        message in seed("notifications.json"),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut doc = message;
        for m in &mutations {
            apply(&mut doc, m);
        }
        if let (_, Ok(parsed)) = notification_of(&doc) {
            if let ServerNotification::Unknown { method, params } = &parsed {
                // Nothing is lost: what could not be typed is kept as it came.
                prop_assert_eq!(Some(method.as_str()), doc["method"].as_str());
                prop_assert_eq!(params, doc.get("params").unwrap_or(&Value::Null));
            }
            let _ = parsed.thread_id();
        }
    }

    #[test]
    fn fuzz_server_request_seeds_stay_typed_under_extra_fields(
        message in seed("server_requests.json"),
        key in "[a-z]{1,6}",
        extra in any_json(),
    ) {
        let before = request_of(&message).unwrap();
        let mut grown = message.clone();
        add_extra_everywhere(&mut grown, &key, &extra);
        let after = request_of(&grown).unwrap();
        prop_assert!(!matches!(after, ServerRequest::Unknown { .. }), "became raw: {after:?}");
        prop_assert_eq!(after.method(), before.method());
        prop_assert_eq!(after.thread_id(), before.thread_id());
    }

    #[test]
    fn fuzz_mutated_server_requests_always_have_a_fail_closed_answer(
        message in seed("server_requests.json"),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut doc = message;
        for m in &mutations {
            apply(&mut doc, m);
        }
        if let Some(request) = request_of(&doc) {
            let answer = request.fail_closed("fuzz");
            match &request {
                ServerRequest::CommandApproval(_) | ServerRequest::FileChangeApproval(_) => {
                    prop_assert_eq!(answer.unwrap(), ApprovalDecision::Decline.to_response())
                }
                ServerRequest::Unknown { method, params } => {
                    prop_assert_eq!(Some(method.as_str()), doc["method"].as_str());
                    prop_assert_eq!(params, doc.get("params").unwrap_or(&Value::Null));
                    prop_assert!(answer.unwrap_err().message.contains("fuzz"));
                }
                _ => {}
            }
        }
    }
}

/// Mutations the generators reach rarely, kept as named cases.
#[test]
fn fuzz_regression_known_methods_with_hostile_params_are_kept_raw_with_a_reason() {
    for (method, params) in [
        (
            "turn/started",
            json!({"threadId": "t", "turn": {"id": 1e300}}),
        ),
        (
            "item/completed",
            json!({"threadId": "t", "item": {"type": "agentMessage"}}),
        ),
        (
            "item/agentMessage/delta",
            json!({"threadId": "t", "turnId": "u", "itemId": "i", "delta": u64::MAX}),
        ),
        (
            "serverRequest/resolved",
            json!({"threadId": "t", "requestId": {"nested": []}}),
        ),
        ("error", Value::Null),
    ] {
        let params = Params::from(params);
        let err = ServerNotification::try_from_params(method, &params).unwrap_err();
        assert!(err.to_string().contains(method), "{err}");
        assert_eq!(
            ServerNotification::from_params(method, &params),
            ServerNotification::raw(method, &params)
        );
    }
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let line = format!(r#"{{"method":"turn/started","params":{deep}}}"#);
    // Classified without reading the params; reading them fails with a reason, no overflow.
    let Ok(Incoming::Notification { method, params }) = Incoming::parse(&line) else {
        panic!("a deep notification is still a notification");
    };
    let err = ServerNotification::try_from_params(&method, &params).unwrap_err();
    assert!(err.to_string().contains("turn/started"), "{err}");
    let huge = r#"{"id":1e400,"result":{}}"#;
    assert!(matches!(Incoming::parse(huge), Err(FrameError::Json(_))));
}

/// Found by `fuzz_any_json_is_classified_or_refused_with_a_reason`: serde reads a struct from
/// an array, so `[1]` was a response to request 1 and `[5,"turn/started"]` a server request.
#[test]
fn fuzz_regression_an_array_is_not_a_message() {
    for line in ["[]", "[1]", r#"[5,"turn/started"]"#, r#" [null,"m",{}]"#] {
        assert!(
            matches!(
                Incoming::parse(line),
                Err(FrameError::Shape("not a JSON object"))
            ),
            "{line}"
        );
    }
}

/// Found by the round-trip properties: without serde_json's `float_roundtrip` a float in
/// params or a result (tool arguments, Codex's own numbers) changed in its last digit.
#[test]
fn fuzz_regression_floats_pass_through_unchanged() {
    let line = r#"{"id":0,"result":{"":2.283590780443475e140,"x":0.30000000000000004}}"#;
    match Incoming::parse(line).unwrap() {
        Incoming::Response { result, .. } => {
            assert_eq!(
                result,
                json!({"": 2.283590780443475e140, "x": 0.30000000000000004})
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn fuzz_mutation_helpers_change_what_they_say() {
    let mut doc = json!({"a": {"b": [1, 2]}});
    apply(&mut doc, &Mutation::Drop { at: 2 });
    assert_eq!(doc, json!({"a": {"b": [2]}}));
    apply(
        &mut doc,
        &Mutation::Replace {
            at: 1,
            with: json!("s"),
        },
    );
    assert_eq!(doc, json!({"a": {"b": "s"}}));
    apply(
        &mut doc,
        &Mutation::Extra {
            at: 1,
            key: "k".into(),
            value: json!(1),
        },
    );
    assert_eq!(doc, json!({"a": {"b": "s", "k": 1}}));
}
