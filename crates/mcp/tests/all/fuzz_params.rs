//! Property tests of the MCP tools' argument parsing: any arguments give the typed parameters
//! or an error naming the tool, what was wrong and what the tool takes; never a panic.
//! Unknown argument names are refused (not ignored), so a misspelt option is never silently
//! dropped. Run longer with `PROPTEST_CASES=100000 cargo test -p codex-relay-mcp fuzz_`.

use codex_relay_mcp::params::{
    InterruptParams, ListParams, RespondParams, SayParams, StartParams, StatusParams, parse,
};
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

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

const KEYS: &[&str] = &[
    "prompt",
    "workingDirectory",
    "model",
    "approvalPolicy",
    "sandbox",
    "fullAuto",
    "profile",
    "config",
    "baseInstructions",
    "images",
    "skipGitRepoCheck",
    "outputSchema",
    "sessionId",
    "message",
    "outputLines",
    "cursor",
    "waitMs",
    "until",
    "id",
    "answers",
    "limit",
    "dangerouslyBypassApprovalsAndSandbox",
    "session_id",
    "",
    "é",
];

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "\\PC{0,20}".prop_map(Value::from),
        prop::sample::select(vec![
            "on-request",
            "never",
            "read-only",
            "attention",
            "approve"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{0,4}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arguments() -> impl Strategy<Value = Option<Map<String, Value>>> {
    prop::option::of(
        prop::collection::btree_map(
            prop::sample::select(KEYS).prop_map(str::to_owned),
            value(),
            0..6,
        )
        .prop_map(|m| m.into_iter().collect()),
    )
}

fn check<P: DeserializeOwned>(
    tool: &str,
    args: Option<Map<String, Value>>,
) -> Result<(), TestCaseError> {
    let signature = "{sig}";
    if let Err(e) = parse::<P>(tool, signature, args) {
        prop_assert!(
            e.starts_with(&format!("{tool}: invalid arguments: ")),
            "{e}"
        );
        prop_assert!(e.ends_with(&format!("{tool} takes {signature}")), "{e}");
        prop_assert!(
            e.len() > tool.len() * 2 + 40,
            "the error says what was wrong: {e}"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_any_arguments_parse_or_say_what_is_wrong(args in arguments()) {
        check::<StartParams>("codex_start", args.clone())?;
        check::<SayParams>("codex_say", args.clone())?;
        check::<StatusParams>("codex_status", args.clone())?;
        check::<RespondParams>("codex_respond", args.clone())?;
        check::<InterruptParams>("codex_interrupt", args.clone())?;
        check::<ListParams>("codex_list", args)?;
    }

    #[test]
    fn fuzz_valid_arguments_with_an_unknown_name_are_refused_by_name(
        name in "[a-zA-Z]{1,12}".prop_filter("not a parameter", |n| !KEYS.contains(&n.as_str())),
        extra in value(),
        wait in any::<u64>(),
    ) {
        let mut args = json!({"sessionId": "s", "waitMs": wait, "until": "attention"})
            .as_object().cloned().unwrap();
        prop_assert!(parse::<StatusParams>("codex_status", "", Some(args.clone())).is_ok());
        args.insert(name.clone(), extra);
        let e = parse::<StatusParams>("codex_status", "", Some(args)).unwrap_err();
        prop_assert!(e.contains(&format!("unknown field `{name}`")), "{e}");
    }

    #[test]
    fn fuzz_answers_round_trip_as_one_or_many(answers in prop::collection::vec("\\PC{0,20}", 1..4)) {
        let one = json!({"sessionId": "s", "id": "r", "answers": answers[0]});
        let p: RespondParams = parse("codex_respond", "", one.as_object().cloned()).unwrap();
        prop_assert_eq!(p.answers, vec![answers[0].clone()]);
        let many = json!({"sessionId": "s", "id": "r", "answers": answers});
        let p: RespondParams = parse("codex_respond", "", many.as_object().cloned()).unwrap();
        prop_assert_eq!(p.answers, answers);
    }
}
