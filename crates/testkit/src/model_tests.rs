//! The scripted model's own tests: strict about requests it has no reply for.
use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// POSTs `body` to `/v1/responses`; returns the status line.
async fn post(server: &ModelServer, body: &str) -> String {
    let addr = server
        .url()
        .trim_start_matches("http://")
        .trim_end_matches("/v1");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST /v1/responses HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    tcp.read_to_string(&mut out).await.unwrap();
    out.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn an_unscripted_request_is_refused_and_fails_the_test_on_drop() {
    let server = ModelServer::start().await;
    server.route("MARKED", [Reply::text("for the marked one")]);
    let body =
        r#"{"input":[{"role":"user","content":[{"type":"input_text","text":"MARKED hi"}]}]}"#;
    assert!(post(&server, body).await.contains("200"));
    let stray = r#"{"input":[{"role":"user","content":[{"type":"input_text","text":"stray"}]}]}"#;
    assert!(post(&server, stray).await.contains("400"));
    assert_eq!(server.unscripted(), 1);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(server)));
    let message = *dropped
        .expect_err("dropping fails the test")
        .downcast::<String>()
        .unwrap();
    assert!(message.contains("\"stray\""), "{message}");
}

#[tokio::test]
async fn allow_unscripted_keeps_refusing_without_failing() {
    let server = ModelServer::start().await;
    server.allow_unscripted();
    assert!(post(&server, r#"{"input":[]}"#).await.contains("400"));
    drop(server);
}
