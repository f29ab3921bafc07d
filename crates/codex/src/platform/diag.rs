//! The kernel's socket diagnostics (`NETLINK_SOCK_DIAG`): one TCP socket looked up by its
//! addresses (its state, the user that made it, its inode), and the names and users of the
//! abstract Unix sockets of this network namespace. Replies are taken only from the kernel.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_NOCOOKIE: u32 = !0;
/// `UDIAG_SHOW_NAME | UDIAG_SHOW_UID` (linux/unix_diag.h).
const UDIAG_SHOW_NAME_UID: u32 = 0x01 | 0x40;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_UID: u16 = 7;

/// TCP states (include/net/tcp_states.h) the callers tell apart.
pub const TCP_ESTABLISHED: u8 = 1;
pub const TCP_LISTEN: u8 = 10;

// The kernel's structures (linux/inet_diag.h, linux/unix_diag.h, linux/sock_diag.h).
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

#[repr(C)]
#[derive(Clone, Copy)]
struct UnixDiagReq {
    family: u8,
    protocol: u8,
    pad: u16,
    states: u32,
    ino: u32,
    show: u32,
    cookie: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct UnixDiagMsg {
    family: u8,
    kind: u8,
    state: u8,
    pad: u8,
    ino: u32,
    cookie: [u32; 2],
}

/// One TCP socket as the kernel describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSocket {
    /// Its own address and the address it is connected to (unspecified for a listener).
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub state: u8,
    /// The user whose process made it (root for one no process holds any more).
    pub uid: u32,
    /// Its inode, as `/proc/<pid>/fd` links show it (`socket:[N]`); 0 once no process holds
    /// it (closed, in `TIME_WAIT`).
    pub inode: u64,
}

/// The address as one family sees it: IPv4-mapped IPv6 addresses as IPv4.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// The TCP socket of this network namespace whose own address is `src` and whose other end is
/// `dst` (an IPv6 socket connected to an IPv4-mapped address is found by the IPv4 addresses).
/// `None` when the kernel knows none. The kernel falls back to a listener on `src` when no
/// connected socket matches: callers compare [`TcpSocket::dst`] and the state.
pub fn tcp_socket(src: SocketAddr, dst: SocketAddr) -> io::Result<Option<TcpSocket>> {
    let (s, d) = (canonical(src.ip()), canonical(dst.ip()));
    let mut id = InetDiagSockId {
        sport: src.port().to_be_bytes(),
        dport: dst.port().to_be_bytes(),
        cookie: [INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE],
        ..Default::default()
    };
    let family = match (s, d) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            id.src[..4].copy_from_slice(&s.octets());
            id.dst[..4].copy_from_slice(&d.octets());
            libc::AF_INET
        }
        (s, d) => {
            id.src = v6(s).octets();
            id.dst = v6(d).octets();
            libc::AF_INET6
        }
    };
    let body = InetDiagReqV2 {
        family: family as u8,
        protocol: libc::IPPROTO_TCP as u8,
        ext: 0,
        pad: 0,
        states: !0,
        id,
    };
    let mut found = None;
    let known = exchange(bytes_of(&body), false, |reply| {
        if reply.len() >= std::mem::size_of::<InetDiagMsg>() {
            // SAFETY: checked to hold a whole message; read unaligned.
            let msg: InetDiagMsg = unsafe { std::ptr::read_unaligned(reply.as_ptr().cast()) };
            found = Some(tcp_from(&msg));
        }
    })?;
    Ok(if known { found } else { None })
}

fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

fn tcp_from(msg: &InetDiagMsg) -> TcpSocket {
    let addr = |bytes: &[u8; 16], port: [u8; 2]| -> SocketAddr {
        let ip = if i32::from(msg.family) == libc::AF_INET {
            IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]))
        } else {
            canonical(IpAddr::V6(Ipv6Addr::from(*bytes)))
        };
        SocketAddr::new(ip, u16::from_be_bytes(port))
    };
    TcpSocket {
        src: addr(&msg.id.src, msg.id.sport),
        dst: addr(&msg.id.dst, msg.id.dport),
        state: msg.state,
        uid: msg.uid,
        inode: u64::from(msg.inode),
    }
}

/// The abstract Unix socket names of this network namespace (without the leading NUL) that
/// start with `prefix`, each with the user whose process bound it.
pub fn abstract_unix_names(prefix: &str) -> io::Result<Vec<(String, u32)>> {
    let body = UnixDiagReq {
        family: libc::AF_UNIX as u8,
        protocol: 0,
        pad: 0,
        states: !0,
        ino: 0,
        show: UDIAG_SHOW_NAME_UID,
        cookie: [INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE],
    };
    let mut out = Vec::new();
    exchange(bytes_of(&body), true, |reply| {
        let mut name = None;
        let mut uid = None;
        for (kind, value) in attributes(reply.get(std::mem::size_of::<UnixDiagMsg>()..)) {
            match kind {
                UNIX_DIAG_NAME => name = value.strip_prefix(b"\0").map(<[u8]>::to_vec),
                UNIX_DIAG_UID if value.len() >= 4 => {
                    uid = Some(u32::from_ne_bytes([value[0], value[1], value[2], value[3]]))
                }
                _ => {}
            }
        }
        if let (Some(name), Some(uid)) = (name, uid)
            && let Ok(name) = String::from_utf8(name)
            && name.starts_with(prefix)
        {
            out.push((name, uid));
        }
    })?;
    Ok(out)
}

/// The `rtattr` attributes after a message's fixed part: `(type, value)`.
fn attributes(rest: Option<&[u8]>) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut rest = rest.unwrap_or_default();
    while rest.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([rest[0], rest[1]]));
        let kind = u16::from_ne_bytes([rest[2], rest[3]]);
        if len < 4 || len > rest.len() {
            break;
        }
        out.push((kind, &rest[4..len]));
        rest = &rest[align4(len).min(rest.len())..];
    }
    out
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn bytes_of<T: Copy>(value: &T) -> &[u8] {
    // SAFETY: `T` is a plain repr(C) value without padding the kernel would misread; viewed as
    // its own bytes for its own lifetime.
    unsafe { std::slice::from_raw_parts((value as *const T).cast(), std::mem::size_of::<T>()) }
}

/// Sends `body` as one `SOCK_DIAG_BY_FAMILY` request (a dump if `dump`) on a fresh socket and
/// gives each reply's payload to `each`. `Ok(false)`: the kernel knows no such socket.
fn exchange(body: &[u8], dump: bool, mut each: impl FnMut(&[u8])) -> io::Result<bool> {
    let header_len = std::mem::size_of::<libc::nlmsghdr>();
    let mut flags = libc::NLM_F_REQUEST as u16;
    if dump {
        flags |= libc::NLM_F_DUMP as u16;
    }
    let header = libc::nlmsghdr {
        nlmsg_len: (header_len + body.len()) as u32,
        nlmsg_type: SOCK_DIAG_BY_FAMILY,
        nlmsg_flags: flags,
        nlmsg_seq: 1,
        nlmsg_pid: 0,
    };
    let mut request = bytes_of(&header).to_vec();
    request.extend_from_slice(body);
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
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a zeroed sockaddr_nl addresses the kernel (pid 0).
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: sending the request's bytes to the kernel's address, both of the lengths given.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: as above; the sender's address is written into `from`.
        let mut from: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        let mut from_len = std::mem::size_of::<libc::sockaddr_nl>() as u32;
        // SAFETY: receiving into a buffer of the length given, the sender into `from`.
        let got = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut from as *mut libc::sockaddr_nl).cast(),
                &mut from_len,
            )
        };
        if got < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // Only the kernel's word counts.
        if from.nl_pid != 0 {
            continue;
        }
        let mut rest = &buf[..got as usize];
        while rest.len() >= header_len {
            // SAFETY: at least a header's worth of bytes; read unaligned.
            let h: libc::nlmsghdr = unsafe { std::ptr::read_unaligned(rest.as_ptr().cast()) };
            let len = h.nlmsg_len as usize;
            if len < header_len || len > rest.len() {
                return Err(io::Error::other("malformed netlink reply"));
            }
            let payload = &rest[header_len..len];
            rest = &rest[align4(len).min(rest.len())..];
            if h.nlmsg_seq != 1 {
                continue;
            }
            match h.nlmsg_type {
                t if t == libc::NLMSG_DONE as u16 => return Ok(true),
                t if t == libc::NLMSG_ERROR as u16 => {
                    let code = payload
                        .get(..4)
                        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                        .unwrap_or(0);
                    return match code {
                        0 => Ok(true),
                        c if c == -libc::ENOENT => Ok(false),
                        c => Err(io::Error::from_raw_os_error(-c)),
                    };
                }
                SOCK_DIAG_BY_FAMILY => {
                    each(payload);
                    if !dump {
                        return Ok(true);
                    }
                }
                other => {
                    return Err(io::Error::other(format!(
                        "unexpected netlink reply type {other}"
                    )));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn both_ends_of_a_loopback_connection_are_found_with_their_state_and_user() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let client = TcpStream::connect(local).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        let found = tcp_socket(peer, local)
            .unwrap()
            .expect("the client's socket");
        assert_eq!((found.src, found.dst), (peer, local));
        assert_eq!(found.state, TCP_ESTABLISHED);
        // SAFETY: geteuid has no preconditions.
        assert_eq!(found.uid, unsafe { libc::geteuid() });
        assert!(found.inode != 0);
        let ours = tcp_socket(local, peer)
            .unwrap()
            .expect("the server's socket");
        assert_eq!(
            (ours.src, ours.dst, ours.state),
            (local, peer, TCP_ESTABLISHED)
        );
        drop(client);
        // No such connection: at most the listener, never a connected socket.
        let nobody: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let miss = tcp_socket(nobody, local).unwrap();
        assert!(miss.as_ref().is_none_or(|s| s.dst != local), "{miss:?}");
        let listener_itself = tcp_socket(local, nobody).unwrap().expect("the listener");
        assert_eq!(listener_itself.state, TCP_LISTEN);
    }

    #[test]
    fn a_dual_stack_client_is_found_by_its_ipv4_addresses() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        // An IPv6 socket connecting to the IPv4-mapped address of an IPv4 listener.
        let mapped: SocketAddr = format!("[::ffff:127.0.0.1]:{}", local.port())
            .parse()
            .unwrap();
        let Ok(_client) = TcpStream::connect(mapped) else {
            return codex_relay_testkit::skip::skip("no IPv6 on this machine");
        };
        let (_server, peer) = listener.accept().unwrap();
        let found = tcp_socket(peer, local)
            .unwrap()
            .expect("the client's socket");
        assert_eq!((found.src, found.dst), (peer, local));
        assert!(found.inode != 0);
    }

    #[test]
    fn abstract_names_are_listed_with_their_user() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("codex-relay-diag-test.{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let _bound = std::os::unix::net::UnixDatagram::bind_addr(&addr).unwrap();
        let names = abstract_unix_names("codex-relay-diag-test.").unwrap();
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        assert!(names.contains(&(name.clone(), me)), "{names:?}");
        drop(_bound);
        let names = abstract_unix_names(&name).unwrap();
        assert!(names.is_empty(), "{names:?}");
    }

    #[test]
    fn attributes_stop_at_a_malformed_length() {
        let mut bytes = vec![8, 0, 7, 0, 1, 2, 3, 4];
        bytes.extend([200, 0, 0, 0, 9]);
        assert_eq!(attributes(Some(&bytes)), vec![(7, &[1u8, 2, 3, 4][..])]);
        assert!(attributes(None).is_empty());
    }
}
