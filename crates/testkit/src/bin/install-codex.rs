//! Installs every pinned Codex version (the test command runs this first) and prints where.

fn main() {
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
