//! A small HTTP/1.1 client for the fault-injection run: one connection per request, every
//! request bounded (an instance may be paused or dead: no answer is an outcome, not a hang),
//! and Server-Sent Events streams read event by event.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// A whole answer.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The error code of an error answer (`error.code`).
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

fn head(method: &str, path: &str, addr: &str, token: &str, body: &[u8], extra: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    )
}

async fn read_head<R: AsyncBufReadExt + Unpin>(r: &mut R) -> Option<(u16, bool)> {
    let mut line = String::new();
    r.read_line(&mut line).await.ok()?;
    let status = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut chunked = false;
    loop {
        line.clear();
        if r.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let l = line.trim_end();
        if l.is_empty() {
            return Some((status, chunked));
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("transfer-encoding")
            && v.trim().eq_ignore_ascii_case("chunked")
        {
            chunked = true;
        }
    }
}

async fn read_chunk<R: AsyncBufReadExt + Unpin>(r: &mut R) -> Option<Vec<u8>> {
    let mut line = String::new();
    if r.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let size = usize::from_str_radix(line.trim(), 16).ok()?;
    if size == 0 {
        return None;
    }
    let mut buf = vec![0; size + 2];
    r.read_exact(&mut buf).await.ok()?;
    buf.truncate(size);
    Some(buf)
}

/// `method path` with a JSON body to `addr` (`127.0.0.1:PORT`); `None` when no answer came
/// within `wait` (refused, reset, paused).
pub async fn request(
    addr: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    wait: Duration,
) -> Option<Resp> {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(head(method, path, addr, token, body.as_bytes(), "").as_bytes())
            .await
            .ok()?;
        stream.write_all(body.as_bytes()).await.ok()?;
        let mut r = BufReader::new(stream);
        let (status, chunked) = read_head(&mut r).await?;
        let mut out = Vec::new();
        if chunked {
            while let Some(c) = read_chunk(&mut r).await {
                out.extend(c);
            }
        } else {
            let _ = r.read_to_end(&mut out).await;
        }
        Some(Resp {
            status,
            body: String::from_utf8_lossy(&out).into_owned(),
        })
    };
    tokio::time::timeout(wait, exchange).await.ok().flatten()
}

/// One Server-Sent Event.
#[derive(Debug, Clone)]
pub struct Event {
    pub event: String,
    pub id: Option<String>,
    pub data: String,
}

/// An open event stream.
pub struct Sse {
    r: BufReader<TcpStream>,
    text: String,
}

impl Sse {
    /// Opens `path` on `addr` (resuming after `last` when given); `None` unless it answers 200.
    pub async fn open(
        addr: &str,
        token: &str,
        path: &str,
        last: Option<u64>,
        wait: Duration,
    ) -> Option<Sse> {
        let extra = last
            .map(|l| format!("Last-Event-ID: {l}\r\nAccept: text/event-stream\r\n"))
            .unwrap_or_else(|| "Accept: text/event-stream\r\n".into());
        let open = async {
            let mut stream = TcpStream::connect(addr).await.ok()?;
            stream
                .write_all(head("GET", path, addr, token, b"", &extra).as_bytes())
                .await
                .ok()?;
            let mut r = BufReader::new(stream);
            let (status, _) = read_head(&mut r).await?;
            (status == 200).then_some(Sse {
                r,
                text: String::new(),
            })
        };
        tokio::time::timeout(wait, open).await.ok().flatten()
    }

    /// The next event; `None` when the stream ended or nothing came within `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            while let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let mut ev = Event {
                    event: "message".into(),
                    id: None,
                    data: String::new(),
                };
                let mut fields = 0;
                for line in block.lines() {
                    let (k, v) = line.split_once(':').unwrap_or((line, ""));
                    let v = v.strip_prefix(' ').unwrap_or(v);
                    match k {
                        "" => continue,
                        "event" => ev.event = v.to_owned(),
                        "id" => ev.id = Some(v.to_owned()),
                        "data" => {
                            if !ev.data.is_empty() {
                                ev.data.push('\n');
                            }
                            ev.data.push_str(v);
                        }
                        _ => {}
                    }
                    fields += 1;
                }
                if fields > 0 {
                    return Some(ev);
                }
            }
            let chunk = tokio::time::timeout_at(deadline, read_chunk(&mut self.r))
                .await
                .ok()??;
            self.text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}
