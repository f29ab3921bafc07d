//! The fence of one cluster instance's store across a lost lease (docs/CLUSTER.md, "Fencing"):
//! what the instance queued under one epoch never lands under the next, even when Postgres
//! was out of reach the whole time in between. Run on Postgres (CODEX_RELAY_TEST_POSTGRES),
//! through a TCP proxy the test cuts and mends.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use codex_relay_core::store::{Fence, Store, StoredEvent};
use codex_relay_testkit::tcp_proxy::TcpProxy;
use sqlx::Connection;

/// `base` with its host and port replaced by `addr` (the user and the rest kept).
fn through(base: &str, addr: SocketAddr) -> String {
    let (scheme, rest) = base.split_once("://").expect("a postgres:// URL");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let user = authority
        .rsplit_once('@')
        .map(|(u, _)| format!("{u}@"))
        .unwrap_or_default();
    format!("{scheme}://{user}{addr}{tail}")
}

/// The server `base` points at.
async fn server_of(base: &str) -> SocketAddr {
    let rest = base.split_once("://").expect("a postgres:// URL").1;
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:5432")
    };
    tokio::net::lookup_host(host)
        .await
        .expect("resolve the Postgres host")
        .next()
        .expect("an address for the Postgres host")
}

fn event(seq: i64, text: &str) -> StoredEvent {
    StoredEvent {
        session_id: "s1".into(),
        seq,
        time: 1_700_000_000_000 + seq,
        json: format!(r#"{{"seq":{seq},"text":"{text}"}}"#),
    }
}

/// An instance queues an event, Postgres goes out of reach before it commits, the instance
/// loses its lease and joins again under a new epoch (as lease.rs's rejoin does, its flush
/// timing out), and the session is adopted back with its events numbered after the last
/// committed one. Postgres comes back: the event of the old epoch must be dropped, not
/// committed under the new one (where it took the seq of the adopter's event, whose insert
/// then did nothing while the readers were told it was committed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_queued_before_a_lost_lease_never_lands_under_the_next_epoch() {
    let Some(base) = codex_relay_testkit::postgres::url("store fence across a lost lease") else {
        return;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = format!("st_fence_{}_{nanos}", std::process::id());
    let mut admin = sqlx::PgConnection::connect(&base).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA \"{schema}\"")))
        .execute(&mut admin)
        .await
        .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    let path = format!("{sep}options=-c%20search_path%3D{schema}");
    let direct = format!("{base}{path}");
    let proxy = TcpProxy::start(server_of(&base).await).await;
    let store = Store::open(&format!("{}{path}", through(&base, proxy.addr())))
        .await
        .unwrap();
    let mut db = sqlx::PgConnection::connect(&direct).await.unwrap();
    sqlx::query(
        "INSERT INTO relay_instances (id, epoch, state, lease_until) \
         VALUES ('A', 1, 'live', now() + interval '1 hour')",
    )
    .execute(&mut db)
    .await
    .unwrap();
    let fence = Arc::new(Fence::new("codex_relay_fence_test".into(), "A".into(), 1));
    store.set_fence(fence.clone());
    store.append_event(event(1, "committed under epoch 1"));
    store.flush().await.unwrap();

    // Postgres goes out of reach with an event of epoch 1 queued.
    proxy.cut();
    store.append_event(event(2, "queued under epoch 1"));
    let mut pause = Duration::from_millis(50);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while store.fault().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the writer never met the cut"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }

    // The lease is lost and the instance joins again under epoch 2; the session's adopter
    // numbers its events after the last committed one.
    fence.mark_lost();
    sqlx::query("UPDATE relay_instances SET epoch = 2 WHERE id = 'A'")
        .execute(&mut db)
        .await
        .unwrap();
    fence.renew(2);
    store.append_event(event(2, "adopted under epoch 2"));

    proxy.mend();
    tokio::time::timeout(Duration::from_secs(120), store.flush())
        .await
        .expect("the writer commits once Postgres is back")
        .unwrap();
    let rows: Vec<(i64, String)> =
        sqlx::query_as("SELECT seq, json FROM events WHERE session_id = 's1' ORDER BY seq")
            .fetch_all(&mut db)
            .await
            .unwrap();
    let texts: Vec<String> = rows
        .iter()
        .map(|(seq, json)| {
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            format!("{seq} {}", v["text"].as_str().unwrap_or("?"))
        })
        .collect();
    assert_eq!(
        texts,
        ["1 committed under epoch 1", "2 adopted under epoch 2"],
        "the log must hold what epoch 2 wrote, not what epoch 1 queued before it lost its lease"
    );
    assert!(
        fence.dropped() >= 1,
        "the write of epoch 1 is counted as dropped"
    );

    store.close().await.ok();
    let _ = db.close().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA \"{schema}\" CASCADE"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
}
