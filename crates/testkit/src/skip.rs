//! Loud, counted skips for tests that cannot run on this machine.
//!
//! A test that lacks something of the machine (root or mount rights, PostgreSQL server
//! binaries, Chromium or npm) calls [`skip`] and returns. The line goes straight to stderr, so
//! it shows even though libtest captures what passing tests print, and, when
//! [`DIR_ENV`] names a directory (`./scripts/test` sets it to `target/test-skips`, emptied at
//! the start of each run), one line `package<TAB>test<TAB>reason` is appended to a file there.
//! `./scripts/test` lists every recorded skip at the end with the count, and under `CI=true`
//! fails the run for any skip that `CODEX_RELAY_ALLOW_SKIPS` does not name.

use std::io::Write;

/// The directory skips are recorded in (absolute); unset: skips are printed, not recorded.
pub const DIR_ENV: &str = "CODEX_RELAY_SKIP_DIR";

/// Skips the running test for `reason`: prints it loudly and records it (see the module
/// docs). The caller returns right after. The test is named by its thread, which libtest
/// names after the test (`module::test`): call this from the test's own thread (the body of a
/// `#[test]` or `#[tokio::test]`, or a function it awaits), not from a spawned task.
pub fn skip(reason: impl std::fmt::Display) {
    let test = current_test();
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "?".into());
    let reason = one_line(&reason.to_string());
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED {package} {test}: {reason}\n*** (counted by ./scripts/test; under CI=true it fails the run unless CODEX_RELAY_ALLOW_SKIPS names it)\n"
    );
    if let Some(dir) = std::env::var_os(DIR_ENV).filter(|d| !d.is_empty()) {
        record(
            std::path::Path::new(&dir),
            &format!("{package}\t{test}\t{reason}\n"),
        );
    }
}

/// The running test's name, from its thread.
fn current_test() -> String {
    let thread = std::thread::current();
    match thread.name() {
        Some(name) if name != "main" && !name.starts_with("tokio-") => name.to_owned(),
        other => panic!(
            "skip() called on thread {other:?}, not a test's own thread: call it from the test \
             body so the skip is recorded under the test's name"
        ),
    }
}

fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Appends `line` to this process's file in `dir` (one `write(2)` per line, so tests running
/// at once do not interleave).
fn record(dir: &std::path::Path, line: &str) {
    let file = dir.join(format!("{}.tsv", std::process::id()));
    let written = std::fs::create_dir_all(dir).and_then(|()| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)?
            .write_all(line.as_bytes())
    });
    if let Err(e) = written {
        panic!("cannot record the skip in {}: {e}", file.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_is_named_by_its_thread_and_reasons_fit_one_line() {
        assert_eq!(
            current_test(),
            "skip::tests::a_test_is_named_by_its_thread_and_reasons_fit_one_line"
        );
        assert_eq!(one_line("no\tmount\nhere"), "no mount here");
    }

    #[test]
    fn a_record_is_one_line_per_skip_in_the_processs_file() {
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), "pkg\tm::a\twhy\n");
        record(dir.path(), "pkg\tm::b\twhy not\n");
        let text = std::fs::read_to_string(dir.path().join(format!("{}.tsv", std::process::id())))
            .unwrap();
        assert_eq!(text, "pkg\tm::a\twhy\npkg\tm::b\twhy not\n");
    }

    #[test]
    fn skip_from_a_thread_that_is_not_a_test_panics() {
        let joined = std::thread::spawn(|| skip("anything")).join();
        assert!(joined.is_err(), "an unnamed thread cannot record a skip");
    }
}
