//! `install-codex --help` prints its help and installs nothing; an unknown argument is a usage
//! error (exit 2), also without installing anything.

use std::process::Command;

const INSTALL_CODEX: &str = env!("CARGO_BIN_EXE_install-codex");

#[test]
fn help_prints_help_and_installs_nothing() {
    let cache = tempfile::tempdir().unwrap();
    for flag in ["--help", "-h"] {
        let out = Command::new(INSTALL_CODEX)
            .arg(flag)
            .env("CODEX_RELAY_CACHE", cache.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{flag}: {out:?}");
        assert!(text.starts_with("Usage: install-codex"), "{text}");
        assert!(text.contains(codex_relay_testkit::NEWEST), "{text}");
        assert_eq!(
            std::fs::read_dir(cache.path()).unwrap().count(),
            0,
            "{flag} installed something"
        );
    }
    let out = Command::new(INSTALL_CODEX)
        .arg("--newst-path")
        .env("CODEX_RELAY_CACHE", cache.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown argument \"--newst-path\""));
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
}
