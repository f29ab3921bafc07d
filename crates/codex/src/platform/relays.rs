//! Every relay on this machine, so that each can refuse the others' sessions: a relay process
//! (one whose every child is Codex's or the relay's own helper: the codex-relay binary, not an
//! application that embeds the library and starts other programs too) announces itself by
//! binding an abstract Unix socket named after its pid and start time; what descends from it
//! counts as a session's. The kernel lists those names with the user who bound them; nothing on disk, so
//! a command Codex runs cannot delete an entry (only the process that bound it, by exiting,
//! removes it), and a name it binds itself only makes more processes count as relays, which
//! refuses more, never less. Names are per network namespace: a relay in another one is
//! another machine.

use std::sync::OnceLock;

use super::tree::Proc;

/// What every announced name starts with.
const PREFIX: &str = "codex-relay.v1.";

/// Announces this process as a relay, once; later calls do nothing. A failure is logged: the
/// other relays then do not know this one (its own check is unaffected).
pub fn announce() {
    static BOUND: OnceLock<Option<std::os::unix::net::UnixDatagram>> = OnceLock::new();
    BOUND.get_or_init(|| {
        use std::os::linux::net::SocketAddrExt;
        let me = super::tree::own();
        // A random part: nobody can take the name before us, so it cannot be freed later by
        // whoever took it.
        let name = format!("{PREFIX}{}.{}.{}", me.0, me.1, super::tree::new_marker());
        let bound = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|addr| std::os::unix::net::UnixDatagram::bind_addr(&addr));
        match bound {
            Ok(socket) => Some(socket),
            Err(e) => {
                tracing::warn!(
                    "could not announce this relay to the others on this machine (their peer checks will not know its sessions): {e}"
                );
                None
            }
        }
    });
}

/// The relays of this user announced on this machine (this process among them if it
/// announced itself), as `(pid, start time)`. An error leaves the list empty (logged).
pub fn list() -> Vec<Proc> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    match super::diag::abstract_unix_names(PREFIX) {
        Ok(names) => names
            .into_iter()
            .filter(|(_, uid)| *uid == me)
            .filter_map(|(name, _)| parse(&name))
            .collect(),
        Err(e) => {
            tracing::warn!("listing the relays on this machine: {e}");
            Vec::new()
        }
    }
}

fn parse(name: &str) -> Option<Proc> {
    let mut parts = name.strip_prefix(PREFIX)?.split('.');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    Some((pid, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announced_relay_is_listed_with_its_start_time() {
        announce();
        announce();
        let me = crate::platform::tree::own();
        let listed = list();
        assert_eq!(listed.iter().filter(|p| **p == me).count(), 1, "{listed:?}");
    }

    #[test]
    fn names_are_parsed_strictly() {
        assert_eq!(parse("codex-relay.v1.42.1234.abcd"), Some((42, 1234)));
        assert_eq!(parse("codex-relay.v1.42"), None);
        assert_eq!(parse("codex-relay.v1.x.1.a"), None);
        assert_eq!(parse("other.v1.42.1234.a"), None);
    }
}
