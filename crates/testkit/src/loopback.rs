//! An axum app served on an ephemeral loopback port for as long as its guard lives: the test
//! servers (scripted model, OAuth token endpoint) start this way.

use std::net::SocketAddr;

/// Stops the server when dropped.
pub struct Serving {
    pub addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Serves `app` on `127.0.0.1:<ephemeral>`; `what` names it if binding fails.
pub async fn serve(app: axum::Router, what: &str) -> Serving {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind {what}: {e}"));
    let addr = listener.local_addr().expect("local addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await;
    });
    Serving { addr, _stop: stop }
}
