//! `codex-relay run` on the real Codex (0.169 and 0.98) and the scripted model: the final message on stdout, `--resume`, `--json` lines that parse as envelopes, `--output-schema`, and the exit code of each error phase (401 → request, 429 → budget, unparsable output → response).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Output, Stdio};

use codex_relay::event::{Envelope, Ev, TurnEndStatus};
use codex_relay_testkit::{CodexHome, ModelServer, Reply, for_each_codex};

const RELAY: &str = env!("CARGO_BIN_EXE_codex-relay");

for_each_codex!(
    run_prints_the_final_message_and_resume_continues_the_session,
    run_json_lines_parse_as_envelopes,
    run_output_schema_prints_the_parsed_json_or_exits_4_with_the_raw_text,
    a_401_is_a_request_error_with_exit_code_3,
    a_429_is_a_budget_error_with_exit_code_6,
    on_a_terminal_there_is_a_progress_line_and_ask_puts_approvals_to_the_person,
    sigint_interrupts_the_turn_and_leaves_no_process_behind,
);

/// Set on every `codex-relay run` of a test (to its bed's root), so whatever it leaves running
/// can be found.
// Not `CODEX_RELAY_*`: the relay keeps its own variables from Codex, and the mark must reach it.
const RUN_MARK: &str = "RELAY_RUN_CLI_TEST_MARK";

struct Bed {
    model: ModelServer,
    home: CodexHome,
    codex: std::path::PathBuf,
}

impl Bed {
    async fn start(version: &str) -> Bed {
        let model = ModelServer::start().await;
        let home = CodexHome::new(model.url());
        let codex = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
        Bed { model, home, codex }
    }

    /// `codex-relay run ARGS` (marked with [`RUN_MARK`]) with this test's Codex, CODEX_HOME, store and workspace.
    async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = tokio::process::Command::new(RELAY);
        cmd.arg("run")
            .arg("--codex")
            .arg(&self.codex)
            .arg("--codex-home")
            .arg(self.home.path())
            .arg("--db")
            .arg(self.home.root().join("relay.db"))
            .arg("--cwd")
            .arg(self.home.workspace())
            .args(args)
            .env(RUN_MARK, self.home.root())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output())
            .await
            .expect("run finishes")
            .expect("codex-relay starts");
        eprintln!(
            "run {args:?} → {:?}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The same under `script`, so stdin, stdout and stderr are a terminal; `input` is typed.
    async fn run_in_terminal(&self, args: &[&str], input: &str) -> Output {
        let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
        let mut line = vec![
            quote(RELAY),
            "run".into(),
            "--codex".into(),
            quote(&self.codex.display().to_string()),
            "--codex-home".into(),
            quote(&self.home.path().display().to_string()),
            "--db".into(),
            quote(&self.home.root().join("relay.db").display().to_string()),
            "--cwd".into(),
            quote(&self.home.workspace().display().to_string()),
        ];
        line.extend(args.iter().map(|a| quote(a)));
        let mut child = tokio::process::Command::new("script")
            .args(["-qec", &line.join(" "), "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("script starts");
        let mut stdin = child.stdin.take().unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut stdin, input.as_bytes())
            .await
            .unwrap();
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            child.wait_with_output(),
        )
        .await
        .expect("run finishes")
        .unwrap();
        drop(stdin);
        eprintln!(
            "terminal run {args:?} → {:?}:\n{}",
            out.status.code(),
            stdout(&out)
        );
        out
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn session_id(out: &Output) -> String {
    stderr(out)
        .lines()
        .find_map(|l| l.strip_prefix("codex-relay: session "))
        .expect("the session id on stderr")
        .trim()
        .to_owned()
}

async fn run_prints_the_final_message_and_resume_continues_the_session(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([
        Reply::text("the first answer"),
        Reply::text("the second answer"),
    ]);
    let first = bed
        .run(&[
            "--model",
            "mock-model-2",
            "-c",
            "developer_instructions=always-answer-in-lowercase",
            "remember the word avocado",
        ])
        .await;
    assert_eq!(first.status.code(), Some(0));
    assert!(
        !stderr(&first).contains('\x1b'),
        "no progress line when stderr is not a terminal"
    );
    assert_eq!(stdout(&first), "the first answer\n");
    let id = session_id(&first);
    let second = bed.run(&["--resume", &id, "which word?"]).await;
    assert_eq!(second.status.code(), Some(0));
    assert_eq!(stdout(&second), "the second answer\n");
    assert_eq!(session_id(&second), id);
    // Nothing `run` started outlives it: not Codex's tree, not the watchdog or its `sleep`
    // (every process it starts inherits this test's mark).
    let mark = format!("{RUN_MARK}={}", bed.home.root().display());
    let left =
        codex_relay_testkit::procs::wait_env_gone(&mark, std::time::Duration::from_millis(200))
            .await;
    assert!(left.is_empty(), "left running after run exited: {left:?}");
    // --model and -c reached Codex.
    let body = &bed.model.requests()[0].body;
    assert_eq!(body["model"], "mock-model-2");
    assert!(
        body.to_string().contains("always-answer-in-lowercase"),
        "{body}"
    );
    // The second turn continued the thread: the model saw the first exchange.
    let texts = bed.model.requests()[1].user_texts().join("\n");
    assert!(
        texts.contains("remember the word avocado") && texts.contains("which word?"),
        "{texts}"
    );
}

async fn run_json_lines_parse_as_envelopes(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([Reply::text("streamed")]);
    let out = bed.run(&["--json", "say something"]).await;
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let envelopes: Vec<Envelope> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(envelopes.windows(2).all(|w| w[0].seq < w[1].seq), "{text}");
    assert!(
        envelopes
            .iter()
            .any(|e| matches!(&e.ev, Ev::Text { text, thinking: false } if text == "streamed"))
    );
    assert!(envelopes.iter().any(|e| matches!(
        e.ev,
        Ev::TurnEnd {
            status: TurnEndStatus::Completed,
            ..
        }
    )));
    assert!(
        !text.lines().any(|l| l == "streamed"),
        "no plain text with --json"
    );
}

async fn run_output_schema_prints_the_parsed_json_or_exits_4_with_the_raw_text(
    version: &'static str,
) {
    let bed = Bed::start(version).await;
    let schema = bed.home.root().join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer"}}}"#,
    )
    .unwrap();
    bed.model.push([
        Reply::text(r#"{ "ok": true, "n": 3 }"#),
        Reply::text("ok, three"),
    ]);
    let schema_arg = schema.display().to_string();
    let good = bed.run(&["--output-schema", &schema_arg, "check"]).await;
    assert_eq!(good.status.code(), Some(0));
    assert_eq!(stdout(&good), "{\"n\":3,\"ok\":true}\n");
    let sent = bed.model.requests()[0]
        .text_format()
        .cloned()
        .expect("text.format");
    assert_eq!(sent["schema"]["additionalProperties"], false);
    let bad = bed
        .run(&["--output-schema", &schema_arg, "check again"])
        .await;
    assert_eq!(bad.status.code(), Some(4));
    assert!(stderr(&bad).contains("response error"), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("ok, three"), "the raw text is shown");
    assert_eq!(stdout(&bad), "");
}

async fn a_401_is_a_request_error_with_exit_code_3(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([Reply::Status {
        code: 401,
        message: "bad key".into(),
    }]);
    let out = bed.run(&["hello"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("request error"), "{}", stderr(&out));
    // Codex's own classification is shown as it came (0.169: httpConnectionFailed 401;
    // 0.98: other, with the status in the message).
    assert!(stderr(&out).contains("codexErrorInfo:"), "{}", stderr(&out));
}

async fn a_429_is_a_budget_error_with_exit_code_6(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([Reply::Status {
        code: 429,
        message: "slow down".into(),
    }]);
    let out = bed.run(&["hello"]).await;
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("budget error"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"httpStatusCode\":429"),
        "{}",
        stderr(&out)
    );
}

async fn on_a_terminal_there_is_a_progress_line_and_ask_puts_approvals_to_the_person(
    version: &'static str,
) {
    let bed = Bed::start(version).await;
    bed.model.push([
        Reply::exec("touch asked-first.txt", "call_a"),
        Reply::text("fine, I left it"),
    ]);
    let out = bed
        .run_in_terminal(&["--approve", "ask", "make a file"], "d: not on my watch\n")
        .await;
    let screen = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{screen}");
    assert!(
        screen.contains("Codex wants to run `") && screen.contains("touch asked-first.txt"),
        "{screen}"
    );
    assert!(
        screen.contains("tokens") && screen.contains("\x1b[2K"),
        "a progress line: {screen}"
    );
    assert!(screen.contains("fine, I left it"), "{screen}");
    assert!(!bed.home.workspace().join("asked-first.txt").exists());
    let next = bed.model.requests()[1].body.to_string();
    assert!(
        next.contains("not on my watch"),
        "the reason reached the model: {next}"
    );
}

async fn sigint_interrupts_the_turn_and_leaves_no_process_behind(version: &'static str) {
    use codex_relay_testkit::procs;
    let bed = Bed::start(version).await;
    let marker = format!("sigint-{}-{version}", std::process::id());
    bed.model
        .push([Reply::exec(&format!("sleep 30; echo {marker}"), "call_s")]);
    bed.model.allow_unscripted();
    let mut child = tokio::process::Command::new(RELAY)
        .arg("run")
        .arg("--codex")
        .arg(&bed.codex)
        .arg("--codex-home")
        .arg(bed.home.path())
        .arg("--db")
        .arg(bed.home.root().join("relay.db"))
        .arg("--cwd")
        .arg(bed.home.workspace())
        .arg("sleep for a while")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut running = false;
    for _ in 0..200 {
        if !procs::pids_with_cmdline(&marker).is_empty() {
            running = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(running, "the command never started");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGINT) };
    let status = tokio::time::timeout(std::time::Duration::from_secs(15), child.wait())
        .await
        .expect("run exits after SIGINT")
        .unwrap();
    assert_eq!(status.code(), Some(130));
    let home = format!("CODEX_HOME={}", bed.home.path().display());
    let left = procs::wait_env_gone(&home, std::time::Duration::from_secs(5)).await;
    let what: Vec<String> = left
        .iter()
        .map(|p| {
            format!(
                "{p}: {} (stat {})",
                std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .unwrap_or_default()
                    .replace('\0', " "),
                std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default()
            )
        })
        .collect();
    assert!(left.is_empty(), "Codex processes left: {what:#?}");
    assert!(
        procs::pids_with_cmdline(&marker).is_empty(),
        "the command was left"
    );
}

/// `--approve ask` with no terminal is refused before Codex starts (exit 1).
#[test]
fn ask_without_a_terminal_is_refused_before_codex_starts() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(RELAY);
    cmd.args([
        "run",
        "--approve",
        "ask",
        "--codex",
        "/nonexistent/codex",
        "--db",
    ])
    .arg(dir.path().join("relay.db"))
    .arg("hello")
    .stdin(Stdio::null());
    // SAFETY: setsid only detaches the child from the controlling terminal.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("--approve ask needs a terminal"), "{err}");
    assert!(
        !Path::new(&dir.path().join("relay.db")).exists(),
        "nothing was opened"
    );
}
