//! Whether a Codex daemon's socket may be trusted: the app-server's control socket has no
//! authentication (whoever connects drives Codex as its user), so the relay attaches only to a
//! Unix socket owned by its own user, inside a directory only that user can enter, reached
//! through directories nobody else can swap; and, once connected, only when the kernel says
//! the process at the other end runs as that user too ([`peer_of`]).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Why a socket was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SocketRefused {
    #[error("{path}: {error}")]
    Unreadable { path: PathBuf, error: String },
    #[error("{path} is not a Unix socket")]
    NotASocket { path: PathBuf },
    #[error(
        "{path} belongs to uid {owner}, not to this user (uid {me}): another user's daemon would run what the relay asks as that user"
    )]
    OtherOwner { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "{dir} (where the socket is) has mode {mode:04o}: other users can enter it; it must be 0700 (only its owner may enter)"
    )]
    OpenDirectory { dir: PathBuf, mode: u32 },
    #[error("{dir} (where the socket is) belongs to uid {owner}, not to this user (uid {me})")]
    DirectoryOtherOwner { dir: PathBuf, owner: u32, me: u32 },
    #[error(
        "{dir}, on the way to the socket, can be changed by other users (mode {mode:04o}, owner uid {owner}): they could put another socket in its place"
    )]
    SwappableAncestor { dir: PathBuf, mode: u32, owner: u32 },
    #[error("the process serving the socket runs as uid {uid}, not as this user (uid {me})")]
    PeerOtherUser { uid: u32, me: u32 },
}

/// The socket `path` leads to (symbolic links followed), when it may be trusted: a Unix socket
/// of this user, in a directory of this user that nobody else may enter (no permission bits
/// for group or others), whose ancestors only this user or root can change (or are sticky,
/// like `/tmp`). The checks are on the resolved path, which the caller connects to.
pub fn check(path: &Path) -> Result<PathBuf, SocketRefused> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let unreadable = |path: &Path, e: std::io::Error| SocketRefused::Unreadable {
        path: path.to_owned(),
        error: e.to_string(),
    };
    let real = std::fs::canonicalize(path).map_err(|e| unreadable(path, e))?;
    let meta = std::fs::metadata(&real).map_err(|e| unreadable(&real, e))?;
    if !meta.file_type().is_socket() {
        return Err(SocketRefused::NotASocket { path: real });
    }
    if meta.uid() != me {
        return Err(SocketRefused::OtherOwner {
            path: real,
            owner: meta.uid(),
            me,
        });
    }
    let dir = real.parent().unwrap_or(Path::new("/")).to_owned();
    let dmeta = std::fs::metadata(&dir).map_err(|e| unreadable(&dir, e))?;
    if dmeta.uid() != me {
        return Err(SocketRefused::DirectoryOtherOwner {
            dir,
            owner: dmeta.uid(),
            me,
        });
    }
    let mode = dmeta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SocketRefused::OpenDirectory { dir, mode });
    }
    for ancestor in dir.ancestors().skip(1) {
        let m = std::fs::metadata(ancestor).map_err(|e| unreadable(ancestor, e))?;
        let mode = m.mode() & 0o7777;
        let owned = m.uid() == me || m.uid() == 0;
        let others_write = mode & 0o022 != 0;
        let sticky = mode & 0o1000 != 0;
        if !owned || (others_write && !sticky) {
            return Err(SocketRefused::SwappableAncestor {
                dir: ancestor.to_owned(),
                mode,
                owner: m.uid(),
            });
        }
    }
    Ok(real)
}

/// The process at the other end of a connected Unix socket, as the kernel recorded it when
/// the connection was made (`SO_PEERCRED`): `(pid, uid)`.
pub fn peer_credentials(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<(u32, u32)> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid descriptor, and a buffer of the size given.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((cred.pid as u32, cred.uid))
}

/// The serving process's pid, when it runs as this user; refused otherwise.
pub fn peer_of(fd: std::os::fd::BorrowedFd<'_>) -> Result<u32, SocketRefused> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let (pid, uid) = peer_credentials(fd).map_err(|e| SocketRefused::Unreadable {
        path: PathBuf::from("<connected socket>"),
        error: e.to_string(),
    })?;
    if uid != me {
        return Err(SocketRefused::PeerOtherUser { uid, me });
    }
    Ok(pid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn private_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn a_socket_of_this_user_in_a_private_directory_passes_through_a_symlink() {
        let dir = private_dir();
        let sock = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let link_dir = tempfile::tempdir().unwrap();
        let link = link_dir.path().join("link.sock");
        std::os::unix::fs::symlink(&sock, &link).unwrap();
        assert_eq!(check(&link).unwrap(), std::fs::canonicalize(&sock).unwrap());
    }

    #[test]
    fn a_directory_others_can_enter_is_refused_with_the_reason() {
        let dir = private_dir();
        let sock = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        for mode in [0o711, 0o701, 0o750, 0o755] {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
            let err = check(&sock).unwrap_err();
            assert!(
                matches!(err, SocketRefused::OpenDirectory { mode: m, .. } if m == mode),
                "{mode:o}: {err}"
            );
            assert!(
                err.to_string().contains("other users can enter it"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_file_that_is_not_a_socket_is_refused() {
        let dir = private_dir();
        let file = dir.path().join("s.sock");
        std::fs::write(&file, b"").unwrap();
        assert!(matches!(
            check(&file),
            Err(SocketRefused::NotASocket { .. })
        ));
        assert!(matches!(
            check(&dir.path().join("missing.sock")),
            Err(SocketRefused::Unreadable { .. })
        ));
    }

    #[test]
    fn another_users_socket_or_directory_is_refused() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            codex_relay_testkit::skip::skip(
                "another_users_socket_or_directory_is_refused: only root can give a socket to another user",
            );
            return;
        }
        let dir = private_dir();
        let sock = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::os::unix::fs::chown(&sock, Some(65534), None).unwrap();
        let err = check(&sock).unwrap_err();
        assert!(
            matches!(err, SocketRefused::OtherOwner { owner: 65534, .. }),
            "{err}"
        );
        std::os::unix::fs::chown(&sock, Some(0), None).unwrap();
        std::os::unix::fs::chown(dir.path(), Some(65534), None).unwrap();
        let err = check(&sock).unwrap_err();
        assert!(
            matches!(err, SocketRefused::DirectoryOtherOwner { owner: 65534, .. }),
            "{err}"
        );
    }

    #[test]
    fn peer_credentials_name_the_serving_process() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsFd;
        assert_eq!(peer_of(a.as_fd()).unwrap(), std::process::id());
    }
}
