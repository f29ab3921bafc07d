//! Where the client of an accepted TCP connection is, as the kernel's socket lookup says (not
//! by comparing addresses: a local process may connect from any address of the machine): a
//! socket of this network namespace (its inode and the user whose process made it), another
//! machine, or a local socket no process holds any more.

use std::net::SocketAddr;

use super::diag::{self, TCP_ESTABLISHED, TCP_LISTEN};

/// The client of a connection, as the kernel knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Client {
    /// The kernel knows no client socket for it in this network namespace, and ours is
    /// connected: the client is on another machine (or in another network namespace).
    Remote,
    /// A socket of this machine: its inode (what `/proc/<pid>/fd` shows as `socket:[N]`) and
    /// the user whose process made it.
    Local { inode: u64, uid: u32 },
    /// A client that cannot be checked: its socket is closed (no process holds it), or it was
    /// reset before it could be looked up, or the lookup failed. Why, in words.
    Gone(String),
}

/// The client of the connection accepted on `local` from `peer`.
pub fn client(peer: SocketAddr, local: SocketAddr) -> Client {
    let lookup =
        |e: std::io::Error| Client::Gone(format!("the kernel's socket lookup failed: {e}"));
    // The client's socket: its own address is `peer`, its other end is us. (Without one the
    // kernel answers with a listener on `peer`'s address, if any: not the client.)
    match diag::tcp_socket(peer, local) {
        Err(e) => return lookup(e),
        Ok(Some(s)) if s.dst == canonical(local) && s.state != TCP_LISTEN => {
            return if s.inode == 0 {
                Client::Gone(format!(
                    "the client's socket is no longer held by any process (state {})",
                    state_name(s.state)
                ))
            } else {
                Client::Local {
                    inode: s.inode,
                    uid: s.uid,
                }
            };
        }
        Ok(_) => {}
    }
    // None here. Remote, if our end is still connected; a local client that reset its socket
    // before we looked (SO_LINGER 0, or its process was killed) leaves ours closed.
    match diag::tcp_socket(local, peer) {
        Err(e) => lookup(e),
        Ok(Some(s)) if s.dst == canonical(peer) && s.state == TCP_ESTABLISHED => Client::Remote,
        Ok(s) => Client::Gone(format!(
            "the client's socket is gone and ours is {} (reset before it could be checked)",
            s.map_or("gone", |s| state_name(s.state))
        )),
    }
}

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(diag::canonical(a.ip()), a.port())
}

fn state_name(state: u8) -> &'static str {
    match state {
        1 => "ESTABLISHED",
        2 => "SYN_SENT",
        3 => "SYN_RECV",
        4 => "FIN_WAIT1",
        5 => "FIN_WAIT2",
        6 => "TIME_WAIT",
        7 => "CLOSE",
        8 => "CLOSE_WAIT",
        9 => "LAST_ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    fn me() -> u32 {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() }
    }

    #[test]
    fn a_local_client_is_local_whatever_address_it_connects_from() {
        let listener = TcpListener::bind("0.0.0.0:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut targets = vec![format!("127.0.0.1:{port}")];
        // The machine's own non-loopback addresses, where it has any.
        targets.extend(
            codex_relay_testkit::addrs::own_addresses()
                .into_iter()
                .filter(|ip| ip.is_ipv4())
                .map(|ip| format!("{ip}:{port}")),
        );
        for target in targets {
            let _client = TcpStream::connect(&target).unwrap();
            let (server, peer) = listener.accept().unwrap();
            let local = server.local_addr().unwrap();
            assert!(
                matches!(client(peer, local), Client::Local { inode, uid } if inode != 0 && uid == me()),
                "{target}: {:?}",
                client(peer, local)
            );
        }
    }

    #[test]
    fn an_ipv4_client_of_a_dual_stack_listener_is_local() {
        let Ok(listener) = TcpListener::bind("[::]:0") else {
            return codex_relay_testkit::skip::skip("no IPv6 on this machine");
        };
        let port = listener.local_addr().unwrap().port();
        let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (server, peer) = listener.accept().unwrap();
        // Seen through the IPv6 listener as ::ffff:127.0.0.1.
        assert!(peer.is_ipv6(), "{peer}");
        let local = server.local_addr().unwrap();
        assert!(
            matches!(client(peer, local), Client::Local { inode, .. } if inode != 0),
            "{:?}",
            client(peer, local)
        );
    }

    #[test]
    fn a_closed_or_reset_client_cannot_be_checked() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        // Wrote its request and closed: its socket lingers, held by nobody.
        let mut c = TcpStream::connect(local).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        drop(c);
        let (_server, peer) = listener.accept().unwrap();
        assert!(
            matches!(client(peer, local), Client::Gone(ref why) if why.contains("no longer held")),
            "{:?}",
            client(peer, local)
        );
        // Wrote its request and reset the connection: its socket is gone at once, the request
        // still readable on ours.
        let c = TcpStream::connect(local).unwrap();
        (&c).write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt on an open socket with a linger of the right size.
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&c),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as u32,
            );
        }
        drop(c);
        let (_server, peer) = listener.accept().unwrap();
        assert!(
            matches!(client(peer, local), Client::Gone(ref why) if why.contains("reset")),
            "{:?}",
            client(peer, local)
        );
    }

    #[test]
    fn a_peer_the_kernel_does_not_know_is_remote_only_if_our_end_is_connected() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        // No such connection at all: our end is not connected either.
        let nobody: SocketAddr = "203.0.113.9:5000".parse().unwrap();
        assert!(matches!(client(nobody, local), Client::Gone(_)));
    }
}
