//! A slow-loris against the HTTP front (figures printed, not asserted): how long an
//! authenticated client waits for answers while 2,000 connections on loopback each hold a
//! half-sent request, against the same client on a quiet relay in the same run.
//!
//! The relay (engine + HTTP front behind its security layers, served by its own server loop
//! with `serve`'s default limits: 1,024 connections, a 10 s header timeout) runs in this
//! process; the half-open connections too (they cost no CPU once sent). The client makes 200
//! requests to `GET /api/codex/permission/pending`, one connection each, as a browser's
//! polling would.
//!
//! Run: `cargo bench -p codex-relay-bench --bench slowloris`. `LORIS` sets the number of
//! half-open connections (default 2000).

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

async fn get(addr: &str) -> Duration {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(
        format!(
            "GET /api/codex/permission/pending HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    assert!(
        buf.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf)
    );
    t.elapsed()
}

/// p50, p99 and max of `REQUESTS` answers, in milliseconds.
async fn answers(addr: &str) -> (f64, f64, f64) {
    let mut took: Vec<Duration> = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        took.push(get(addr).await);
    }
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (
        ms(took[REQUESTS / 2]),
        ms(took[REQUESTS * 99 / 100]),
        ms(took[REQUESTS - 1]),
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
    let started = Instant::now();
    let mut held = Vec::with_capacity(loris);
    for _ in 0..loris {
        let mut s = TcpStream::connect(&addr).await.expect("connect");
        s.write_all(b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        held.push(s);
    }
    let opened = started.elapsed();
    let attacked = answers(&addr).await;
    println!("slowloris: {loris} half-open connections opened in {opened:.2?}");
    println!("{:<28} {:>8} {:>8} {:>8}", "", "p50 ms", "p99 ms", "max ms");
    for (name, (p50, p99, max)) in [("quiet relay", quiet), ("under the loris", attacked)] {
        println!("{name:<28} {p50:>8.2} {p99:>8.2} {max:>8.2}");
    }
    println!(
        "ratio under the loris / quiet: p50 {:.2}x, p99 {:.2}x (target: every answer within 1 s: max {:.1} ms)",
        attacked.0 / quiet.0,
        attacked.1 / quiet.1,
        attacked.2
    );
    drop(held);
    relay.shutdown().await;
}
