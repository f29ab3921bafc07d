//! Installs every pinned Codex version (the test command runs this first) and prints where.
//! With `--newest-path`, installs only the newest pinned version and prints just its path (for
//! scripts that need a Codex to run).

const USAGE: &str = "\
Usage: install-codex [--newest-path]

Installs the Codex versions codex-relay is tested with from the npm registry
(`npm install @openai/codex@<version>`) into the cache, and prints where each one is.
Installed versions are checked (`codex --version`) and kept; nothing is installed twice.

  --newest-path   install only the newest pinned version; print just its path
  -h, --help      print this help

The cache: $CODEX_RELAY_CACHE, else $XDG_CACHE_HOME/codex-relay, else ~/.cache/codex-relay.
codex-relay uses the newest pinned Codex there when no other is named (--codex,
CODEX_CLI_PATH) and none is on PATH. Pinned versions: ";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}{}", codex_relay_testkit::PINNED_VERSIONS.join(", "));
        return;
    }
    if let Some(other) = args.iter().find(|a| *a != "--newest-path") {
        eprintln!(
            "install-codex: unknown argument {other:?}\n\n{USAGE}{}",
            codex_relay_testkit::PINNED_VERSIONS.join(", ")
        );
        std::process::exit(2);
    }
    if args.iter().any(|a| a == "--newest-path") {
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
