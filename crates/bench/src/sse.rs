//! A minimal Server-Sent Events reader over a raw TCP stream (HTTP/1.1 chunked), shared by the
//! SSE benches: cheap enough that the readers' own cost is not what is measured.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::TcpStream;

/// Reads the response head up to the blank line.
pub async fn read_head(r: &mut BufReader<TcpStream>) {
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line).await.unwrap();
        if line.trim_end().is_empty() {
            return;
        }
    }
}

/// Appends the next chunk of a chunked body to `buf`; false at the end.
pub async fn read_chunk(r: &mut BufReader<TcpStream>, buf: &mut Vec<u8>) -> bool {
    let mut line = String::new();
    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
        return false;
    }
    let Ok(size) = usize::from_str_radix(line.trim(), 16) else {
        return false;
    };
    if size == 0 {
        return false;
    }
    let start = buf.len();
    buf.resize(start + size + 2, 0);
    r.read_exact(&mut buf[start..]).await.is_ok() && {
        buf.truncate(start + size);
        true
    }
}

/// The decimal number right after `key` in `s`.
pub fn number_after(s: &str, key: &str) -> Option<u128> {
    let rest = &s[s.find(key)? + key.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}
