//! A departed colleague's open streams end: through `serve`, a viewer's personal token holds the
//! relay-wide SSE stream and a session's stream open; the admin revokes the token and both end
//! (within the relay's re-check interval, 10 s), and the token's next request is refused. The
//! same for a user the admin disables while their stream is open.

use std::time::{Duration, Instant};

use crate::common::{Bed, HttpRelay};
use crate::http_support::Client;
use crate::people::{bearer, user_with_token};
use codex_relay_testkit::Reply;
use serde_json::json;

/// Well past the relay's re-check interval (10 s), for a loaded machine.
const ENDS: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_or_disabled_persons_open_streams_end() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    bed.model.route("PEOPLE-STREAMS", [Reply::text("hello")]);
    let relay = HttpRelay::start(bed.args(60_000)).await;
    let admin = Client::new(&relay.url);
    let r = admin
        .post(
            "/api/sessions",
            &json!({"prompt": "PEOPLE-STREAMS: hi", "cwd": bed.home.workspace(),
                "sandbox": "read-only"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let session = r.json()["sessionId"].as_str().unwrap().to_owned();

    let (token_id, token) = user_with_token(&admin, "Rita Revoked", "viewer").await;
    let rita = bearer(&relay.url, &token);
    let mut relay_wide = rita.stream("/api/stream", &[]).await;
    let mut one = rita
        .stream(&format!("/api/sessions/{session}/stream?after=0"), &[])
        .await;
    // Open and kept open while the token is good.
    assert!(
        !relay_wide.ended_within(Duration::from_secs(2)).await,
        "the stream stays open while the token is good"
    );
    let r = admin.delete(&format!("/api/tokens/{token_id}")).await;
    assert!(r.status < 300, "{}", r.text());
    let revoked = Instant::now();
    assert!(
        relay_wide.ended_within(ENDS).await,
        "the relay-wide stream ended"
    );
    assert!(one.ended_within(ENDS).await, "the session's stream ended");
    eprintln!(
        "both streams ended {:?} after the revocation",
        revoked.elapsed()
    );
    assert_eq!(rita.get("/api/sessions").await.status, 401);

    let (_, token) = user_with_token(&admin, "Dan Disabled", "viewer").await;
    let dan = bearer(&relay.url, &token);
    let mut s = dan.stream("/api/stream", &[]).await;
    let r = admin
        .post("/api/users/Dan%20Disabled", &json!({"disabled": true}))
        .await;
    assert!(r.status < 300, "{}", r.text());
    assert!(s.ended_within(ENDS).await, "a disabled user's stream ended");
    assert_eq!(dan.get("/api/sessions").await.status, 401);
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
