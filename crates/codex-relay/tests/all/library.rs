//! The library on the real Codex (0.169 and 0.98) and the scripted model: typed output, invalid output, caller tools (arguments in, result to the model, panics and timeouts as failed calls), approval callbacks, and a deadline that interrupts `sleep 30`.

use crate::library_support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::library_support::Bed;
use codex_relay::event::{Ev, ToolEndStatus};
use codex_relay::{
    Approval, ApprovalDecision, ApprovalKind, ErrorKind, Phase, RunEvent, Stopped, Tool,
};
use codex_relay_testkit::{Item, Reply, for_each_codex};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;

for_each_codex!(
    typed_output_is_parsed_into_a_struct,
    invalid_json_is_a_response_error_with_the_raw_text,
    a_custom_tool_gets_the_models_arguments_and_the_model_gets_its_result,
    a_panicking_tool_and_a_slow_tool_are_failed_calls_and_the_turn_completes,
    an_approval_callback_sees_the_command_and_its_denial_reaches_the_model,
    the_auto_policy_approves_and_the_deny_policy_declines,
    one_shot_runs_free_their_session_slot,
    a_stream_carries_live_command_output_as_deltas,
    a_deadline_interrupts_sleep_30_within_the_grace,
);

#[derive(Debug, Deserialize, schemars::JsonSchema, PartialEq)]
struct Summary {
    title: String,
    files: Vec<String>,
    note: Option<String>,
}

async fn typed_output_is_parsed_into_a_struct(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([
        Reply::text(r#"{"title":"relay","files":["a.rs","b.rs"],"note":null}"#).with_usage(200, 40),
    ]);
    let session = bed.client.session(bed.options()).await.unwrap();
    let typed = session
        .run_typed::<Summary>("summarize the repository")
        .await
        .expect("typed run");
    assert_eq!(
        typed.value,
        Summary {
            title: "relay".into(),
            files: vec!["a.rs".into(), "b.rs".into()],
            note: None
        }
    );
    assert_eq!(typed.run.usage.turn.input_tokens, 200);
    assert_eq!(typed.run.usage.turn.output_tokens, 40);
    // What reached the model: the strict schema, every property required, nothing extra.
    let format = bed.model.requests()[0]
        .text_format()
        .cloned()
        .expect("text.format");
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["strict"], true);
    assert_eq!(format["schema"]["additionalProperties"], false);
    let mut required: Vec<String> =
        serde_json::from_value(format["schema"]["required"].clone()).unwrap();
    required.sort();
    assert_eq!(required, ["files", "note", "title"]);
    bed.client.shutdown().await;
}

async fn invalid_json_is_a_response_error_with_the_raw_text(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model
        .push([Reply::text("Sure! Here is the summary: relay, two files.")]);
    let session = bed.client.session(bed.options()).await.unwrap();
    let err = session
        .run_typed::<Summary>("summarize the repository")
        .await
        .expect_err("the answer is not JSON");
    assert_eq!(err.phase(), Phase::Response, "{err}");
    assert_eq!(err.kind(), &ErrorKind::InvalidOutput);
    assert_eq!(
        err.raw_text(),
        Some("Sure! Here is the summary: relay, two files.")
    );
    assert_eq!(err.session_id(), Some(session.id()));
    bed.client.shutdown().await;
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Lookup {
    ticket: u32,
}

async fn a_custom_tool_gets_the_models_arguments_and_the_model_gets_its_result(
    version: &'static str,
) {
    let bed = Bed::start(version).await;
    bed.model.push([
        Reply::items(vec![Item::function_call(
            "ticket",
            json!({"ticket": 42}),
            "call_t",
        )]),
        Reply::text("ticket 42 is about the slow login page"),
    ]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let tool = Tool::typed("ticket", "Reads a ticket", move |q: Lookup| {
        record.lock().unwrap().push(q.ticket);
        async move { Ok::<_, String>(format!("ticket {}: the login page is slow", q.ticket)) }
    });
    let session = bed.client.session(bed.options().tool(tool)).await.unwrap();
    let mut stream = session.stream("what is ticket 42 about?").await.unwrap();
    let mut kinds = Vec::new();
    let mut last_seq = 0;
    while let Some(event) = stream.next().await {
        if let RunEvent::Event(env) = event {
            assert!(env.seq > last_seq, "events arrive in order");
            last_seq = env.seq;
            kinds.push(env.ev.kind());
        }
    }
    let result = stream.finish().await.expect("the run completes");
    assert_eq!(*seen.lock().unwrap(), vec![42]);
    assert_eq!(result.text, "ticket 42 is about the slow login page");
    assert!(kinds.contains(&"turn-end"), "{kinds:?}");
    let reqs = bed.model.requests();
    assert!(reqs[0].tool_names().contains(&"ticket".to_owned()));
    let output = reqs[1].tool_output("call_t").expect("the tool's output");
    assert!(
        output.contains("ticket 42: the login page is slow"),
        "{output}"
    );
    // 0.169 reports a dynamic tool call as an item (0.98 does not).
    if version != "0.98.0" {
        let calls = result.tool_calls();
        let call = calls
            .iter()
            .find(|c| c.name.contains("ticket"))
            .expect("the call is an item");
        assert_eq!(call.status, Some(ToolEndStatus::Completed), "{calls:?}");
    }
    bed.client.shutdown().await;
}

async fn a_panicking_tool_and_a_slow_tool_are_failed_calls_and_the_turn_completes(
    version: &'static str,
) {
    let bed = Bed::start(version).await;
    bed.model.push([
        Reply::items(vec![Item::function_call("explode", json!({}), "call_p")]),
        Reply::items(vec![Item::function_call("dawdle", json!({}), "call_s")]),
        Reply::text("carried on"),
    ]);
    let explode = Tool::new(
        "explode",
        "Always panics",
        json!({"type": "object"}),
        |_| async {
            if true {
                panic!("the tool fell over");
            }
            Ok::<String, String>(String::new())
        },
    );
    let finished = Arc::new(Mutex::new(false));
    let flag = finished.clone();
    let dawdle = Tool::new(
        "dawdle",
        "Takes forever",
        json!({"type": "object"}),
        move |_| {
            let flag = flag.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(30)).await;
                *flag.lock().unwrap() = true;
                Ok::<_, String>("too late".to_owned())
            }
        },
    )
    .timeout(Duration::from_millis(500));
    let session = bed
        .client
        .session(bed.options().tool(explode).tool(dawdle))
        .await
        .unwrap();
    let started = Instant::now();
    let result = session
        .run("use both tools")
        .await
        .expect("the turn completes");
    assert_eq!(result.text, "carried on");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let reqs = bed.model.requests();
    let panicked = reqs[1].tool_output("call_p").expect("the panic's output");
    assert!(
        panicked.contains("panicked") && panicked.contains("the tool fell over"),
        "{panicked}"
    );
    let slow = reqs[2].tool_output("call_s").expect("the timeout's output");
    assert!(
        slow.contains("did not finish within") && slow.contains("cancelled"),
        "{slow}"
    );
    // Cancelled means dropped: the slow tool never got to finish.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!*finished.lock().unwrap());
    bed.client.shutdown().await;
}

async fn an_approval_callback_sees_the_command_and_its_denial_reaches_the_model(
    version: &'static str,
) {
    let bed = Bed::start(version).await;
    bed.model.push([
        Reply::exec("touch approved-by-nobody.txt", "call_x"),
        Reply::text("understood, not touching it"),
    ]);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let record = asked.clone();
    let approval = Approval::callback(move |req| {
        record.lock().unwrap().push(req);
        async { ApprovalDecision::deny("no new files on fridays") }
    });
    let session = bed
        .client
        .session(bed.options().approval(approval))
        .await
        .unwrap();
    let result = session
        .run("create a file")
        .await
        .expect("the turn completes");
    assert_eq!(result.text, "understood, not touching it");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].kind, ApprovalKind::Command);
    assert!(
        asked[0]
            .command
            .as_deref()
            .unwrap_or("")
            .contains("touch approved-by-nobody.txt")
    );
    assert_eq!(
        asked[0].cwd.as_deref(),
        Some(bed.home.workspace().to_str().unwrap())
    );
    assert!(!bed.home.workspace().join("approved-by-nobody.txt").exists());
    let next = bed.model.requests()[1].body.to_string();
    assert!(next.contains("no new files on fridays"), "{next}");
    assert!(result.events.iter().any(|e| matches!(
        &e.ev,
        Ev::RequestResolved { decision, by, .. } if decision.as_str() == "deny" && by.as_str() == "library"
    )));
    bed.client.shutdown().await;
}

async fn the_auto_policy_approves_and_the_deny_policy_declines(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([
        Reply::exec("touch auto.txt", "call_a"),
        Reply::text("made it"),
        Reply::exec("touch denied.txt", "call_d"),
        Reply::text("could not"),
    ]);
    let auto = bed
        .client
        .session(bed.options().approval(Approval::Auto))
        .await
        .unwrap();
    assert_eq!(auto.run("make auto.txt").await.unwrap().text, "made it");
    assert!(bed.home.workspace().join("auto.txt").exists());
    let deny = bed
        .client
        .session(bed.options().approval(Approval::Deny))
        .await
        .unwrap();
    let result = deny.run("make denied.txt").await.unwrap();
    assert_eq!(result.text, "could not");
    assert!(!bed.home.workspace().join("denied.txt").exists());
    assert!(result.events.iter().any(|e| matches!(
        &e.ev,
        Ev::RequestResolved { decision, by, .. } if decision.as_str() == "deny" && by.as_str() == "library"
    )));
    // 0.169 reports the declined command as an item (0.98 does not).
    if version != "0.98.0" {
        let calls = result.tool_calls();
        assert!(
            calls
                .iter()
                .any(|c| c.status == Some(ToolEndStatus::Declined)),
            "{calls:?}"
        );
    }
    let next = bed.model.requests()[3].body.to_string();
    assert!(
        next.contains("denied by the caller's approval policy"),
        "{next}"
    );
    bed.client.shutdown().await;
}

async fn one_shot_runs_free_their_session_slot(version: &'static str) {
    let model = codex_relay_testkit::ModelServer::start().await;
    let home = codex_relay_testkit::CodexHome::new(model.url());
    let client = library_support::builder(version, &home)
        .max_sessions(1)
        .build()
        .await
        .unwrap();
    model.push([Reply::text("one"), Reply::text("two")]);
    let cwd = home.workspace().display().to_string();
    let options = codex_relay::SessionOptions::new().cwd(cwd);
    let first = client.run(options.clone(), "first").await.unwrap();
    let second = client.run(options, "second").await.unwrap();
    assert_eq!((first.text.as_str(), second.text.as_str()), ("one", "two"));
    assert_ne!(first.session_id, second.session_id);
    client.shutdown().await;
}

async fn a_stream_carries_live_command_output_as_deltas(version: &'static str) {
    let bed = Bed::start(version).await;
    // Codex hands back what a command prints in its first moments with the call and streams
    // what comes later: the output starts after a pause.
    bed.model.push([
        Reply::exec(
            "sleep 1; printf 'alpha\\n'; sleep 0.3; printf 'beta\\n'",
            "call_o",
        ),
        Reply::text("printed"),
    ]);
    let session = bed.client.session(bed.options()).await.unwrap();
    let mut stream = session.stream("print two lines").await.unwrap();
    let mut streamed = String::new();
    let mut turn_end_seen_after_output = false;
    while let Some(event) = stream.next().await {
        match event {
            RunEvent::Delta(d) if d.stream == "output" => streamed.push_str(&d.delta),
            RunEvent::Delta(_) => {}
            RunEvent::Event(e) => {
                if matches!(e.ev, Ev::TurnEnd { .. }) {
                    turn_end_seen_after_output = streamed.contains("beta");
                }
            }
        }
    }
    let result = stream.finish().await.unwrap();
    assert_eq!(result.text, "printed");
    assert!(
        streamed.contains("alpha") && streamed.contains("beta"),
        "{streamed:?}"
    );
    assert!(
        turn_end_seen_after_output,
        "deltas arrive live, before the turn ends"
    );
    bed.client.shutdown().await;
}

/// The deadline must pass while the command runs, and how long Codex takes to reach the
/// command depends on the machine (on a loaded one, starting Codex and the model's first
/// reply took longer than a 4 s deadline, and the turn was interrupted before it ran the
/// command). So an attempt whose command never started proves nothing and is tried again in a
/// fresh session with twice the deadline; every attempt must still end as an interrupted
/// deadline within the grace.
async fn a_deadline_interrupts_sleep_30_within_the_grace(version: &'static str) {
    let bed = Bed::start(version).await;
    let grace = Duration::from_secs(10);
    let mut deadline = Duration::from_secs(4);
    for attempt in 1..=3 {
        let marker = format!("deadline-{}-{}-{attempt}", std::process::id(), version);
        // The command outlives every deadline tried (4, 8, 16 s).
        bed.model.route(
            &marker,
            [Reply::exec(&format!("sleep 30; echo {marker}"), "call_z")],
        );
        let session = bed.client.session(bed.options()).await.unwrap();
        let started = Instant::now();
        let err = session
            .prompt(format!("sleep for a while ({marker})"))
            .deadline(deadline)
            .interrupt_grace(grace)
            .run()
            .await
            .expect_err("the deadline passes");
        let took = started.elapsed();
        assert_eq!(err.phase(), Phase::Budget, "{err}");
        assert_eq!(
            err.kind(),
            &ErrorKind::Deadline {
                stopped: Stopped::Interrupted
            },
            "{err}"
        );
        assert!(err.to_string().contains("interrupted"), "{err}");
        assert!(took >= deadline && took < deadline + grace, "{took:?}");
        let events = bed
            .client
            .relay()
            .events(session.id(), 0, 10_000)
            .await
            .unwrap();
        let ran = events.iter().any(|e| matches!(&e.ev, Ev::ToolCallStart { args, .. } if args.to_string().contains(&marker)));
        if !ran {
            println!(
                "{version}: attempt {attempt}: the deadline {deadline:?} passed before Codex ran the command; trying again with twice the deadline"
            );
            deadline *= 2;
            continue;
        }
        // The command had started, and went with the turn.
        let mut left = codex_relay_testkit::procs::pids_with_cmdline(&marker);
        for _ in 0..50 {
            if left.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            left = codex_relay_testkit::procs::pids_with_cmdline(&marker);
        }
        assert!(left.is_empty(), "sleep 30 still runs: {left:?}");
        println!("{version}: deadline {deadline:?} → interrupted after {took:?}");
        bed.client.shutdown().await;
        return;
    }
    panic!(
        "the command never started before a deadline of up to {:?}",
        deadline / 2
    );
}

/// Real Codex stops an interrupted turn within milliseconds (even with one of our tools still
/// running), so the kill path is proven on a fake app-server that never answers
/// `turn/interrupt`: after the grace, the whole process group goes, the command with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_kills_the_process_group_when_the_interrupt_does_not_land() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("deaf-{}", std::process::id());
    let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes/deaf-app-server");
    let client = codex_relay::ClientBuilder::new()
        .codex_binary(fake)
        .codex_env("DEAF_MARKER", Some(marker.clone().into()))
        .store(dir.path().join("relay.db").display().to_string())
        .build()
        .await
        .unwrap();
    let options = codex_relay::SessionOptions::new().cwd(dir.path().display().to_string());
    let session = client.session(options).await.unwrap();
    let (deadline, grace) = (Duration::from_secs(1), Duration::from_secs(1));
    // Watch for the command while the run goes on: it must have run before the kill.
    let seen = Arc::new(Mutex::new(false));
    let watch = {
        let (seen, marker) = (seen.clone(), marker.clone());
        tokio::spawn(async move {
            loop {
                if !codex_relay_testkit::procs::pids_with_cmdline(&marker).is_empty() {
                    *seen.lock().unwrap() = true;
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let started = Instant::now();
    let err = session
        .prompt("never ends")
        .deadline(deadline)
        .interrupt_grace(grace)
        .run()
        .await
        .expect_err("the deadline passes");
    let took = started.elapsed();
    assert_eq!(
        err.kind(),
        &ErrorKind::Deadline {
            stopped: Stopped::Killed
        },
        "{err}"
    );
    assert_eq!(err.phase(), Phase::Budget);
    assert!(
        err.to_string().contains("process group was killed")
            && err.to_string().contains("to itself"),
        "{err}"
    );
    assert!(
        took >= deadline + grace && took < deadline + grace + Duration::from_secs(3),
        "{took:?}"
    );
    watch.abort();
    assert!(*seen.lock().unwrap(), "the fake's command never ran");
    let left = codex_relay_testkit::procs::pids_with_cmdline(&marker);
    assert!(left.is_empty(), "the command outlived the kill: {left:?}");
    println!("kill path: deadline {deadline:?} + grace {grace:?} → killed after {took:?}");
    client.shutdown().await;
}

/// Two sessions on one app-server (the real Codex): a run with a deadline in the first ends
/// interrupted (Codex stops the turn when asked, within the grace), and the second session's
/// turn, running meanwhile on the same process, completes; the process was never stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_in_one_session_leaves_the_other_on_the_same_process_alone() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    bed.model.route(
        "SLOW",
        [Reply::exec("sleep 30", "call_slow"), Reply::text("never")],
    );
    bed.model.route(
        "STEADY",
        [
            Reply::exec("sleep 6; echo steady", "call_steady"),
            Reply::text("steady done"),
        ],
    );
    let first = bed.client.session(bed.options()).await.unwrap();
    let second = bed.client.session(bed.options()).await.unwrap();
    let relay = bed.client.relay();
    let pid = relay.server_of(first.id()).map(|s| s.pid());
    assert!(pid.is_some(), "the first session has its process");
    assert_eq!(
        relay.server_of(second.id()).map(|s| s.pid()),
        pid,
        "both sessions are on one app-server"
    );
    let steady = tokio::spawn({
        let second = second.clone();
        async move { second.run("STEADY go").await }
    });
    let err = first
        .prompt("SLOW go")
        .deadline(Duration::from_secs(3))
        .interrupt_grace(Duration::from_secs(10))
        .run()
        .await
        .expect_err("the deadline passes");
    assert_eq!(
        err.kind(),
        &ErrorKind::Deadline {
            stopped: Stopped::Interrupted
        },
        "{err}"
    );
    let done = steady
        .await
        .unwrap()
        .expect("the second session's turn completes");
    assert_eq!(done.text, "steady done");
    assert_eq!(
        relay.server_of(second.id()).map(|s| s.pid()),
        pid,
        "the shared process was not stopped"
    );
    bed.client.shutdown().await;
}

/// Two sessions on one app-server that does not stop turns when asked (a fake, as the real
/// Codex always does): past the grace the first session is closed, not the process, so the
/// second goes on working on it; the first's log ends its turn as cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_grace_a_shared_process_is_kept_and_the_session_closed() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("deaf-shared-{}", std::process::id());
    let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes/deaf-app-server");
    let client = codex_relay::ClientBuilder::new()
        .codex_binary(fake)
        .codex_env("DEAF_MARKER", Some(marker.clone().into()))
        .store(dir.path().join("relay.db").display().to_string())
        .build()
        .await
        .unwrap();
    let options = || codex_relay::SessionOptions::new().cwd(dir.path().display().to_string());
    let first = client.session(options()).await.unwrap();
    let second = client.session(options()).await.unwrap();
    let relay = client.relay();
    let pid = relay.server_of(first.id()).map(|s| s.pid());
    assert_eq!(
        relay.server_of(second.id()).map(|s| s.pid()),
        pid,
        "one process"
    );
    let err = first
        .prompt("never ends")
        .deadline(Duration::from_secs(1))
        .interrupt_grace(Duration::from_secs(1))
        .run()
        .await
        .expect_err("the deadline passes");
    assert_eq!(
        err.kind(),
        &ErrorKind::Deadline {
            stopped: Stopped::Closed
        },
        "{err}"
    );
    assert!(err.to_string().contains("serves other sessions"), "{err}");
    let events = relay.events(first.id(), 0, 1000).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.ev, Ev::TurnEnd { status, .. }
            if *status == codex_relay::event::TurnEndStatus::Cancelled)),
        "the first session's log ends the turn: {events:?}"
    );
    assert_eq!(relay.status(first.id()).unwrap().status.as_str(), "closed");
    // The process was not stopped: the second session still works on it.
    let done = second
        .run("QUICK please")
        .await
        .expect("the second session works");
    assert_eq!(done.text, "quick done");
    assert_eq!(relay.server_of(second.id()).map(|s| s.pid()), pid);
    client.shutdown().await;
    let left = codex_relay_testkit::procs::pids_with_cmdline(&marker);
    assert!(
        left.is_empty(),
        "the fake's command outlived the shutdown: {left:?}"
    );
}
