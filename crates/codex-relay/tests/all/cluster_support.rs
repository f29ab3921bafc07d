//! What the cluster tests share: a Postgres schema of their own, `serve` as a named instance,
//! and reading sessions, the cluster view and Codex's processes through the HTTP API.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Bed, HttpRelay};
use crate::http_support::{Client, Event};

pub const NEWEST: &str = codex_relay_testkit::NEWEST;
pub const TURN: Duration = Duration::from_secs(90);
/// The instances' lease in these tests: short, so failover is quick to show, and long enough
/// that an instance on a loaded machine renews it on time (it stops its sessions when it
/// cannot confirm it for three quarters of it, and takes no work past half of it).
pub const LEASE_MS: u64 = 5_000;

/// A schema of its own in the test Postgres, as a store URL; `None` when the Postgres
/// variants are skipped on purpose (with the reason printed).
pub async fn fresh_schema(test: &str) -> Option<String> {
    let base = codex_relay_testkit::postgres::url(test)?;
    let schema = format!(
        "cluster_{}_{}",
        std::process::id(),
        Instant::now().elapsed().subsec_nanos() ^ rand_bits()
    );
    let pool = sqlx::PgPool::connect(&base).await.expect("test Postgres");
    // The name is made here of digits and underscores.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&pool)
        .await
        .expect("create schema");
    pool.close().await;
    let sep = if base.contains('?') { '&' } else { '?' };
    Some(format!("{base}{sep}options=-c%20search_path%3D{schema}"))
}

pub fn rand_bits() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(0);
    h.finish() as u32
}

/// `serve` as instance `name` of the cluster on `db`, with the bed's shared CODEX_HOME and a
/// data directory of its own.
pub async fn instance(bed: &Bed, db: &str, name: &str) -> HttpRelay {
    instance_with(bed, db, name, LEASE_MS).await
}

/// [`instance`] with a lease of `lease_ms`. Each instance has Codex's state database in a
/// directory of its own (`CODEX_SQLITE_HOME`), as docs/CLUSTER.md asks of machines sharing a
/// `CODEX_HOME` on a network filesystem: the rollouts are shared, the SQLite files are not.
pub async fn instance_with(bed: &Bed, db: &str, name: &str, lease_ms: u64) -> HttpRelay {
    instance_extra(bed, db, name, lease_ms, &[]).await
}

/// [`instance_with`], with `extra` arguments for `serve` (`--notify FILE`, ...).
pub async fn instance_extra(
    bed: &Bed,
    db: &str,
    name: &str,
    lease_ms: u64,
    extra: &[String],
) -> HttpRelay {
    let mut args = vec!["--listen".to_owned(), "127.0.0.1:0".to_owned()];
    args.extend(bed.args(120_000));
    let at = args.iter().position(|a| a == "--db").unwrap() + 1;
    args[at] = db.to_owned();
    let at = args.iter().position(|a| a == "--data-dir").unwrap() + 1;
    args[at] = bed
        .home
        .root()
        .join(format!("data-{name}"))
        .display()
        .to_string();
    args.extend([
        "--instance-id".into(),
        name.into(),
        "--lease-ms".into(),
        lease_ms.to_string(),
    ]);
    args.extend(extra.iter().cloned());
    let mut env: Vec<(&str, String)> = ["PATH", "HOME", "TMPDIR", "RUST_LOG"]
        .into_iter()
        .filter_map(|k| Some((k, std::env::var(k).ok()?)))
        .collect();
    env.push((
        "LOG_LEVEL",
        std::env::var("LOG_LEVEL").unwrap_or_else(|_| "info".into()),
    ));
    env.push((
        "CODEX_SQLITE_HOME",
        sqlite_home(bed, name).display().to_string(),
    ));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    HttpRelay::start_with_env(&args, &env).await
}

/// Where instance `name` keeps Codex's state database.
pub fn sqlite_home(bed: &Bed, name: &str) -> std::path::PathBuf {
    let dir = bed.home.root().join(format!("sqlite-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn ev_t(e: &Event) -> String {
    e.json()["ev"]["t"].as_str().unwrap_or_default().to_owned()
}

pub fn is_status(e: &Event, status: &str) -> bool {
    e.event == "envelope" && ev_t(e) == "status" && e.json()["ev"]["status"] == status
}

pub async fn create(c: &Client, body: Value) -> String {
    let r = c.post("/api/sessions", &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["sessionId"].as_str().unwrap().to_owned()
}

/// Polls `GET /api/sessions/{id}` through `c` until `done` holds; returns that view.
pub async fn view_until(c: &Client, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + TURN;
    loop {
        let r = c.get(&format!("/api/sessions/{id}")).await;
        let v = if r.status == 200 {
            r.json()
        } else {
            json!(null)
        };
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: last view {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The cluster as `c`'s `/healthz` shows it, once `done` holds for it.
pub async fn cluster_until(c: &Client, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + TURN;
    loop {
        let h = c.get("/healthz").await.json();
        if done(&h["cluster"]) {
            return h["cluster"].clone();
        }
        assert!(Instant::now() < deadline, "{what}: last /healthz {h}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn instance_of<'a>(cluster: &'a Value, id: &str) -> &'a Value {
    cluster["instances"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["id"] == id))
        .unwrap_or(&Value::Null)
}

/// Every event of the session, as the store has it, through `c`.
pub async fn history(c: &Client, id: &str) -> Vec<Value> {
    let r = c
        .get(&format!("/api/sessions/{id}/events?after=0&limit=10000"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    body["events"]
        .as_array()
        .or_else(|| body.as_array())
        .cloned()
        .unwrap_or_else(|| panic!("events: {body}"))
}

pub fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

pub fn assert_contiguous(events: &[Value]) {
    let s = seqs(events);
    assert_eq!(
        s,
        (1..=s.len() as u64).collect::<Vec<_>>(),
        "seqs 1..n without gap or repeat"
    );
}

/// The pids of `serve`'s direct children: its Codex app-servers, each in a group of its own.
pub fn codex_groups(relay_pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let after = s.rsplit_once(')')?.1.to_owned();
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(relay_pid)
        })
        .collect()
}

/// The time (as the log prints it: RFC 3339 in UTC, so such times compare as text) of the
/// first line of `relay`'s log that contains `needle`.
pub fn logged_at(relay: &HttpRelay, needle: &str) -> Option<String> {
    let log = relay.log.lock().unwrap();
    let line = log.iter().find(|l| l.contains(needle))?;
    // Without the terminal colours (ESC '[' ... a letter).
    let mut plain = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(char::is_ascii_alphabetic);
        } else {
            plain.push(c);
        }
    }
    plain
        .split_whitespace()
        .find(|w| w.contains('T') && w.ends_with('Z'))
        .map(str::to_owned)
}
