//! A slow-loris on loopback does not lock clients out: 2,000 connections that each send part
//! of a request's headers and then nothing hold no place for long (the longest-idle connection
//! makes room at the cap) and are closed after the header timeout, while an authenticated
//! client keeps getting its answers. How fast is not a test's to assert on a shared machine:
//! `cargo bench -p codex-relay-bench --bench slowloris` prints the latency figures against a
//! quiet relay.

use std::time::{Duration, Instant};

use crate::common::{Bed, HttpRelay};
use crate::http_support::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use tokio::net::TcpStream;

const LORIS: usize = 2000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_half_open_connections_do_not_stop_an_authenticated_client() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let mut args = bed.args(60_000);
    args.extend(["--header-timeout-ms".into(), "3000".into()]);
    let relay = HttpRelay::start(args).await;
    let client = Client::new(&relay.url);
    let addr = client.addr.clone();
    assert_eq!(
        client.get("/api/codex/permission/pending").await.status,
        200
    );

    // The attack: every connection sends a request line and one header, then waits.
    let started = Instant::now();
    let mut loris = Vec::with_capacity(LORIS);
    for _ in 0..LORIS {
        let mut s = TcpStream::connect(&addr).await.expect("connect");
        s.write_all(b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .expect("partial headers");
        loris.push(s);
    }
    eprintln!("{LORIS} half-open connections in {:?}", started.elapsed());

    // Meanwhile the authenticated client's requests are answered. How fast is the slowloris
    // bench's to say (benches/slowloris.rs): on a loaded machine a test can only ask that
    // they are answered at all while the loris holds its connections.
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let t = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(60),
            client.get("/api/codex/permission/pending"),
        )
        .await
        .expect("an answer while the loris holds its connections");
        assert_eq!(r.status, 200, "{}", r.text());
        slowest = slowest.max(t.elapsed());
    }
    eprintln!("slowest answer under the loris: {slowest:?}");

    // Bounded in count: past the connection cap (1,024) the longest-idle ones made room, so
    // at most that many are still open now, long before the header timeout.
    let mut closed = 0;
    for s in &loris {
        let mut buf = [0u8; 1];
        match s.try_read(&mut buf) {
            Ok(_) => closed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => closed += 1,
        }
    }
    eprintln!("closed to make room: {closed}");
    assert!(closed >= LORIS - 1024, "only {closed} made room");

    // Bounded in time: every half-open connection is closed by the header timeout (or made
    // room earlier); none is left open after it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut open = 0;
    for mut s in loris {
        let mut buf = [0u8; 512];
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(_)) | Ok(Err(_)) => {}
            Err(_) => open += 1,
        }
    }
    assert_eq!(
        open, 0,
        "half-open connections still open after the header timeout"
    );
    relay.stop().await;
}
