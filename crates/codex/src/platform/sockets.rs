//! Which process is on the other end of a TCP connection from this machine: the kernel's
//! socket diagnostics (`NETLINK_SOCK_DIAG`) name the client socket's inode, and the open file
//! descriptors of a process tree say whether one of its processes holds it.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};

/// Who opened a connection, as far as this machine can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerOwner {
    /// The client is not on this machine (or not in this network namespace): nothing to look up.
    Remote,
    /// A local socket held by a process outside the tree.
    Outside,
    /// A local socket held by a process of the tree: its pid and command line.
    InTree { pid: u32, command: String },
    /// A local client whose socket is no longer held by anyone (it wrote its request and
    /// exited, or handed the socket away): its owner cannot be checked.
    Unknown(String),
}

/// Whether `peer` is on this machine, for a connection accepted on `local`.
pub fn is_local(peer: SocketAddr, local: SocketAddr) -> bool {
    let ip = canonical(peer.ip());
    ip.is_loopback() || ip == canonical(local.ip())
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// For each accepted connection `(peer, local)`, who holds the client's socket, checked
/// against the descendants of `root` (one pass over the tree for the whole batch). Blocking:
/// it reads `/proc`.
pub fn owners(root: u32, conns: &[(SocketAddr, SocketAddr)]) -> Vec<PeerOwner> {
    let mut sockets: Option<HashMap<u64, u32>> = None;
    conns
        .iter()
        .map(|&(peer, local)| {
            if !is_local(peer, local) {
                return PeerOwner::Remote;
            }
            let inode = match client_inode(peer, local) {
                Ok(Some(inode)) if inode != 0 => inode,
                Ok(_) => {
                    return PeerOwner::Unknown(format!(
                        "the socket of {peer} is no longer held by any process"
                    ));
                }
                Err(e) => return PeerOwner::Unknown(format!("socket lookup for {peer}: {e}")),
            };
            let held = sockets.get_or_insert_with(|| tree_sockets(root));
            match held.get(&inode) {
                Some(&pid) => PeerOwner::InTree {
                    pid,
                    command: command_line(pid),
                },
                None => PeerOwner::Outside,
            }
        })
        .collect()
}

/// Socket inodes held by `root`'s descendants (not `root` itself: it is the server), each with
/// one pid holding it.
fn tree_sockets(root: u32) -> HashMap<u64, u32> {
    let mut held = HashMap::new();
    for (pid, _) in super::tree::descendants(root) {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let inode = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok());
            if let Some(inode) = inode {
                held.entry(inode).or_insert(pid);
            }
        }
    }
    held
}

fn command_line(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .split('\0')
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

// The kernel's socket-diagnostics structures (linux/inet_diag.h, linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_NOCOOKIE: u32 = !0;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct InetDiagSockId {
    sport: [u8; 2],
    dport: [u8; 2],
    src: [u8; 16],
    dst: [u8; 16],
    interface: u32,
    cookie: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct InetDiagReqV2 {
    family: u8,
    protocol: u8,
    ext: u8,
    pad: u8,
    states: u32,
    id: InetDiagSockId,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Request {
    header: libc::nlmsghdr,
    body: InetDiagReqV2,
}

/// The fixed part of `struct inet_diag_msg`, up to the inode.
#[repr(C)]
#[derive(Clone, Copy)]
struct InetDiagMsg {
    family: u8,
    state: u8,
    timer: u8,
    retrans: u8,
    id: InetDiagSockId,
    expires: u32,
    rqueue: u32,
    wqueue: u32,
    uid: u32,
    inode: u32,
}

/// The inode of the client's socket of an established connection `peer → local` (`None` when
/// the kernel knows no such socket).
fn client_inode(peer: SocketAddr, local: SocketAddr) -> io::Result<Option<u64>> {
    let (peer_ip, local_ip) = (canonical(peer.ip()), canonical(local.ip()));
    let mut id = InetDiagSockId {
        // The client's socket: its own address is `peer`, its remote end is us.
        sport: peer.port().to_be_bytes(),
        dport: local.port().to_be_bytes(),
        cookie: [INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE],
        ..Default::default()
    };
    let family = match (peer_ip, local_ip) {
        (IpAddr::V4(p), IpAddr::V4(l)) => {
            id.src[..4].copy_from_slice(&p.octets());
            id.dst[..4].copy_from_slice(&l.octets());
            libc::AF_INET
        }
        (IpAddr::V6(p), IpAddr::V6(l)) => {
            id.src = p.octets();
            id.dst = l.octets();
            libc::AF_INET6
        }
        _ => return Ok(None),
    };
    let request = Request {
        header: libc::nlmsghdr {
            nlmsg_len: std::mem::size_of::<Request>() as u32,
            nlmsg_type: SOCK_DIAG_BY_FAMILY,
            nlmsg_flags: libc::NLM_F_REQUEST as u16,
            nlmsg_seq: 1,
            nlmsg_pid: 0,
        },
        body: InetDiagReqV2 {
            family: family as u8,
            protocol: libc::IPPROTO_TCP as u8,
            ext: 0,
            pad: 0,
            states: !0,
            id,
        },
    };
    // SAFETY: socket(2) with constant arguments; the descriptor is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    // SAFETY: `request` is a plain repr(C) value of the length given; the kernel reads it.
    let sent = unsafe {
        libc::send(
            raw,
            (&request as *const Request).cast(),
            std::mem::size_of::<Request>(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = [0u8; 4096];
    // SAFETY: receiving into a buffer of the length given.
    let got = unsafe { libc::recv(raw, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    parse_reply(&buf[..got as usize])
}

/// The inode in a reply: one `SOCK_DIAG_BY_FAMILY` message, or an error (`ENOENT`: no such
/// socket).
fn parse_reply(reply: &[u8]) -> io::Result<Option<u64>> {
    let header_len = std::mem::size_of::<libc::nlmsghdr>();
    if reply.len() < header_len {
        return Err(io::Error::other("short netlink reply"));
    }
    // SAFETY: at least a header's worth of bytes; read unaligned.
    let header: libc::nlmsghdr = unsafe { std::ptr::read_unaligned(reply.as_ptr().cast()) };
    let body = &reply[header_len..];
    if header.nlmsg_type == libc::NLMSG_ERROR as u16 {
        let code = body
            .get(..4)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(0);
        return if code == -libc::ENOENT {
            Ok(None)
        } else {
            Err(io::Error::from_raw_os_error(-code))
        };
    }
    if header.nlmsg_type != SOCK_DIAG_BY_FAMILY || body.len() < std::mem::size_of::<InetDiagMsg>() {
        return Err(io::Error::other(format!(
            "unexpected netlink reply type {}",
            header.nlmsg_type
        )));
    }
    // SAFETY: checked to hold a whole message; read unaligned.
    let msg: InetDiagMsg = unsafe { std::ptr::read_unaligned(body.as_ptr().cast()) };
    Ok(Some(u64::from(msg.inode)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_connection_from_a_child_is_told_from_one_of_our_own() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        // Ours: this process connects (it is the tree's root, which does not count).
        let own = TcpStream::connect(local).unwrap();
        let (_, peer) = listener.accept().unwrap();
        assert_eq!(
            owners(std::process::id(), &[(peer, local)]),
            vec![PeerOwner::Outside]
        );
        // A child's: bash connects through /dev/tcp, then becomes `sleep` holding the socket.
        let mut child = std::process::Command::new("bash")
            .args([
                "-c",
                &format!("exec 3<>/dev/tcp/127.0.0.1/{}; exec sleep 30", local.port()),
            ])
            .spawn()
            .unwrap();
        let (_, peer) = listener.accept().unwrap();
        // The connection is up before bash has exec'd `sleep`: until then the same pid is still
        // `bash -c ...`, so look again until the exec shows (bounded).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let found = loop {
            let found = owners(std::process::id(), &[(peer, local)]);
            let bash_yet = matches!(&found[0], PeerOwner::InTree { command, .. } if command.starts_with("bash "));
            if !bash_yet || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(
            matches!(&found[0], PeerOwner::InTree { pid, command } if *pid == child.id() && command == "sleep 30"),
            "{found:?}"
        );
        // Gone: the child is killed, its socket released.
        child.kill().unwrap();
        child.wait().unwrap();
        let found = owners(std::process::id(), &[(peer, local)]);
        assert!(matches!(found[0], PeerOwner::Unknown(_)), "{found:?}");
        drop(own);
    }

    #[test]
    fn remote_peers_are_not_looked_up() {
        let local: SocketAddr = "10.0.0.2:7878".parse().unwrap();
        let peer: SocketAddr = "10.0.0.9:5000".parse().unwrap();
        assert!(!is_local(peer, local));
        assert!(is_local("10.0.0.2:5000".parse().unwrap(), local));
        assert!(is_local("[::ffff:127.0.0.1]:5000".parse().unwrap(), local));
        assert_eq!(owners(1, &[(peer, local)]), vec![PeerOwner::Remote]);
    }
}
