//! A TCP proxy a test controls, to cut the network between one process and a server (a relay
//! instance and Postgres) and mend it: cut, every open connection is dropped and new ones are
//! closed as soon as they are accepted; mended, connections pass again.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A proxy on a loopback port to `target`; stops on drop.
pub struct TcpProxy {
    addr: SocketAddr,
    cut: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (cut, _) = watch::channel(false);
        let cut_rx = Arc::new(cut.subscribe());
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let mut rx = (*cut_rx).clone();
                if *rx.borrow() {
                    drop(client);
                    continue;
                }
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = rx.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        TcpProxy { addr, cut, task }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cuts the network: open connections drop, new ones close at once.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Mends it: new connections pass again.
    pub fn mend(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.cut.send_replace(true);
        self.task.abort();
    }
}
