//! Which Postgres the Postgres variants of the tests use, and the explicit opt-out that skips
//! them: no Postgres and no opt-out is a failure, never a silent pass.

/// The variable holding the test Postgres URL (`scripts/test` sets it after starting one).
pub const URL_ENV: &str = "CODEX_RELAY_TEST_POSTGRES";
/// Set to `1` to skip the Postgres variants on purpose (they print why they skipped).
pub const SKIP_ENV: &str = "CODEX_RELAY_SKIP_POSTGRES";

/// The test Postgres URL; `None` (with the reason printed) when the Postgres variants are
/// skipped on purpose. Panics when neither is set, so a missing Postgres fails the run.
pub fn url(test: &str) -> Option<String> {
    if let Some(url) = std::env::var(URL_ENV).ok().filter(|v| !v.trim().is_empty()) {
        return Some(url);
    }
    if std::env::var(SKIP_ENV).is_ok_and(|v| v == "1") {
        eprintln!("skipped {test}: {SKIP_ENV}=1 and no {URL_ENV}");
        return None;
    }
    panic!(
        "{test} needs Postgres: set {URL_ENV} to a postgres:// URL (./scripts/test starts a \
         throwaway one), or set {SKIP_ENV}=1 to skip the Postgres variants on purpose"
    )
}
