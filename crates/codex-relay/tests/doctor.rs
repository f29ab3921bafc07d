//! `codex-relay doctor` against the real pinned binaries, and against something that is not Codex.

use std::process::Command;

fn doctor(codex: &std::path::Path, home: &std::path::Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_codex-relay"))
        .arg("doctor")
        .arg("--codex")
        .arg(codex)
        .arg("--codex-home")
        .arg(home)
        .output()
        .expect("run codex-relay doctor");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn doctor_reports_each_pinned_codex_as_tested_and_starting() {
    for version in codex_relay_testkit::PINNED_VERSIONS {
        let bin = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
        let home = tempfile::tempdir().unwrap();
        let (ok, text) = doctor(&bin, home.path());
        assert!(ok, "{text}");
        assert!(
            text.contains(&format!("codex version:   {version}")),
            "{text}"
        );
        assert!(text.contains("compatibility:   Tested"), "{text}");
        assert!(text.contains("started and initialized"), "{text}");
        assert!(
            text.contains(
                "auth:            not logged in (the model provider needs OpenAI credentials)"
            ),
            "{text}"
        );
    }
}

#[test]
fn doctor_reports_an_api_key_login() {
    for version in codex_relay_testkit::PINNED_VERSIONS {
        let bin = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
        let home = tempfile::tempdir().unwrap();
        // What `codex login --with-api-key` (or the relay's API-key login) leaves behind.
        std::fs::write(
            home.path().join("auth.json"),
            r#"{"OPENAI_API_KEY": "sk-doctor-test"}"#,
        )
        .unwrap();
        let (ok, text) = doctor(&bin, home.path());
        assert!(ok, "{text}");
        assert!(
            text.contains("auth:            API key"),
            "{version}: {text}"
        );
        assert!(
            !text.contains("sk-doctor-test"),
            "the key is not printed: {text}"
        );
    }
}

#[test]
fn doctor_refuses_a_binary_without_app_server_v2() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("codex");
    std::fs::write(&fake, "#!/bin/sh\necho 'codex-cli 0.40.0'\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (ok, text) = doctor(&fake, dir.path());
    assert!(!ok, "{text}");
    assert!(
        text.contains("Unsupported") && text.contains("0.58.0"),
        "{text}"
    );
}
