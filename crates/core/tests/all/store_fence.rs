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
/// A fresh schema, a store on it through a proxy, fenced as instance `A` live at epoch 1.
struct Fenced {
    admin: sqlx::PgConnection,
    schema: String,
    db: sqlx::PgConnection,
    proxy: TcpProxy,
    store: Store,
    fence: Arc<Fence>,
}

impl Fenced {
    async fn new(test: &str) -> Option<Fenced> {
        let base = codex_relay_testkit::postgres::url(test)?;
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
        let proxy = TcpProxy::start(server_of(&base).await).await;
        let store = Store::open(&format!("{}{path}", through(&base, proxy.addr())))
            .await
            .unwrap();
        let mut db = sqlx::PgConnection::connect(&format!("{base}{path}"))
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO relay_instances (id, epoch, state, lease_until) \
             VALUES ('A', 1, 'live', now() + interval '1 hour')",
        )
        .execute(&mut db)
        .await
        .unwrap();
        let fence = Arc::new(Fence::new("codex_relay_fence_test".into(), "A".into(), 1));
        store.set_fence(fence.clone());
        Some(Fenced {
            admin,
            schema,
            db,
            proxy,
            store,
            fence,
        })
    }

    /// The session's log in Postgres: `<seq> <text>` per event.
    async fn log(&mut self) -> Vec<String> {
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT seq, json FROM events WHERE session_id = 's1' ORDER BY seq")
                .fetch_all(&mut self.db)
                .await
                .unwrap();
        rows.iter()
            .map(|(seq, json)| {
                let v: serde_json::Value = serde_json::from_str(json).unwrap();
                format!("{seq} {}", v["text"].as_str().unwrap_or("?"))
            })
            .collect()
    }

    async fn drop_schema(mut self) {
        self.store.close().await.ok();
        let _ = self.db.close().await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA \"{}\" CASCADE",
            self.schema
        )))
        .execute(&mut self.admin)
        .await
        .unwrap();
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
    let Some(mut t) = Fenced::new("store fence across a lost lease").await else {
        return;
    };
    t.store.append_event(event(1, "committed under epoch 1"));
    t.store.flush().await.unwrap();

    // Postgres goes out of reach with an event of epoch 1 queued.
    t.proxy.cut();
    t.store.append_event(event(2, "queued under epoch 1"));
    let mut pause = Duration::from_millis(50);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while t.store.fault().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the writer never met the cut"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }

    // The lease is lost and the instance joins again under epoch 2; the session's adopter
    // numbers its events after the last committed one.
    t.fence.mark_lost();
    sqlx::query("UPDATE relay_instances SET epoch = 2 WHERE id = 'A'")
        .execute(&mut t.db)
        .await
        .unwrap();
    t.fence.renew(2);
    t.store.append_event(event(2, "adopted under epoch 2"));

    t.proxy.mend();
    tokio::time::timeout(Duration::from_secs(120), t.store.flush())
        .await
        .expect("the writer commits once Postgres is back")
        .unwrap();
    assert_eq!(
        t.log().await,
        ["1 committed under epoch 1", "2 adopted under epoch 2"],
        "the log must hold what epoch 2 wrote, not what epoch 1 queued before it lost its lease"
    );
    assert!(
        t.fence.dropped() >= 1,
        "the write of epoch 1 is counted as dropped"
    );
    t.drop_schema().await;
}

/// The log in Postgres already has another event under a seq the instance writes (another
/// log of the session was committed there): the batch must fail, so that nothing waiting for
/// it (a close's acknowledgement, the readers) takes the event for committed. An event the
/// log already holds as it is (a batch retried after its commit went through) is no fault.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_whose_seq_the_log_gives_another_is_not_taken_for_committed() {
    let Some(mut t) = Fenced::new("store fence over a diverged log").await else {
        return;
    };
    t.store.append_event(event(1, "committed"));
    t.store.flush().await.unwrap();
    t.store.append_event(event(1, "committed"));
    t.store
        .flush()
        .await
        .expect("writing the same event again is idempotent");
    sqlx::query(
        "INSERT INTO events (session_id, seq, time, json) \
         VALUES ('s1', 2, 0, '{\"seq\":2,\"text\":\"another log\"}')",
    )
    .execute(&mut t.db)
    .await
    .unwrap();
    t.store.append_event(event(2, "closed"));
    let flushed = t.store.flush().await;
    assert!(
        flushed.is_err(),
        "the flush (what a close's acknowledgement waits for) must fail: the log has another event at seq 2"
    );
    assert_eq!(t.log().await, ["1 committed", "2 another log"]);
    t.drop_schema().await;
}
