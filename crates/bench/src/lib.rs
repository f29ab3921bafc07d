//! Benchmarks live in `benches/`; `src/bin/fake-app-server.rs` is the stand-in Codex they drive.

pub mod sse;

/// The machine's load averages (1, 5, 15 min) as `/proc/loadavg` gives them, printed beside a
/// bench's figures so a run on a busy machine says so.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A schema of its own in the Postgres at `base` (named `bench_<name>_<pid>_<nanos>`), and the
/// URL that makes it the search path: a bench's tables never meet another run's.
pub async fn fresh_schema(base: &str, name: &str) -> String {
    let pool = sqlx::PgPool::connect(base).await.expect("Postgres");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        % 1_000_000_000;
    // The name is made here of letters, digits and underscores.
    let schema = format!("bench_{name}_{}_{nanos}", std::process::id());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&pool)
        .await
        .expect("create schema");
    pool.close().await;
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-c%20search_path%3D{schema}")
}
