//! Isolated workspaces. Without Codex: globs pick what is copied, symlinks are not followed,
//! budgets, roots and mount paths are checked before anything is written, the copy goes away
//! on drop. On the real Codex (both pinned versions): a session edits the copy and the host is
//! untouched, and its fingerprint finds the session again; a workspace over budget or outside
//! the allowed roots is refused and Codex is never started (the scripted model sees nothing);
//! a session whose copy is gone (its owner ended) continues from a front in a fresh copy.

use crate::common;

use std::fs;
use std::path::Path;

use crate::common::{Backend, Env};
use codex_relay_core::workspace::{HostMount, Workspace, WorkspaceError, WorkspaceSpec};
use codex_relay_core::{CreateOptions, PermissionMode, RelayError, SayInput, SessionStatus};
use codex_relay_testkit::{Item, Reply, for_each_codex};
use serde_json::json;

for_each_codex!(
    a_session_edits_its_isolated_copy_and_the_host_is_untouched,
    a_refused_workspace_never_starts_codex,
    a_front_continues_an_isolated_session_whose_copy_is_gone_in_a_fresh_copy,
);

/// A host tree: `app/` with sources, a build directory, VCS data and a symlink out.
fn host_tree(root: &Path) -> std::path::PathBuf {
    let app = root.join("app");
    fs::create_dir_all(app.join("src/deep")).unwrap();
    fs::create_dir_all(app.join("target/debug")).unwrap();
    fs::create_dir_all(app.join(".git")).unwrap();
    fs::write(app.join("README.md"), "read me\n").unwrap();
    fs::write(app.join("notes.txt"), "original\n").unwrap();
    fs::write(app.join("src/main.rs"), "fn main() {}\n").unwrap();
    fs::write(app.join("src/deep/lib.rs"), "pub fn f() {}\n").unwrap();
    fs::write(app.join("src/data.bin"), vec![0u8; 100]).unwrap();
    fs::write(app.join("target/debug/big"), vec![0u8; 10_000]).unwrap();
    fs::write(app.join(".git/HEAD"), "ref: main\n").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", app.join("escape")).unwrap();
    app
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn globs_choose_the_files_and_the_copy_is_removed_on_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let app = host_tree(tmp.path());
    let spec = WorkspaceSpec::new([tmp.path()])
        .mount(
            HostMount::new(&app, "app")
                .include(["*.rs", "README.md", "notes.txt"])
                .exclude(["target", ".git"]),
        )
        .mount(HostMount::new(app.join("README.md"), "docs"));
    let ws = Workspace::materialize(&spec).unwrap();
    assert_eq!(
        files_under(ws.path()),
        [
            "app/README.md",
            "app/notes.txt",
            "app/src/deep/lib.rs",
            "app/src/main.rs",
            "docs/README.md"
        ]
    );
    let app_mount = &ws.mounts()[0];
    assert_eq!((app_mount.files, app_mount.bytes), (4, 8 + 9 + 13 + 14));
    assert_eq!(
        app_mount.skipped_symlinks, 1,
        "the symlink out is not copied"
    );
    assert!(
        ws.summary().contains("app (4 files, 44 bytes)"),
        "{}",
        ws.summary()
    );
    assert_eq!(ws.fingerprint(), spec.fingerprint());
    let path = ws.path().to_path_buf();
    drop(ws);
    assert!(!path.exists(), "the copy is removed on drop");
    assert!(
        app.join("target/debug/big").exists(),
        "the host keeps everything"
    );
}

#[test]
fn cleanup_removes_the_copy_and_reports_success() {
    let tmp = tempfile::tempdir().unwrap();
    let app = host_tree(tmp.path());
    let ws = Workspace::materialize(
        &WorkspaceSpec::new([tmp.path()]).mount(HostMount::new(&app, ".").exclude(["target"])),
    )
    .unwrap();
    let path = ws.path().to_path_buf();
    assert!(path.join("src/main.rs").is_file(), "`.` mounts at the root");
    ws.cleanup().unwrap();
    assert!(!path.exists());
}

/// Runs `spec` with its temp parent in a directory of its own, and checks nothing was written.
fn refused(spec: WorkspaceSpec) -> WorkspaceError {
    let parent = tempfile::tempdir().unwrap();
    let spec = WorkspaceSpec {
        parent_dir: Some(parent.path().to_path_buf()),
        ..spec
    };
    let err = Workspace::materialize(&spec).expect_err("refused");
    assert_eq!(
        fs::read_dir(parent.path()).unwrap().count(),
        0,
        "nothing was written before the refusal"
    );
    err
}

#[test]
fn budgets_roots_and_mount_paths_are_checked_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let app = host_tree(tmp.path());
    let root = [tmp.path()];

    // One mount over its own budget (target/ is 10,000 bytes).
    let err = refused(WorkspaceSpec::new(root).mount(HostMount::new(&app, "app").max_bytes(5_000)));
    assert!(
        matches!(&err, WorkspaceError::OverBudget { limit: 5_000, at_least, .. } if *at_least > 5_000),
        "{err}"
    );
    assert!(err.to_string().contains("budget of 5000 bytes"), "{err}");

    // Two mounts over the workspace's budget, each within its own.
    let err = refused(
        WorkspaceSpec::new(root)
            .mount(HostMount::new(&app, "a").exclude(["target"]))
            .mount(HostMount::new(&app, "b").exclude(["target"]))
            .max_bytes(300),
    );
    assert!(
        matches!(&err, WorkspaceError::OverBudget { scope, .. } if scope == "the workspace"),
        "{err}"
    );

    // Outside the roots: directly, and through a symlink that lives inside them.
    let other = tempfile::tempdir().unwrap();
    let err = refused(WorkspaceSpec::new([&app]).mount(HostMount::new(other.path(), "x")));
    assert!(
        matches!(err, WorkspaceError::OutsideAllowedRoots { .. }),
        "{err}"
    );
    std::os::unix::fs::symlink(other.path(), app.join("link-out")).unwrap();
    let err = refused(WorkspaceSpec::new([&app]).mount(HostMount::new(app.join("link-out"), "x")));
    assert!(
        matches!(err, WorkspaceError::OutsideAllowedRoots { .. }),
        "{err}"
    );

    // No roots at all refuses every mount.
    let err = refused(WorkspaceSpec::new(Vec::<&Path>::new()).mount(HostMount::new(&app, "x")));
    assert!(
        matches!(err, WorkspaceError::OutsideAllowedRoots { .. }),
        "{err}"
    );

    // Mount paths stay inside the workspace; globs must parse.
    for bad in ["../up", "/abs"] {
        let err = refused(WorkspaceSpec::new(root).mount(HostMount::new(&app, bad)));
        assert!(
            matches!(err, WorkspaceError::InvalidMountPath { .. }),
            "{bad}: {err}"
        );
    }
    let err =
        refused(WorkspaceSpec::new(root).mount(HostMount::new(&app, "a").include(["src/[x"])));
    assert!(matches!(err, WorkspaceError::InvalidGlob { .. }), "{err}");
}

async fn a_session_edits_its_isolated_copy_and_the_host_is_untouched(version: &'static str) {
    let env = Env::start(version, Backend::Sqlite, common::WAIT)
        .await
        .unwrap();
    let host = tempfile::tempdir().unwrap();
    let app = host_tree(host.path());
    let spec = WorkspaceSpec {
        parent_dir: Some(env.home.root().to_path_buf()),
        ..WorkspaceSpec::new([host.path()])
            .mount(HostMount::new(&app, "app").exclude(["target", ".git"]))
            .settings(json!({"mode": "safe-yolo"}))
    };
    env.model.push([
        Reply::exec(
            "echo changed > app/notes.txt && cat app/notes.txt && ls app",
            "call_edit",
        ),
        Reply::items(vec![Item::text("edited the copy")]),
    ]);
    let ((h, _), ws) = env
        .relay
        .create_isolated(
            &spec,
            CreateOptions {
                prompt: Some("change the notes".into()),
                mode: Some(PermissionMode::SafeYolo),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let id = h.id().to_owned();
    let snap = env
        .until(&id, "the turn to end", |s| {
            matches!(s.status, SessionStatus::Idle | SessionStatus::Error)
        })
        .await;
    assert_eq!(snap.status, SessionStatus::Idle, "{:?}", snap.last_error);
    assert_eq!(snap.cwd.as_deref(), Some(ws.path().to_str().unwrap()));

    let output = env.model.requests()[1]
        .tool_output("call_edit")
        .expect("the command's output went back to the model");
    assert!(output.contains("changed"), "{output}");
    assert!(
        !output.contains("target"),
        "excluded files are not in the copy: {output}"
    );
    assert_eq!(
        fs::read_to_string(ws.path().join("app/notes.txt")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        fs::read_to_string(app.join("notes.txt")).unwrap(),
        "original\n"
    );

    let found = env.relay.session_for_workspace(&spec.fingerprint());
    assert_eq!(found.map(|h| h.id().to_owned()), Some(id.clone()));
    let other = spec.clone().settings(json!({"mode": "read-only"}));
    assert!(
        env.relay
            .session_for_workspace(&other.fingerprint())
            .is_none()
    );

    let path = ws.path().to_path_buf();
    env.relay.close(&id, true).await.unwrap();
    drop(ws);
    assert!(!path.exists(), "the copy is removed");
    assert!(
        env.relay
            .session_for_workspace(&spec.fingerprint())
            .is_none(),
        "closed sessions are not reused"
    );
    env.relay.shutdown().await;
}

async fn a_refused_workspace_never_starts_codex(version: &'static str) {
    let env = Env::start(version, Backend::Sqlite, common::WAIT)
        .await
        .unwrap();
    let host = tempfile::tempdir().unwrap();
    let app = host_tree(host.path());
    let elsewhere = tempfile::tempdir().unwrap();
    let over_budget =
        WorkspaceSpec::new([host.path()]).mount(HostMount::new(&app, "app").max_bytes(1_000));
    let outside = WorkspaceSpec::new([host.path()]).mount(HostMount::new(elsewhere.path(), "x"));
    for (spec, want) in [
        (over_budget, "budget"),
        (outside, "outside the allowed host roots"),
    ] {
        let opts = CreateOptions {
            prompt: Some("this must not reach the model".into()),
            ..Default::default()
        };
        let Err(err) = env.relay.create_isolated(&spec, opts).await else {
            panic!("{want}: not refused");
        };
        assert!(matches!(err, RelayError::Workspace(_)), "{err}");
        assert!(err.to_string().contains(want), "{err}");
    }
    assert_eq!(
        env.relay.feed().codex_starts(),
        0,
        "Codex was never started"
    );
    assert!(env.model.requests().is_empty(), "the model saw nothing");
    assert!(env.relay.sessions().is_empty());
}

/// The library ran a turn in an isolated copy and dropped it (the copy is removed); later an MCP
/// or HTTP client says something to that session: the engine makes a fresh copy of the same
/// mounts (the host's files as they are now, not the old copy's edits), the command runs there,
/// and the copy is removed when the session closes.
async fn a_front_continues_an_isolated_session_whose_copy_is_gone_in_a_fresh_copy(
    version: &'static str,
) {
    let env = Env::start(version, Backend::Sqlite, common::WAIT)
        .await
        .unwrap();
    let host = tempfile::tempdir().unwrap();
    let app = host_tree(host.path());
    let spec = WorkspaceSpec {
        parent_dir: Some(env.home.root().to_path_buf()),
        ..WorkspaceSpec::new([host.path()])
            .mount(HostMount::new(&app, "app").exclude(["target", ".git"]))
            .settings(json!({"mode": "safe-yolo"}))
    };
    env.model.push([
        Reply::exec("echo edited > app/notes.txt", "call_first"),
        Reply::items(vec![Item::text("first done")]),
    ]);
    let ((h, _), first) = env
        .relay
        .create_isolated(
            &spec,
            CreateOptions {
                prompt: Some("edit the notes".into()),
                mode: Some(PermissionMode::SafeYolo),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let id = h.id().to_owned();
    let idle = |s: &codex_relay_core::SessionSnapshot| {
        matches!(s.status, SessionStatus::Idle | SessionStatus::Error)
    };
    let snap = env.until(&id, "the first turn to end", idle).await;
    assert_eq!(snap.status, SessionStatus::Idle, "{:?}", snap.last_error);
    let first_path = first.path().to_path_buf();
    drop(first);
    assert!(
        !first_path.exists(),
        "the first copy is removed with its owner"
    );

    env.model.push([
        Reply::exec("pwd && cat app/notes.txt", "call_second"),
        Reply::items(vec![Item::text("second done")]),
    ]);
    env.relay
        .say(&id, SayInput::text("read the notes"))
        .await
        .unwrap();
    let snap = env
        .until(&id, "the second turn to end", |s| {
            idle(s) && s.turn_count >= 2
        })
        .await;
    assert_eq!(snap.status, SessionStatus::Idle, "{:?}", snap.last_error);
    let second_path = std::path::PathBuf::from(snap.cwd.clone().expect("a cwd"));
    assert_ne!(second_path, first_path, "a fresh copy, not the removed one");
    assert!(
        second_path.is_dir(),
        "the fresh copy lives while the session is open"
    );
    let output = env
        .model
        .requests()
        .iter()
        .find_map(|r| r.tool_output("call_second"))
        .expect("the command's output went back to the model");
    let shown = fs::canonicalize(&second_path).unwrap();
    assert!(
        output.contains(shown.to_str().unwrap()) || output.contains(second_path.to_str().unwrap()),
        "the command ran in the fresh copy: {output}"
    );
    assert!(
        output.contains("original") && !output.contains("edited"),
        "the fresh copy holds the host's files, not the old copy's edit: {output}"
    );

    env.relay.close(&id, true).await.unwrap();
    assert!(
        !second_path.exists(),
        "the fresh copy is removed when the session closes"
    );
    env.relay.shutdown().await;
}
