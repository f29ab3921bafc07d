//! What approving lets Codex do, per kind, policy, sandbox and version; and which writes stay
//! in the workspace (links followed, protected directories kept out).

use std::path::Path;

use codex_relay_codex::CodexVersion;
use codex_relay_protocol::v2::{ApprovalPolicy, SandboxMode, ServerRequest};
use serde_json::{Value, json};

use super::*;

fn ctx(policy: Option<ApprovalPolicy>, sandbox: Option<SandboxMode>, version: u64) -> RuleContext {
    RuleContext {
        cwd: Some("/work/repo".into()),
        labels: vec![],
        approval_policy: policy,
        sandbox,
        codex_version: Some(CodexVersion::new(0, version, 0)),
    }
}

fn command(extra: Value, ctx: &RuleContext) -> Option<Reach> {
    let mut params = json!({"threadId": "t", "turnId": "u", "itemId": "i",
        "command": "touch x", "cwd": "/work/repo"});
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let req = ServerRequest::parse(ServerRequest::COMMAND_APPROVAL, params);
    let view = crate::pending::describe(&req, "r".into(), "s".into(), 0, 0);
    of(&view, &req, ctx)
}

fn patch(paths: &[&str], extra: Value, ctx: &RuleContext) -> Option<Reach> {
    let mut params = json!({"threadId": "t", "turnId": "u", "itemId": "i"});
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let req = ServerRequest::parse(ServerRequest::FILE_CHANGE_APPROVAL, params);
    let mut view = crate::pending::describe(&req, "r".into(), "s".into(), 0, 0);
    if let PendingDetails::FileChangeApproval { changes, .. } = &mut view.details {
        *changes = paths
            .iter()
            .map(|p| serde_json::from_value(json!({"path": p, "kind": {"type": "add"}})).unwrap())
            .collect();
    }
    of(&view, &req, ctx)
}

use ApprovalPolicy::{Never, OnFailure, OnRequest, Untrusted};
use SandboxMode::{DangerFullAccess, ReadOnly, WorkspaceWrite};

#[test]
fn a_command_approval_may_always_leave_a_sandbox_and_never_widens_none() {
    let plain = json!({});
    // 0.98 refuses escalations under untrusted: an approved command starts sandboxed.
    assert_eq!(
        command(
            plain.clone(),
            &ctx(Some(Untrusted), Some(WorkspaceWrite), 98)
        ),
        Some(Reach::OutsideIfBlocked)
    );
    // 0.169 asks for them: it may run outside at once.
    for c in [
        ctx(Some(Untrusted), Some(WorkspaceWrite), 169),
        ctx(Some(Untrusted), Some(ReadOnly), 169),
        ctx(Some(OnRequest), Some(WorkspaceWrite), 169),
        ctx(Some(OnFailure), Some(WorkspaceWrite), 98),
        ctx(Some(Never), Some(WorkspaceWrite), 169),
        ctx(None, None, 169),
        ctx(Some(Untrusted), None, 169),
    ] {
        assert_eq!(command(plain.clone(), &c), Some(Reach::Outside), "{c:?}");
    }
    // Unknown version: the wider answer.
    let unknown = RuleContext {
        codex_version: None,
        ..ctx(Some(Untrusted), Some(WorkspaceWrite), 98)
    };
    assert_eq!(command(plain.clone(), &unknown), Some(Reach::Outside));
    assert_eq!(
        command(
            json!({"reason": "command failed; retry without sandbox?"}),
            &ctx(Some(Untrusted), Some(WorkspaceWrite), 98)
        ),
        Some(Reach::Outside)
    );
    for policy in [Untrusted, OnRequest] {
        assert_eq!(
            command(
                plain.clone(),
                &ctx(Some(policy), Some(DangerFullAccess), 169)
            ),
            Some(Reach::NoSandbox)
        );
    }
    let full = ctx(Some(Untrusted), Some(DangerFullAccess), 169);
    assert_eq!(
        command(
            json!({"additionalPermissions": {"network": {"enabled": true}}}),
            &full
        ),
        Some(Reach::MorePermissions)
    );
    assert_eq!(
        command(
            json!({"networkApprovalContext": {"host": "example.com"}}),
            &full
        ),
        Some(Reach::Network)
    );
}

#[test]
fn a_file_change_stays_in_the_sandbox_only_inside_the_workspace_under_untrusted() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let out = dir.path().join("out");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(&out, ws.join("link")).unwrap();
    let w = |p: &str| ws.join(p).display().to_string();
    let c = |policy, sandbox| RuleContext {
        cwd: Some(ws.display().to_string()),
        ..ctx(Some(policy), Some(sandbox), 169)
    };
    let here = c(Untrusted, WorkspaceWrite);
    let inside = [w("a.txt"), w("src/new/b.rs")];
    let inside: Vec<&str> = inside.iter().map(String::as_str).collect();
    assert_eq!(patch(&inside, json!({}), &here), Some(Reach::Sandboxed));
    for (paths, why) in [
        (
            vec![w("a.txt"), out.join("x").display().to_string()],
            "one file outside",
        ),
        (vec![w("link/x")], "through a link"),
        (vec![w("../out/x")], "up and out"),
        (vec![w(".git/hooks/pre-commit")], "Git's directory"),
        (vec![w("sub/.codex/config.toml")], "Codex's settings"),
        (vec![w(".agents/x")], "agents' settings"),
        (vec![], "files not known"),
    ] {
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        assert_eq!(
            patch(&paths, json!({}), &here),
            Some(Reach::OutsideIfBlocked),
            "{why}"
        );
    }
    assert_eq!(
        patch(&inside, json!({"grantRoot": "/"}), &here),
        Some(Reach::Outside)
    );
    assert_eq!(
        patch(
            &inside,
            json!({"reason": "command failed; retry without sandbox?"}),
            &here
        ),
        Some(Reach::Outside)
    );
    assert_eq!(
        patch(&inside, json!({}), &c(OnRequest, WorkspaceWrite)),
        Some(Reach::Outside),
        "on-request asks only to leave the writable roots"
    );
    assert_eq!(
        patch(&inside, json!({}), &c(Untrusted, ReadOnly)),
        Some(Reach::OutsideIfBlocked),
        "a read-only sandbox blocks every write"
    );
    assert_eq!(
        patch(
            &[&out.join("x").display().to_string()],
            json!({}),
            &c(OnRequest, DangerFullAccess)
        ),
        Some(Reach::NoSandbox)
    );
    // A move is a write where it lands.
    let req = ServerRequest::parse(
        ServerRequest::FILE_CHANGE_APPROVAL,
        json!({"threadId": "t", "turnId": "u", "itemId": "i"}),
    );
    let mut view = crate::pending::describe(&req, "r".into(), "s".into(), 0, 0);
    if let PendingDetails::FileChangeApproval { changes, .. } = &mut view.details {
        *changes = vec![
            serde_json::from_value(json!({"path": w("a.txt"),
                "kind": {"type": "update", "move_path": out.join("a.txt")}}))
            .unwrap(),
        ];
    }
    assert_eq!(of(&view, &req, &here), Some(Reach::OutsideIfBlocked));
}

#[test]
fn writes_inside_follows_links_that_exist_now() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::os::unix::fs::symlink("/", ws.join("root")).unwrap();
    assert!(writes_inside(Path::new("d/x"), &ws));
    assert!(writes_inside(Path::new("new/dir/x"), &ws));
    assert!(writes_inside(&ws.join("d/../x"), &ws));
    assert!(!writes_inside(Path::new("root/etc/x"), &ws));
    assert!(
        !writes_inside(Path::new("new/../../x"), &ws),
        "unknowable: no"
    );
    assert!(
        !writes_inside(&ws, &ws),
        "the workspace itself is not a file in it"
    );
    assert!(!writes_inside(Path::new(".GIT/config"), &ws));
}

#[test]
fn other_requests_and_the_json_shape() {
    let c = ctx(Some(Untrusted), Some(DangerFullAccess), 169);
    let req = ServerRequest::parse(
        ServerRequest::PERMISSIONS_APPROVAL,
        json!({"threadId": "t", "turnId": "u", "itemId": "i", "permissions": {}}),
    );
    let view = crate::pending::describe(&req, "r".into(), "s".into(), 0, 0);
    assert_eq!(of(&view, &req, &c), Some(Reach::MorePermissions));
    let v = serde_json::to_value(Reach::OutsideIfBlocked).unwrap();
    assert_eq!(v["kind"], "outside_if_blocked");
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("if the sandbox blocks it"),
        "{v}"
    );
    for r in Reach::ALL {
        let back: Reach = serde_json::from_value(serde_json::to_value(r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
    assert!(serde_json::from_value::<Reach>(json!({"kind": "elsewhere"})).is_err());
}
