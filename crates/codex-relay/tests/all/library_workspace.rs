//! Isolated workspaces through the library and `codex-relay run` on the real Codex (0.169 and 0.98) and the scripted model: a session opened in an isolated copy is resumed later, by a new client or a new `run --resume`, in a fresh copy of the same mounts; the resumed turn's command runs in the new copy, what the first run wrote in its copy is not brought back, the host is never written, and each copy is gone once its run ends.

use crate::library_support;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use codex_relay::SessionOptions;
use codex_relay::workspace::{HostMount, WorkspaceSpec};
use codex_relay_testkit::{CodexHome, ModelServer, Reply, for_each_codex};

for_each_codex!(
    a_library_session_resumes_in_a_fresh_copy_of_its_mounts,
    run_resume_continues_an_isolated_session_in_a_fresh_copy,
    a_loaded_thread_moves_to_the_resume_directory_on_its_next_turn,
);

/// A host directory with one file, inside the test's root (the allowed host root).
fn host(home: &CodexHome) -> PathBuf {
    let host = home.root().join("host");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(host.join("notes.txt"), "from the host\n").unwrap();
    host
}

fn spec(home: &CodexHome, host: &Path) -> WorkspaceSpec {
    WorkspaceSpec {
        parent_dir: Some(home.root().to_path_buf()),
        ..WorkspaceSpec::new([home.root()])
    }
    .mount(HostMount::new(host, "app"))
}

const FIRST: &str = "cat app/notes.txt && echo first > app/made-by-first.txt && pwd";
const SECOND: &str = "pwd && ls app";

async fn a_library_session_resumes_in_a_fresh_copy_of_its_mounts(version: &'static str) {
    let model = ModelServer::start().await;
    let home = CodexHome::new(model.url());
    let host = host(&home);
    model.push([Reply::exec(FIRST, "call-1"), Reply::text("first done")]);
    let client = library_support::builder(version, &home)
        .build()
        .await
        .unwrap();
    let session = client
        .session(SessionOptions::new().workspace(spec(&home, &host)))
        .await
        .unwrap();
    let id = session.id().to_owned();
    let first_copy = session.workspace().expect("an isolated copy").to_path_buf();
    let first = session.run("MARK-1 make a file").await.unwrap();
    assert_eq!(first.text, "first done");
    let out = model.requests()[1].tool_output("call-1").unwrap();
    assert!(out.contains("from the host"), "{out}");
    assert!(out.contains(&first_copy.display().to_string()), "{out}");
    assert!(first_copy.join("app/made-by-first.txt").is_file());
    assert!(
        !host.join("made-by-first.txt").exists(),
        "the host is never written"
    );
    session.close().await.unwrap();
    client.shutdown().await;
    assert!(
        !first_copy.exists(),
        "the first copy is removed with its session"
    );

    // A new client on the same store. A spec outside its allowed roots is refused before
    // Codex is asked anything, and the session stays as it was.
    let client = library_support::builder(version, &home)
        .build()
        .await
        .unwrap();
    let outside = WorkspaceSpec {
        allowed_host_roots: vec![home.workspace().to_path_buf()],
        ..spec(&home, &host)
    };
    let refused = client
        .resume(&id, SessionOptions::new().workspace(outside))
        .await
        .err()
        .expect("outside the allowed roots");
    assert!(
        refused.message().contains("outside the allowed host roots"),
        "{refused}"
    );
    assert_eq!(model.requests().len(), 2, "the model saw nothing new");
    assert!(
        client.relay().codex_processes().is_empty(),
        "Codex was not started"
    );

    // Without a spec: the session continues in a fresh copy of its stored mounts.
    model.push([Reply::exec(SECOND, "call-2"), Reply::text("second done")]);
    let session = client.resume(&id, SessionOptions::new()).await.unwrap();
    let second_copy = session
        .workspace()
        .expect("a fresh copy from the stored spec")
        .to_path_buf();
    assert_ne!(second_copy, first_copy);
    let second = session.run("MARK-2 where are you?").await.unwrap();
    assert_eq!(second.text, "second done");
    assert_eq!(second.session_id, id);
    let requests = model.requests();
    let out = requests[3].tool_output("call-2").unwrap();
    assert!(
        out.contains(&second_copy.display().to_string()),
        "the resumed turn's command ran in the new copy: {out}"
    );
    assert!(out.contains("notes.txt"), "{out}");
    assert!(
        !out.contains("made-by-first.txt"),
        "what the first run wrote in its copy is not brought back: {out}"
    );
    let texts = requests[2].user_texts().join("\n");
    assert!(
        texts.contains("MARK-1") && texts.contains("MARK-2"),
        "the same thread: {texts}"
    );
    assert!(
        requests[2]
            .body
            .to_string()
            .contains(&second_copy.display().to_string()),
        "the model is told the new directory"
    );
    session.close().await.unwrap();
    client.shutdown().await;
    assert!(!second_copy.exists(), "the second copy is removed as well");
    assert!(!first_copy.exists());
}

/// The thread is still loaded in the same Codex (same client, session open): the move goes
/// to Codex with the next `turn/start`'s `cwd`.
async fn a_loaded_thread_moves_to_the_resume_directory_on_its_next_turn(version: &'static str) {
    let model = ModelServer::start().await;
    let home = CodexHome::new(model.url());
    let elsewhere = home.root().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("marker.txt"), "").unwrap();
    model.push([
        Reply::text("here"),
        Reply::exec("pwd && ls", "call-2"),
        Reply::text("moved"),
    ]);
    let client = library_support::builder(version, &home)
        .build()
        .await
        .unwrap();
    let cwd = home.workspace().display().to_string();
    let session = client
        .session(SessionOptions::new().cwd(&cwd))
        .await
        .unwrap();
    session.run("MARK-1 stay").await.unwrap();
    let moved = client
        .resume(
            session.id(),
            SessionOptions::new().cwd(elsewhere.display().to_string()),
        )
        .await
        .unwrap();
    assert_eq!(
        moved.snapshot().cwd.as_deref(),
        Some(elsewhere.to_str().unwrap())
    );
    let run = moved.run("MARK-2 where are you?").await.unwrap();
    assert_eq!(run.text, "moved");
    let out = model.requests()[2].tool_output("call-2").unwrap();
    assert!(
        out.contains(elsewhere.to_str().unwrap()) && out.contains("marker.txt"),
        "the command ran in the new directory: {out}"
    );
    client.shutdown().await;
}

const RELAY: &str = env!("CARGO_BIN_EXE_codex-relay");

async fn run(home: &CodexHome, version: &str, args: &[&str]) -> std::process::Output {
    let codex = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
    let out = tokio::process::Command::new(RELAY)
        .arg("run")
        .arg("--codex")
        .arg(codex)
        .arg("--codex-home")
        .arg(home.path())
        .arg("--db")
        .arg(home.root().join("relay.db"))
        .args(args)
        .current_dir(home.root())
        // Copies go under the test's root (TMPDIR is where the system temp directory is).
        .env("TMPDIR", home.root())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("codex-relay starts");
    eprintln!(
        "run {args:?} → {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr_value(out: &std::process::Output, prefix: &str) -> String {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("{prefix:?} on stderr"))
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

async fn run_resume_continues_an_isolated_session_in_a_fresh_copy(version: &'static str) {
    let model = ModelServer::start().await;
    let home = CodexHome::new(model.url());
    host(&home);
    model.push([Reply::exec(FIRST, "call-1"), Reply::text("first done")]);
    let first = run(
        &home,
        version,
        &["--mount", "host:app", "MARK-1 make a file"],
    )
    .await;
    assert_eq!(first.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&first.stdout), "first done\n");
    let id = stderr_value(&first, "codex-relay: session ");
    let first_copy = stderr_value(&first, "codex-relay: workspace ");
    assert!(
        !Path::new(&first_copy).exists(),
        "removed when the run ended"
    );
    let out = model.requests()[1].tool_output("call-1").unwrap();
    assert!(out.contains(&first_copy), "{out}");

    model.push([Reply::exec(SECOND, "call-2"), Reply::text("second done")]);
    let second = run(&home, version, &["--resume", &id, "MARK-2 where are you?"]).await;
    assert_eq!(second.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&second.stdout), "second done\n");
    let second_copy = stderr_value(&second, "codex-relay: workspace ");
    assert_ne!(second_copy, first_copy);
    assert!(
        !Path::new(&second_copy).exists(),
        "removed when the run ended"
    );
    let out = model.requests()[3].tool_output("call-2").unwrap();
    assert!(out.contains(&second_copy), "ran in the new copy: {out}");
    assert!(
        out.contains("notes.txt") && !out.contains("made-by-first"),
        "{out}"
    );
    assert!(!home.root().join("host/made-by-first.txt").exists());
}
