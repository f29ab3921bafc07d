//! The start policy's checks, case by case.

use super::*;
use serde_json::json;

fn strict(root: &Path) -> StartPolicy {
    StartPolicy {
        roots: Some(vec![root.to_path_buf()]),
        max_sandbox: SandboxMode::WorkspaceWrite,
        max_approval: ApprovalPolicy::OnRequest,
        allow_config: false,
    }
}

fn forbidden(r: Result<(), RelayError>) -> String {
    match r {
        Err(RelayError::Forbidden(m)) => m,
        other => panic!("expected Forbidden, got {other:?}"),
    }
}

#[test]
fn the_default_allows_everything() {
    let p = StartPolicy::default();
    assert!(p.is_open());
    let config = json!({"sandbox_mode": "danger-full-access"});
    let asked = Asked {
        cwd: Some("/"),
        sandbox: Some(SandboxMode::DangerFullAccess),
        approval: Some(ApprovalPolicy::Never),
        config: config.as_object(),
        profile: Some("p"),
        images: &["/etc/hostname".into()],
    };
    p.check(&asked, Path::new("/")).unwrap();
}

#[test]
fn a_strict_policy_names_what_it_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let inner = dir.path().join("repo");
    std::fs::create_dir(&inner).unwrap();
    let p = strict(dir.path());
    let ok = Asked {
        cwd: Some("repo"),
        sandbox: Some(SandboxMode::WorkspaceWrite),
        approval: Some(ApprovalPolicy::OnRequest),
        ..Default::default()
    };
    p.check(&ok, dir.path()).unwrap();
    let m = forbidden(p.check(
        &Asked {
            sandbox: Some(SandboxMode::DangerFullAccess),
            ..Default::default()
        },
        dir.path(),
    ));
    assert!(m.contains("danger-full-access"), "{m}");
    let m = forbidden(p.check(
        &Asked {
            approval: Some(ApprovalPolicy::Never),
            ..Default::default()
        },
        dir.path(),
    ));
    assert!(m.contains("never"), "{m}");
    // Nothing to approve in a read-only sandbox.
    p.check(
        &Asked {
            approval: Some(ApprovalPolicy::Never),
            sandbox: Some(SandboxMode::ReadOnly),
            ..Default::default()
        },
        dir.path(),
    )
    .unwrap();
    let m = forbidden(p.check(
        &Asked {
            cwd: Some("/"),
            ..Default::default()
        },
        dir.path(),
    ));
    assert!(m.contains("outside"), "{m}");
    // `..` and symbolic links are resolved before the comparison.
    let m = forbidden(p.check(
        &Asked {
            cwd: Some("repo/../.."),
            ..Default::default()
        },
        dir.path(),
    ));
    assert!(m.contains("outside"), "{m}");
    std::os::unix::fs::symlink("/", inner.join("up")).unwrap();
    forbidden(p.check(
        &Asked {
            cwd: Some("repo/up"),
            ..Default::default()
        },
        dir.path(),
    ));
    let config = json!({"model_reasoning_effort": "low"});
    let m = forbidden(p.check(
        &Asked {
            config: config.as_object(),
            ..Default::default()
        },
        dir.path(),
    ));
    assert!(m.contains("config overrides"), "{m}");
    forbidden(p.check(
        &Asked {
            profile: Some("fast"),
            ..Default::default()
        },
        dir.path(),
    ));
    let m = forbidden(p.check(
        &Asked {
            cwd: Some("repo"),
            images: &["/etc/hostname".into()],
            ..Default::default()
        },
        dir.path(),
    ));
    assert!(m.contains("image"), "{m}");
    p.check(
        &Asked {
            cwd: Some("repo"),
            images: &["https://example.com/a.png".into()],
            ..Default::default()
        },
        dir.path(),
    )
    .unwrap();
}

#[test]
fn config_overrides_cannot_go_around_the_limits() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = strict(dir.path());
    p.allow_config = true;
    let config = json!({"sandbox_mode": "danger-full-access"});
    let m = forbidden(p.check(
        &Asked {
            sandbox: Some(SandboxMode::ReadOnly),
            config: config.as_object(),
            ..Default::default()
        },
        dir.path(),
    ));
    assert!(m.contains("danger-full-access"), "{m}");
    let config = json!({"approval_policy": "never"});
    forbidden(p.check(
        &Asked {
            config: config.as_object(),
            ..Default::default()
        },
        dir.path(),
    ));
}

#[test]
fn what_codex_reports_is_read_in_either_shape_and_must_be_there_under_limits() {
    let dir = tempfile::tempdir().unwrap();
    let p = strict(dir.path());
    let cwd = dir.path().display().to_string();
    let ww = json!({"type": "workspaceWrite", "networkAccess": false});
    let on_request = json!("on-request");
    let user = json!("user");
    let seen = Effective {
        cwd: Some(&cwd),
        sandbox: Some(&ww),
        approval: Some(&on_request),
        reviewer: Some(&user),
    };
    p.check_effective(&seen, dir.path()).unwrap();
    let full = json!({"type": "dangerFullAccess"});
    forbidden(p.check_effective(
        &Effective {
            sandbox: Some(&full),
            ..seen
        },
        dir.path(),
    ));
    let full = json!("danger-full-access");
    forbidden(p.check_effective(
        &Effective {
            sandbox: Some(&full),
            ..seen
        },
        dir.path(),
    ));
    forbidden(p.check_effective(
        &Effective {
            cwd: Some("/"),
            ..seen
        },
        dir.path(),
    ));
    // Not reported, or in a shape not understood: refused while commands are limited.
    let m = forbidden(p.check_effective(
        &Effective {
            sandbox: None,
            ..seen
        },
        dir.path(),
    ));
    assert!(m.contains("sandbox") && m.contains("nothing"), "{m}");
    let granular = json!({"granular": {"sandbox_approval": true}});
    let m = forbidden(p.check_effective(
        &Effective {
            approval: Some(&granular),
            ..seen
        },
        dir.path(),
    ));
    assert!(m.contains("granular"), "{m}");
    // Approvals answered by a model instead of a person.
    let reviewer = json!("auto_review");
    let m = forbidden(p.check_effective(
        &Effective {
            reviewer: Some(&reviewer),
            ..seen
        },
        dir.path(),
    ));
    assert!(m.contains("auto_review") && m.contains("person"), "{m}");
    // With only directories limited, the sandbox may be anything Codex reports.
    let roots_only = StartPolicy {
        roots: Some(vec![dir.path().to_path_buf()]),
        ..Default::default()
    };
    roots_only
        .check_effective(
            &Effective {
                cwd: Some(&cwd),
                ..Default::default()
            },
            dir.path(),
        )
        .unwrap();
}

#[test]
fn under_limits_config_overrides_may_only_tune_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = strict(dir.path());
    p.allow_config = true;
    let ok = json!({"model_reasoning_effort": "low", "model": "m", "sandbox_mode": "read-only"});
    p.check(
        &Asked {
            config: ok.as_object(),
            ..Default::default()
        },
        dir.path(),
    )
    .unwrap();
    for (config, key) in [
        (json!({"notify": ["sh", "-c", "touch /x"]}), "notify"),
        (
            json!({"mcp_servers": {"x": {"command": "sh"}}}),
            "mcp_servers",
        ),
        (
            json!({"mcp_servers.x.command": "sh"}),
            "mcp_servers.x.command",
        ),
        (
            json!({"sandbox_workspace_write.writable_roots": ["/"]}),
            "writable_roots",
        ),
        (
            json!({"sandbox_workspace_write": {"network_access": true}}),
            "sandbox_workspace_write",
        ),
        (
            json!({"shell_environment_policy": {"inherit": "all"}}),
            "shell_environment_policy",
        ),
        (
            json!({"approvals_reviewer": "auto_review"}),
            "approvals_reviewer",
        ),
        (json!({"approval_policy": {"granular": {}}}), "plain value"),
    ] {
        let m = forbidden(p.check(
            &Asked {
                config: config.as_object(),
                ..Default::default()
            },
            dir.path(),
        ));
        assert!(
            m.contains(key) && m.contains("workspace-write") && m.contains("on-request"),
            "{config}: {m}"
        );
    }
    // Without limits on commands, any key passes (the session may run anything anyway).
    let open_commands = StartPolicy {
        roots: Some(vec![dir.path().to_path_buf()]),
        ..Default::default()
    };
    let notify = json!({"notify": ["true"]});
    open_commands
        .check(
            &Asked {
                config: notify.as_object(),
                ..Default::default()
            },
            dir.path(),
        )
        .unwrap();
}

#[test]
fn a_profile_is_checked_for_what_it_sets() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = strict(dir.path());
    p.allow_config = true;
    let home = dir.path();
    std::fs::write(
        home.join("full.config.toml"),
        "sandbox_mode = \"danger-full-access\"\n",
    )
    .unwrap();
    std::fs::write(home.join("loud.config.toml"), "notify = [\"sh\"]\n").unwrap();
    std::fs::write(
        home.join("fast.config.toml"),
        "model_reasoning_effort = \"low\"\n",
    )
    .unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[profiles.never]\napproval_policy = \"never\"\n",
    )
    .unwrap();
    let load = |name: &str| crate::profile::load(Some(home), name).unwrap();
    let m = forbidden(p.check_profile(&load("full"), Path::new("/")));
    assert!(
        m.contains("full.config.toml") && m.contains("danger-full-access"),
        "{m}"
    );
    let m = forbidden(p.check_profile(&load("loud"), Path::new("/")));
    assert!(
        m.contains("loud.config.toml") && m.contains("notify"),
        "{m}"
    );
    let m = forbidden(p.check_profile(&load("never"), Path::new("/")));
    assert!(m.contains("config.toml") && m.contains("never"), "{m}");
    let m = forbidden(p.check_profile(&load("missing"), Path::new("/")));
    assert!(m.contains("no such profile"), "{m}");
    p.check_profile(&load("fast"), Path::new("/")).unwrap();
    StartPolicy::default()
        .check_profile(&load("full"), Path::new("/"))
        .unwrap();
}
