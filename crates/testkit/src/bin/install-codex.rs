//! Installs every pinned Codex version (the test command runs this first) and prints where.
//! With `--newest-path`, installs only the newest pinned version and prints just its path (for
//! scripts that need a Codex to run).

fn main() {
    if std::env::args().any(|a| a == "--newest-path") {
        match codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST) {
            Ok(path) => println!("{}", path.display()),
            Err(e) => {
                eprintln!("codex {}: {e}", codex_relay_testkit::NEWEST);
                std::process::exit(1);
            }
        }
        return;
    }
    let mut failed = false;
    for version in codex_relay_testkit::PINNED_VERSIONS {
        match codex_relay_testkit::codex_bin(version) {
            Ok(path) => println!("codex {version}: {}", path.display()),
            Err(e) => {
                eprintln!("codex {version}: {e}");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
