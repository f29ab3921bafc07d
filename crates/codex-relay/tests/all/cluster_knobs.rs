//! The cluster rows of the README's settings table (docs/CLUSTER.md), on `codex-relay serve`
//! with a Postgres store, each set through its environment variable (the flags are what
//! `cluster.rs` and `cluster_faults.rs` use): the id, the advertised URL and the lease show in
//! `/healthz`'s cluster view, a second session past `CODEX_RELAY_MAX_LOAD` starts on the less
//! loaded instance, and `CODEX_RELAY_NO_CLUSTER` runs alone. The defaults: an id of the host
//! name and a suffix, kept in the data directory (the same after a restart), no URL, a lease of
//! 10 s. The rest of the table is `mcp_knobs.rs`.

use std::path::{Path, PathBuf};

use crate::cluster_support::*;
use crate::common::{Bed, HttpRelay};
use crate::http_support::Client;
use codex_relay_testkit::Reply;
use serde_json::json;

/// `serve` on `db` with `data` as its data directory, the store and data directory from their
/// variables, and `cluster` (variable, value) pairs on top; nothing of the cluster on its
/// command line.
async fn serve_env(
    bed: &Bed,
    db: &str,
    data: &Path,
    name: &str,
    cluster: &[(&str, &str)],
) -> HttpRelay {
    let mut args = vec!["--listen".to_owned(), "127.0.0.1:0".to_owned()];
    let engine = bed.args(120_000);
    // Every engine flag but the store's two, which come from the environment here.
    let mut it = engine.into_iter();
    while let Some(flag) = it.next() {
        let value = it.next().expect("flags come with a value");
        if flag != "--db" && flag != "--data-dir" {
            args.extend([flag, value]);
        }
    }
    let mut env: Vec<(&str, String)> = ["PATH", "HOME", "TMPDIR", "RUST_LOG"]
        .into_iter()
        .filter_map(|k| Some((k, std::env::var(k).ok()?)))
        .collect();
    env.push(("LOG_LEVEL", "info".into()));
    env.push((
        "CODEX_SQLITE_HOME",
        sqlite_home(bed, name).display().to_string(),
    ));
    env.push(("CODEX_RELAY_DB", db.to_owned()));
    env.push(("CODEX_RELAY_DATA_DIR", data.display().to_string()));
    env.extend(cluster.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    HttpRelay::start_with_env(&args, &env).await
}

fn data_dir(bed: &Bed, name: &str) -> PathBuf {
    bed.home.root().join(format!("data-{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_settings_from_the_environment_take_effect() {
    let Some(db) = fresh_schema("cluster_postgres_settings_from_the_environment_take_effect").await
    else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    for marker in ["KN-FIRST", "KN-SECOND"] {
        bed.model
            .route(marker, [Reply::text(format!("{marker} done"))]);
    }
    let a = serve_env(
        &bed,
        &db,
        &data_dir(&bed, "knob-a"),
        "knob-a",
        &[
            ("CODEX_RELAY_INSTANCE_ID", "knob-a"),
            ("CODEX_RELAY_ADVERTISE_URL", "http://knob-a.invalid:7878"),
            ("CODEX_RELAY_LEASE_MS", "3000"),
            ("CODEX_RELAY_MAX_LOAD", "1"),
        ],
    )
    .await;
    let b = instance(&bed, &db, "knob-b").await;
    let (ca, cb) = (Client::new(&a.url), Client::new(&b.url));
    let cluster = cluster_until(&ca, "both instances live", |cl| {
        ["knob-a", "knob-b"]
            .iter()
            .all(|i| instance_of(cl, i)["state"] == "live")
    })
    .await;
    // CODEX_RELAY_INSTANCE_ID and CODEX_RELAY_ADVERTISE_URL; B sets no URL (default none).
    assert_eq!(cluster["instance"], "knob-a", "{cluster}");
    let me = instance_of(&cluster, "knob-a");
    assert_eq!(me["url"], "http://knob-a.invalid:7878", "{cluster}");
    assert!(
        instance_of(&cluster, "knob-b")["url"].is_null(),
        "{cluster}"
    );
    // CODEX_RELAY_LEASE_MS: never more than 3 s left (the default would show up to 10 s).
    for _ in 0..10 {
        let cl = cluster_until(&cb, "A's lease", |_| true).await;
        let left = instance_of(&cl, "knob-a")["leaseLeftMs"].as_i64().unwrap();
        assert!(0 < left && left <= 3000, "{cl}");
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    }

    // CODEX_RELAY_MAX_LOAD=1: the first session through A runs on A, the second on B.
    let ws = bed.home.workspace().display().to_string();
    let simple = |marker: &str| json!({"prompt": format!("{marker}: hello"), "cwd": ws, "sandbox": "read-only"});
    let first = create(&ca, simple("KN-FIRST")).await;
    view_until(&ca, &first, "the first session's turn", |v| {
        v["status"] == "idle" && v["turnCount"] == 1
    })
    .await;
    let second = create(&ca, simple("KN-SECOND")).await;
    let v = view_until(&cb, &second, "the second session's turn", |v| {
        v["status"] == "idle" && v["turnCount"] == 1
    })
    .await;
    assert_eq!(v["result"], "KN-SECOND done", "{v}");
    cluster_until(&ca, "one session on each instance", |cl| {
        instance_of(cl, "knob-a")["sessions"] == 1 && instance_of(cl, "knob-b")["sessions"] == 1
    })
    .await;
    assert!(
        a.log_text()
            .contains("starting a session on a less loaded instance"),
        "{}",
        a.log_text()
    );
    drop((a, b));
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_postgres_defaults_and_no_cluster_from_the_environment() {
    let name = "cluster_postgres_defaults_and_no_cluster_from_the_environment";
    let Some(db) = fresh_schema(name).await else {
        return;
    };
    let Some(alone_db) = fresh_schema(name).await else {
        return;
    };
    let bed = Bed::start(NEWEST).await;
    let data = data_dir(&bed, "knob-default");

    // No cluster variable: an id made of the host name and a suffix, kept in the data
    // directory; no URL; a lease of 10 s (more than 3 s left after a renewal, every 2.5 s).
    let d = serve_env(&bed, &db, &data, "knob-default", &[]).await;
    let cd = Client::new(&d.url);
    let cluster = cluster_until(&cd, "a lease renewed", |cl| {
        cl["leased"] == true
            && instance_of(cl, cl["instance"].as_str().unwrap_or(""))["leaseLeftMs"]
                .as_i64()
                .is_some_and(|left| left > 3000)
    })
    .await;
    let id = cluster["instance"].as_str().unwrap().to_owned();
    let kept = std::fs::read_to_string(data.join("instance-id")).unwrap();
    assert_eq!(kept.trim(), id, "{cluster}");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert!(id.starts_with(&format!("{}-", host.trim())), "{id}");
    let me = instance_of(&cluster, &id);
    assert!(me["url"].is_null(), "{cluster}");
    assert!(me["leaseLeftMs"].as_i64().unwrap() <= 10_000, "{cluster}");
    assert!(d.stop().await.success());
    // Started again on the same data directory: the same instance.
    let d = serve_env(&bed, &db, &data, "knob-default", &[]).await;
    let again = cluster_until(&Client::new(&d.url), "the restarted instance", |cl| {
        cl["leased"] == true
    })
    .await;
    assert_eq!(again["instance"], id.as_str(), "{again}");
    assert!(d.stop().await.success());

    // CODEX_RELAY_NO_CLUSTER: alone on its Postgres, no cluster in /healthz, no id kept.
    let alone_data = data_dir(&bed, "knob-alone");
    let e = serve_env(
        &bed,
        &alone_db,
        &alone_data,
        "knob-alone",
        &[("CODEX_RELAY_NO_CLUSTER", "true")],
    )
    .await;
    let health = Client::new(&e.url).get("/healthz").await;
    assert_eq!(health.status, 200, "{}", health.text());
    assert!(health.json()["cluster"].is_null(), "{}", health.text());
    assert!(!alone_data.join("instance-id").exists());
    drop(e);
    bed.assert_no_codex_left().await;
}
