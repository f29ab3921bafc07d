//! Unit tests of the peer check over real sockets and processes: who holds a socket, where
//! its holder comes from, and every way a socket can be out of sight.

use super::*;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn relays_none() -> Relays {
    Relays {
        me: (0, 0),
        others: Vec::new(),
        daemons: Vec::new(),
    }
}

fn relays_me() -> Relays {
    Relays {
        me: tree::own(),
        others: Vec::new(),
        daemons: Vec::new(),
    }
}

/// `bash` connects to `port` and becomes `sleep 30` holding the socket (behind `prefix`, a
/// command that runs it, if given). Returns the child and the accepted connection's ends.
fn holder(
    listener: &TcpListener,
    prefix: &[&str],
) -> (Child, (std::net::SocketAddr, std::net::SocketAddr)) {
    let port = listener.local_addr().unwrap().port();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port}; exec sleep 30");
    let mut argv: Vec<&str> = prefix.to_vec();
    argv.extend(["bash", "-c", &script]);
    let child = Command::new(argv[0]).args(&argv[1..]).spawn().unwrap();
    let (server, peer) = listener.accept().unwrap();
    let local = server.local_addr().unwrap();
    std::mem::forget(server);
    (child, (peer, local))
}

/// Checks `conn` until `done` holds (the holder's `exec` may not have shown yet), bounded.
fn owner_until(
    relays: &Relays,
    conn: (std::net::SocketAddr, std::net::SocketAddr),
    done: impl Fn(&PeerOwner) -> bool,
) -> PeerOwner {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut wait = Duration::from_millis(10);
    loop {
        let owner = owners_among(relays, &[conn]).remove(0);
        if done(&owner) || Instant::now() > deadline {
            return owner;
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_millis(200));
    }
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_childs_connection_is_inside_and_our_own_is_outside() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let local = listener.local_addr().unwrap();
    let own = TcpStream::connect(local).unwrap();
    let (_, peer) = listener.accept().unwrap();
    // This process holds it: its own parents are no relay.
    let found = owners_among(&relays_me(), &[(peer, local)]);
    assert!(
        matches!(&found[0], PeerOwner::Outside { pid, .. } if *pid == std::process::id()),
        "{found:?}"
    );
    let (child, conn) = holder(&listener, &[]);
    let found = owner_until(
        &relays_me(),
        conn,
        |o| matches!(o, PeerOwner::Inside { command, .. } if command == "sleep 30"),
    );
    assert!(
        matches!(&found, PeerOwner::Inside { pid, command, why }
            if *pid == child.id() && command == "sleep 30" && why.contains("this relay")),
        "{found:?}"
    );
    assert!(!found.allowed());
    // Nobody's a relay: the same child is outside.
    assert!(matches!(
        owners_among(&relays_none(), &[conn]).remove(0),
        PeerOwner::Outside { .. }
    ));
    stop(child);
    // Its socket is closed now: nobody holds it.
    let found = owners_among(&relays_me(), &[conn]).remove(0);
    assert!(matches!(found, PeerOwner::Unchecked(_)), "{found:?}");
    drop(own);
}

#[test]
fn a_descendant_of_an_attached_codex_daemon_is_inside() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // The daemon: this process, as a relay attached to it would record it.
    let (child, conn) = holder(&listener, &[]);
    let attached = Relays {
        me: (0, 0),
        others: Vec::new(),
        daemons: vec![tree::own()],
    };
    let found = owner_until(&attached, conn, |o| matches!(o, PeerOwner::Inside { .. }));
    assert!(
        matches!(&found, PeerOwner::Inside { why, .. } if why.contains("the Codex daemon this relay is attached to")),
        "{found:?}"
    );
    // Not attached: the same process is outside.
    let found = owner_until(&relays_none(), conn, |o| {
        !matches!(o, PeerOwner::Unchecked(_))
    });
    assert!(matches!(found, PeerOwner::Outside { .. }), "{found:?}");
    stop(child);
}

#[test]
fn a_descendant_of_another_relay_or_of_a_marked_process_is_inside() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // Another relay: this process, announced.
    let (child, conn) = holder(&listener, &[]);
    let another = Relays {
        me: (0, 0),
        others: vec![tree::own()],
        daemons: Vec::new(),
    };
    let found = owner_until(&another, conn, |o| matches!(o, PeerOwner::Inside { .. }));
    assert!(
        matches!(&found, PeerOwner::Inside { why, .. } if why.contains("another codex-relay")),
        "{found:?}"
    );
    stop(child);
    // A marked parent (a Codex tree's process), with no relay known at all: `env` becomes the
    // marked bash, whose child holds the socket.
    let port = listener.local_addr().unwrap().port();
    let script = format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; exec sleep 30' & wait");
    let child = Command::new("env")
        .args([&format!("{MARKER_VAR}=test"), "bash", "-c", &script])
        .spawn()
        .unwrap();
    let (server, peer) = listener.accept().unwrap();
    let conn = (peer, server.local_addr().unwrap());
    let found = owner_until(&relays_none(), conn, |o| {
        matches!(o, PeerOwner::Inside { .. })
    });
    assert!(
        matches!(&found, PeerOwner::Inside { why, .. } if why.contains("Codex tree")),
        "{found:?}"
    );
    // The sleep first (killing bash alone would leave it for its 30 s).
    tree::kill_all(&tree::descendants(child.id()));
    stop(child);
}

#[test]
fn a_socket_in_flight_is_held_by_nobody_and_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let local = listener.local_addr().unwrap();
    let client = TcpStream::connect(local).unwrap();
    let (_server, peer) = listener.accept().unwrap();
    // Pass it to ourselves over a socketpair and close it: only the message holds it now.
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    send_fd(&a, client.as_raw_fd());
    drop(client);
    let found = owners_among(&relays_me(), &[(peer, local)]).remove(0);
    assert!(
        matches!(&found, PeerOwner::Unchecked(why) if why.contains("in flight")),
        "{found:?}"
    );
    drop((a, b));
}

fn send_fd(via: &std::os::unix::net::UnixStream, fd: i32) {
    // SAFETY: a one-byte message with one SCM_RIGHTS descriptor, in buffers of the sizes given.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let space = libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as usize;
        let mut control = vec![0u8; space];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), fd);
        assert!(libc::sendmsg(via.as_raw_fd(), &msg, 0) >= 0);
    }
}

#[test]
fn a_socket_hopping_along_a_fork_chain_is_never_outside() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Each process forks and exits at once, the child carrying the socket on; the chain runs
    // under a subreaper child of ours (as commands run under Codex), so each hop is re-parented
    // to it. It ends when we close our end (or after a minute at most), so no hop outlives
    // the test.
    let chain = format!(
        "import os, socket, time\n\
         s = socket.create_connection(('127.0.0.1', {port}))\n\
         s.setblocking(False)\n\
         end = time.time() + 60\n\
         while time.time() < end:\n    \
             try:\n        \
                 if s.recv(1) == b'':\n            os._exit(0)\n    \
             except BlockingIOError:\n        pass\n    \
             if os.fork():\n        os._exit(0)\n"
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "python3 -c \"$0\" & exec sleep 8", &chain]);
    // SAFETY: prctl on the child only, before exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    let (server, peer) = listener.accept().unwrap();
    let conn = (peer, server.local_addr().unwrap());
    let mut seen = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let found = owners_among(&relays_me(), &[conn]).remove(0);
        assert!(!found.allowed(), "the hopping socket passed: {found:?}");
        *seen.entry(std::mem::discriminant(&found)).or_insert(0u32) += 1;
    }
    eprintln!("verdicts while hopping: {seen:?}");
    // Our end says it is done; the chain's last hop sees that and exits, which closes the
    // socket: reading it to its end waits for exactly that.
    let mut server = server;
    server.shutdown(std::net::Shutdown::Write).unwrap();
    server
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut server, &mut rest).expect("the chain closes its end");
    stop(child);
}

#[test]
fn another_users_socket_is_not_searched() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return codex_relay_testkit::skip::skip(
            "a socket of another user needs root to make (the suite runs as root in CI)",
        );
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (child, conn) = holder(
        &listener,
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ],
    );
    let found = owners_among(&relays_me(), &[conn]).remove(0);
    assert_eq!(found, PeerOwner::OtherUser { uid: 65534 });
    stop(child);
}
