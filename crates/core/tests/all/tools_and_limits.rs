//! More engine scenarios on the real Codex: live deltas, dynamic tools (in-process and through
//! the broker), questions in plan mode, patch approvals with their diff, the MAX_SESSIONS cap
//! and closing a session mid-approval.

use std::time::Duration;

const LONG: Duration = Duration::from_secs(300);

mod live_deltas {
    use crate::common::{Backend, Env};
    use codex_relay_core::{CreateOptions, PermissionMode, SessionStatus};
    use codex_relay_testkit::Reply;

    /// Command output streams to live subscribers as deltas (not numbered, not stored), and the
    /// completed call in the log carries the whole output.
    async fn command_output_streams_as_deltas(version: &'static str) {
        let Some(env) = Env::start(version, Backend::Sqlite, super::LONG).await else {
            return;
        };
        // Codex returns what a command prints in its first moments with the call, and streams
        // only what comes later as deltas: the output starts after a pause.
        env.model.push([
            Reply::exec(
                "sleep 1; printf 'alpha\\n'; sleep 0.3; printf 'beta\\n'",
                "call_o",
            ),
            Reply::text("printed"),
        ]);
        let (h, _) = env
            .relay
            .create(CreateOptions {
                cwd: Some(env.cwd()),
                mode: Some(PermissionMode::ReadOnly),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut follow = env
            .relay
            .follow(h.id(), 0, codex_relay_core::FollowOptions::default())
            .await
            .unwrap();
        env.relay
            .say(h.id(), codex_relay_core::SayInput::text("print two lines"))
            .await
            .unwrap();
        env.until(h.id(), "the turn", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 1
        })
        .await;
        let mut streamed = String::new();
        // Everything the turn logged and streamed has been sent; read until nothing comes.
        while let Ok(Some(Ok(next))) =
            tokio::time::timeout(std::time::Duration::from_millis(300), follow.next()).await
        {
            if let codex_relay_core::Followed::Delta(d) = next
                && d.stream == "output"
            {
                streamed.push_str(&d.delta);
            }
        }
        assert!(
            streamed.contains("alpha") && streamed.contains("beta"),
            "streamed: {streamed:?}"
        );
        let ended = env
            .all_events(h.id())
            .await
            .into_iter()
            .find_map(|e| match &e.ev {
                codex_relay_core::Ev::ToolCallEnd { output, .. } => output.clone(),
                _ => None,
            });
        assert!(ended.unwrap_or_default().contains("beta"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_169_0() {
        command_output_streams_as_deltas(codex_relay_testkit::NEWEST).await
    }

    // Codex 0.98 sends no `item/commandExecution/outputDelta` for such a command (observed):
    // its output only arrives with the completed item, which the other scenarios cover.
}

mod limits_and_close {
    use crate::common::{Backend, Env};
    use codex_relay_core::{
        CreateOptions, Ev, PermissionMode, RelayError, SayInput, SessionStatus,
    };
    use codex_relay_testkit::Reply;

    /// MAX_SESSIONS answers with a clear error; closing a session mid-approval declines the
    /// approval, ends the session, frees its slot, and later input is refused.
    async fn the_cap_and_closing_mid_approval(version: &'static str) {
        let Some(mut env) = Env::start(version, Backend::Sqlite, super::LONG).await else {
            return;
        };
        env.config.max_sessions = 1;
        env.relay = codex_relay_core::Relay::open(env.config.clone())
            .await
            .unwrap();
        env.model.push([Reply::exec("touch closed.txt", "call_c")]);
        let opts = || CreateOptions {
            prompt: Some("make closed.txt".into()),
            cwd: Some(env.cwd()),
            mode: Some(PermissionMode::Default),
            ..Default::default()
        };
        let (h, _) = env.relay.create(opts()).await.unwrap();
        let id = h.id().to_owned();
        let snap = env
            .until(&id, "the approval", |s| {
                s.status == SessionStatus::AwaitingApproval
            })
            .await;
        let pending = snap.pending[0].id.clone();

        match env.relay.create(opts()).await {
            Err(e @ RelayError::TooManySessions { max: 1 }) => {
                assert!(e.to_string().contains("MAX_SESSIONS"), "{e}")
            }
            Err(other) => panic!("expected TooManySessions, got {other}"),
            Ok(_) => panic!("expected TooManySessions, got a session"),
        }

        env.relay.close(&id, false).await.unwrap();
        let snap = env.relay.status(&id).unwrap();
        assert_eq!(snap.status, SessionStatus::Closed);
        assert!(snap.pending.is_empty());
        let events = env.all_events(&id).await;
        assert!(events.iter().any(
            |e| matches!(&e.ev, Ev::RequestResolved { id, by, decision, .. }
            if *id == pending && by.as_str() == "session-closed" && decision.as_str() == "deny")
        ));
        assert!(!env.home.workspace().join("closed.txt").exists());
        assert!(matches!(
            env.relay.say(&id, SayInput::text("more")).await,
            Err(RelayError::Closed(_))
        ));

        // The slot is free again.
        env.model.push([Reply::text("second session")]);
        let (h2, _) = env
            .relay
            .create(CreateOptions {
                prompt: Some("hi".into()),
                cwd: Some(env.cwd()),
                ..Default::default()
            })
            .await
            .unwrap();
        env.until(h2.id(), "the second session", |s| {
            s.status == SessionStatus::Idle && s.turn_count == 1
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_169_0() {
        the_cap_and_closing_mid_approval(codex_relay_testkit::NEWEST).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_98_0() {
        the_cap_and_closing_mid_approval("0.98.0").await
    }
}

mod dynamic_tools {
    use std::sync::Arc;

    use crate::common::{Backend, Env};
    use codex_relay_core::answer::PendingKind;
    use codex_relay_core::{
        Answer, CreateOptions, DynamicTool, PendingDetails, PermissionMode, SessionStatus,
        ToolHandler,
    };
    use codex_relay_protocol::v2::DynamicToolSpec;
    use codex_relay_testkit::{Item, Reply};
    use futures::future::BoxFuture;
    use serde_json::{Value, json};

    struct Weather;

    impl ToolHandler for Weather {
        fn call(&self, arguments: Value) -> BoxFuture<'static, Result<String, String>> {
            Box::pin(async move {
                Ok(format!(
                    "sunny in {}",
                    arguments["city"].as_str().unwrap_or("?")
                ))
            })
        }
    }

    fn spec(name: &str) -> DynamicToolSpec {
        DynamicToolSpec::function(
            name,
            "A test tool",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        )
    }

    /// One tool answered in-process by its handler, one without a handler answered through the
    /// broker like an approval; the model gets both outputs.
    async fn handler_and_broker_tools(version: &'static str) {
        let Some(env) = Env::start(version, Backend::Sqlite, super::LONG).await else {
            return;
        };
        env.model.push([
            Reply::items(vec![Item::function_call(
                "weather",
                json!({"city": "Oslo"}),
                "call_w",
            )]),
            Reply::items(vec![Item::function_call(
                "ask_ops",
                json!({"city": "Rome"}),
                "call_o",
            )]),
            Reply::text("all done"),
        ]);
        let opts = CreateOptions {
            prompt: Some("use the tools".into()),
            cwd: Some(env.cwd()),
            mode: Some(PermissionMode::ReadOnly),
            dynamic_tools: vec![
                DynamicTool {
                    spec: spec("weather"),
                    handler: Some(Arc::new(Weather)),
                },
                DynamicTool {
                    spec: spec("ask_ops"),
                    handler: None,
                },
            ],
            ..Default::default()
        };
        let (h, _) = env.relay.create(opts).await.unwrap();
        let id = h.id().to_owned();
        let snap = env
            .until(&id, "the tool call without a handler", |s| {
                s.status == SessionStatus::AwaitingInput
            })
            .await;
        let pending = &snap.pending[0];
        assert_eq!(pending.kind, PendingKind::ToolCall);
        assert!(
            matches!(&pending.details, PendingDetails::ToolCall { tool, .. } if tool == "ask_ops"),
            "{:?}",
            pending.details
        );
        env.relay
            .respond(
                &id,
                &pending.id,
                Answer::ToolOutput {
                    success: true,
                    text: "ops says: closed today".into(),
                },
                codex_relay_core::Decider::library("test"),
            )
            .await
            .unwrap();
        let snap = env
            .until(&id, "the turn", |s| s.status == SessionStatus::Idle)
            .await;
        assert_eq!(snap.result, Some(json!("all done")));
        let reqs = env.model.requests();
        assert!(
            reqs[0].tool_names().iter().any(|n| n == "weather")
                && reqs[0].tool_names().iter().any(|n| n == "ask_ops")
        );
        assert_eq!(
            reqs[1]
                .tool_output("call_w")
                .as_deref()
                .map(|o| o.contains("sunny in Oslo")),
            Some(true)
        );
        assert_eq!(
            reqs[2]
                .tool_output("call_o")
                .as_deref()
                .map(|o| o.contains("ops says: closed today")),
            Some(true)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_169_0() {
        handler_and_broker_tools(codex_relay_testkit::NEWEST).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_98_0() {
        handler_and_broker_tools("0.98.0").await
    }
}

mod questions {
    use crate::common::{Backend, Env};
    use codex_relay_core::answer::PendingKind;
    use codex_relay_core::{
        Answer, CreateOptions, Decision, Ev, PermissionMode, RelayError, SessionStatus,
    };
    use codex_relay_testkit::{Item, Reply};
    use serde_json::json;

    /// In plan mode the model asks a question with options: the session waits for input, a
    /// wrong number of answers is refused, an option named in any case reaches the model as the
    /// option's label. (Codex marks every question `isOther`, so free text would pass too.)
    async fn a_question_is_answered_with_one_of_its_options(version: &'static str) {
        let Some(env) = Env::start(version, Backend::Sqlite, super::LONG).await else {
            return;
        };
        let args = json!({"questions": [{"id": "env", "header": "Env", "question": "Which environment?",
            "options": [{"label": "staging", "description": "safe"}, {"label": "prod", "description": "live"}]}]});
        env.model.push([
            Reply::items(vec![Item::function_call(
                "request_user_input",
                args,
                "call_q",
            )]),
            Reply::text("deploying"),
        ]);
        let opts = CreateOptions {
            prompt: Some("ask me where to deploy".into()),
            cwd: Some(env.cwd()),
            mode: Some(PermissionMode::ReadOnly),
            plan_mode: true,
            ..Default::default()
        };
        let (h, _) = env.relay.create(opts).await.unwrap();
        let id = h.id().to_owned();
        let snap = env
            .until(&id, "the question", |s| {
                s.status == SessionStatus::AwaitingInput
            })
            .await;
        let q = &snap.pending[0];
        assert_eq!(q.kind, PendingKind::Question);
        assert_eq!(q.question, "Which environment?");
        assert_eq!(q.options, vec!["staging".to_owned(), "prod".to_owned()]);

        assert!(q.questions()[0].is_other);
        let wrong = env
            .relay
            .respond(
                &id,
                &q.id,
                Answer::Answers(vec!["prod".into(), "staging".into()]),
                codex_relay_core::Decider::library("test"),
            )
            .await;
        match wrong {
            Err(RelayError::InvalidAnswer { message, .. }) => {
                assert!(message.contains("1 question(s)"), "{message}")
            }
            other => panic!("expected InvalidAnswer, got {other:?}"),
        }
        let r = env
            .relay
            .respond(
                &id,
                &q.id,
                Answer::Answers(vec!["Prod".into()]),
                codex_relay_core::Decider::library("test"),
            )
            .await
            .unwrap();
        assert_eq!(r.decision, Decision::Answer);
        let snap = env
            .until(&id, "the turn", |s| s.status == SessionStatus::Idle)
            .await;
        assert_eq!(snap.result, Some(json!("deploying")));
        let output = env.model.requests()[1]
            .tool_output("call_q")
            .expect("the answer reached the model");
        assert!(output.contains(r#"["prod"]"#), "{output}");
        assert!(env.all_events(&id).await.iter().any(
            |e| matches!(&e.ev, Ev::RequestResolved { decision, .. } if decision.as_str() == "answer")
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_169_0() {
        a_question_is_answered_with_one_of_its_options(codex_relay_testkit::NEWEST).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_98_0() {
        a_question_is_answered_with_one_of_its_options("0.98.0").await
    }
}

mod file_changes {
    use crate::common::{Backend, Env};
    use codex_relay_core::answer::PendingKind;
    use codex_relay_core::{Answer, CreateOptions, PermissionMode, SessionStatus};
    use codex_relay_testkit::{Item, Reply};
    use serde_json::json;

    /// A file-change approval shows the paths and the diff Codex announced for that item;
    /// approving it writes the file.
    async fn a_patch_approval_shows_its_diff(version: &'static str) {
        let Some(env) = Env::start(version, Backend::Sqlite, super::LONG).await else {
            return;
        };
        let patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi there\n*** End Patch\n";
        env.model.push([
            Reply::items(vec![Item::function_call(
                "apply_patch",
                json!({"input": patch}),
                "call_p",
            )]),
            Reply::text("patched"),
        ]);
        let opts = CreateOptions {
            prompt: Some("add hello.txt".into()),
            cwd: Some(env.cwd()),
            // A model name Codex knows, so it offers its apply_patch tool.
            model: Some("gpt-5-codex".into()),
            mode: Some(PermissionMode::Default),
            ..Default::default()
        };
        let (h, _) = env.relay.create(opts).await.unwrap();
        let id = h.id().to_owned();
        let snap = env
            .until(&id, "the patch approval", |s| {
                s.status == SessionStatus::AwaitingApproval
            })
            .await;
        let p = &snap.pending[0];
        assert_eq!(p.kind, PendingKind::FileChangeApproval);
        assert!(p.question.contains("hello.txt"), "{}", p.question);
        let codex_relay_core::PendingDetails::FileChangeApproval { changes, .. } = &p.details
        else {
            panic!("a file change: {:?}", p.details);
        };
        assert!(changes[0].path.ends_with("hello.txt"), "{changes:?}");
        assert!(changes[0].diff.contains("hi there"), "{changes:?}");
        env.relay
            .respond(
                &id,
                &p.id,
                Answer::approve(),
                codex_relay_core::Decider::library("test"),
            )
            .await
            .unwrap();
        env.until(&id, "the turn", |s| s.status == SessionStatus::Idle)
            .await;
        assert_eq!(
            std::fs::read_to_string(env.home.workspace().join("hello.txt"))
                .unwrap()
                .trim(),
            "hi there"
        );
    }

    // Codex 0.169 offers no apply_patch tool to the scripted provider (not even for a model
    // name it knows), so this runs on 0.98 only.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_98_0() {
        a_patch_approval_shows_its_diff("0.98.0").await
    }
}
