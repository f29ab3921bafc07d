//! The machine's own addresses beyond loopback (what a local process may bind its end of a
//! connection to, so that a peer looks remote to anyone comparing addresses).

use std::net::IpAddr;

/// Every address of this machine's interfaces that is not loopback, link-local or
/// unspecified (IPv4 first). Empty where it has none (then a test needing one skips loudly).
pub fn own_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates the list, walked read-only here and freed once below.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return out;
        }
        let mut cur = list;
        while !cur.is_null() {
            let addr = (*cur).ifa_addr;
            if !addr.is_null() {
                match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(addr as *const libc::sockaddr_in);
                        out.push(IpAddr::from(
                            u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                        ));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(addr as *const libc::sockaddr_in6);
                        out.push(IpAddr::from(sin6.sin6_addr.s6_addr));
                    }
                    _ => {}
                }
            }
            cur = (*cur).ifa_next;
        }
        libc::freeifaddrs(list);
    }
    out.retain(|ip| {
        !ip.is_loopback()
            && !ip.is_unspecified()
            && match ip {
                IpAddr::V4(v4) => !v4.is_link_local(),
                IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) != 0xfe80,
            }
    });
    out.sort_by_key(|ip| ip.is_ipv6());
    out.dedup();
    out
}
