//! A minimal Server-Sent Events reader over a raw TCP stream (HTTP/1.1 chunked), shared by the
//! SSE benches: cheap enough that the readers' own cost is not what is measured.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
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

/// What one subscriber saw: envelopes, gaps, repeats/reorders, the latency (ns) of each agent
/// text `t=<unix nanos>` (from the fake app-server writing it), and from the log (ns, from
/// the envelope's `time`, when it was logged: whole milliseconds, so up to 1 ms more).
#[derive(Default)]
pub struct Seen {
    pub envelopes: u64,
    pub missing: u64,
    pub disorder: u64,
    pub latencies: Vec<u64>,
    pub from_log: Vec<u64>,
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Opens `GET /api/sessions/{id}/stream` and reads the response head.
pub async fn connect(addr: &str, id: &str) -> BufReader<TcpStream> {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "GET /api/sessions/{id}/stream HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut r = BufReader::new(s);
    read_head(&mut r).await;
    r
}

/// Reads envelopes until `texts` agent texts arrived (or the stream ends).
pub async fn read_envelopes(r: &mut BufReader<TcpStream>, texts: usize) -> Seen {
    let mut seen = Seen::default();
    let mut last = 0u64;
    let mut buf = Vec::new();
    while seen.latencies.len() < texts {
        if !read_chunk(r, &mut buf).await {
            break;
        }
        while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = buf.drain(..end + 2).collect();
            let block = String::from_utf8_lossy(&block);
            if !block.starts_with("event: envelope") {
                continue;
            }
            let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            // Cheap field scans, not a JSON parse: the subscribers share the machine with the
            // relay, and their own cost should not be what is measured.
            let seq = number_after(data, "\"seq\":").unwrap_or(0) as u64;
            seen.envelopes += 1;
            if seq == last + 1 {
                last = seq;
            } else if seq > last + 1 {
                seen.missing += seq - last - 1;
                last = seq;
            } else {
                seen.disorder += 1;
            }
            if data.contains("\"t\":\"text\"")
                && let Some(t) = number_after(data, "\"text\":\"t=")
            {
                let now = now_ns();
                seen.latencies.push(now.saturating_sub(t) as u64);
                if let Some(logged) = number_after(data, "\"time\":") {
                    seen.from_log
                        .push(now.saturating_sub(logged * 1_000_000) as u64);
                }
            }
        }
    }
    seen
}
