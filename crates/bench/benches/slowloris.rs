//! Slow clients against the HTTP front (figures printed, not asserted): how long an
//! authenticated client waits for answers while 2,000 connections on loopback each hold a
//! half-sent request (slow headers), then while 1,100 connections with no credentials each
//! send complete `POST /login` headers announcing a 100,000-byte body and trickle it a byte
//! every 3 s (slow bodies), against the same client on a quiet relay in the same run.
//!
//! The relay (engine + HTTP front behind its security layers, served by its own server loop
//! with `serve`'s default limits: 1,024 connections, a 10 s header timeout, bodies at least
//! 4 KiB/s after it) runs in this process; the attacking connections too (they cost little
//! CPU once sent). The client makes 200 requests to `GET /api/codex/permission/pending`, one
//! connection each, as a browser's polling would; a request that is refused counts as failed.
//!
//! Run: `cargo bench -p codex-relay-bench --bench slowloris`. `LORIS` sets the number of
//! half-open connections (default 2000), `BODIES` the number of slow bodies (default 1100).

use std::time::{Duration, Instant};

use codex_relay_codex::AppServerConfig;
use codex_relay_core::{Relay, RelayConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FAKE: &str = env!("CARGO_BIN_EXE_fake-app-server");
const TOKEN: &str = "slowloris-bench-token-0123456789";
const REQUESTS: usize = 200;

/// One request; its time, or `None` if it was refused or not answered 200.
async fn get(addr: &str) -> Option<Duration> {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).await.ok()?;
    s.write_all(
        format!(
            "GET /api/codex/permission/pending HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.ok()?;
    buf.starts_with(b"HTTP/1.1 200").then(|| t.elapsed())
}

/// p50, p99 and max of the answered requests out of `REQUESTS`, in milliseconds, and how
/// many failed.
async fn answers(addr: &str) -> ((f64, f64, f64), usize) {
    let mut took: Vec<Duration> = Vec::with_capacity(REQUESTS);
    let mut failed = 0;
    for _ in 0..REQUESTS {
        match get(addr).await {
            Some(d) => took.push(d),
            None => failed += 1,
        }
    }
    if took.is_empty() {
        return ((f64::NAN, f64::NAN, f64::NAN), failed);
    }
    took.sort();
    let n = took.len();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (
        (ms(took[n / 2]), ms(took[n * 99 / 100]), ms(took[n - 1])),
        failed,
    )
}

#[tokio::main]
async fn main() {
    codex_relay_codex::platform::process::raise_fd_limit(65_536);
    let loris: usize = std::env::var("LORIS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir().unwrap();
    let config = RelayConfig::new(
        AppServerConfig::new(FAKE),
        dir.path().join("bench.db").display().to_string(),
    );
    let relay = Relay::open(config).await.expect("relay opens");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let credentials = std::sync::Arc::new(codex_relay_http::auth::Credentials::new(
        Some(codex_relay_http::auth::sha256(TOKEN.as_bytes())),
        None,
    ));
    let app = codex_relay_http::secure(
        codex_relay_http::router(relay.clone(), Default::default()),
        codex_relay_http::Security {
            credentials,
            allowed_hosts: vec![addr.clone()],
            cors_origins: vec![],
            body_limit: codex_relay_http::security::DEFAULT_BODY_LIMIT,
            trusted_proxies: vec![],
            streams: Default::default(),
        },
    );
    tokio::spawn(codex_relay_http::server::serve(
        listener,
        app,
        Default::default(),
        None,
        std::future::pending(),
    ));
    let quiet = answers(&addr).await;

    // Slow headers.
    let started = Instant::now();
    let mut held = Vec::with_capacity(loris);
    for _ in 0..loris {
        let mut s = TcpStream::connect(&addr).await.expect("connect");
        let _ = s
            .write_all(b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await;
        held.push(s);
    }
    let opened = started.elapsed();
    let attacked = answers(&addr).await;
    drop(held);
    println!("slowloris: {loris} half-open connections opened in {opened:.2?}");

    // Slow bodies, trickled a byte every 3 s by a task of their own.
    let bodies: usize = std::env::var("BODIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1100);
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\nt"
    );
    let started = Instant::now();
    let mut slow = Vec::with_capacity(bodies);
    for _ in 0..bodies {
        let mut s = TcpStream::connect(&addr).await.expect("connect");
        let _ = s.write_all(head.as_bytes()).await;
        slow.push(s);
    }
    let opened = started.elapsed();
    let trickle = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(3)).await;
            for s in &slow {
                let _ = s.try_write(b"x");
            }
        }
    });
    // Under way (headers read, bodies awaited) before the client starts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let trickled = answers(&addr).await;
    trickle.abort();
    println!("slow bodies: {bodies} connections opened in {opened:.2?}");

    println!(
        "{:<28} {:>8} {:>8} {:>8} {:>8}",
        "", "p50 ms", "p99 ms", "max ms", "failed"
    );
    for (name, ((p50, p99, max), failed)) in [
        ("quiet relay", quiet),
        ("under the loris", attacked),
        ("under slow bodies", trickled),
    ] {
        println!("{name:<28} {p50:>8.2} {p99:>8.2} {max:>8.2} {failed:>8}");
    }
    for (name, under) in [("the loris", attacked), ("slow bodies", trickled)] {
        println!(
            "ratio under {name} / quiet: p50 {:.2}x, p99 {:.2}x (target: every answer within 1 s and none refused: max {:.1} ms, {} refused)",
            under.0.0 / quiet.0.0,
            under.0.1 / quiet.0.1,
            under.0.2,
            under.1
        );
    }
    relay.shutdown().await;
}
