//! The examples in `examples/`, run as they are (their `example` functions) against the real Codex (0.169 and 0.98) and the scripted model, so they cannot rot.

#[allow(dead_code)]
#[path = "../../examples/typed_output.rs"]
mod typed_output;

#[allow(dead_code)]
#[path = "../../examples/custom_tool.rs"]
mod custom_tool;

use crate::library_support::Bed;
use codex_relay_testkit::{Item, Reply, for_each_codex};
use serde_json::json;

for_each_codex!(the_typed_output_example, the_custom_tool_example);

async fn the_typed_output_example(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([Reply::text(
        r#"{"title":"a relay for Codex","languages":["Rust"],"has_tests":true}"#,
    )]);
    let cwd = bed.home.workspace().display().to_string();
    let summary = typed_output::example(&bed.client, &cwd)
        .await
        .expect("the example runs");
    assert_eq!(summary.title, "a relay for Codex");
    assert_eq!(summary.languages, ["Rust"]);
    assert!(summary.has_tests);
    bed.client.shutdown().await;
}

async fn the_custom_tool_example(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([
        Reply::items(vec![Item::function_call(
            "ticket",
            json!({"ticket": 7}),
            "call_7",
        )]),
        Reply::items(vec![Item::function_call(
            "ticket",
            json!({"ticket": 8}),
            "call_8",
        )]),
        Reply::text("ticket 7 is a Safari export bug; ticket 8 does not exist"),
    ]);
    let cwd = bed.home.workspace().display().to_string();
    let run = custom_tool::example(&bed.client, &cwd, "What are tickets 7 and 8 about?")
        .await
        .expect("the example runs");
    assert_eq!(
        run.text,
        "ticket 7 is a Safari export bug; ticket 8 does not exist"
    );
    let reqs = bed.model.requests();
    let found = reqs[1]
        .tool_output("call_7")
        .expect("the first call's output");
    assert!(
        found.contains("the export button does nothing on Safari"),
        "{found}"
    );
    let missing = reqs[2]
        .tool_output("call_8")
        .expect("the second call's output");
    assert!(missing.contains("there is no ticket 8"), "{missing}");
    bed.client.shutdown().await;
}
