//! A small HTTP/1.1 client for the HTTP front's tests (plain requests and Server-Sent Events
//! streams over one TCP connection each), so the tests see the bytes a browser would.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// A whole response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The client for one relay: `addr` is `127.0.0.1:PORT`; `headers` go with every request.
#[derive(Clone)]
pub struct Client {
    pub addr: String,
    pub headers: Vec<(String, String)>,
}

fn head(method: &str, path: &str, addr: &str, headers: &[(String, String)], body: &[u8]) -> String {
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("Connection: close\r\n\r\n");
    req
}

async fn read_head<R: AsyncBufReadExt + Unpin>(r: &mut R) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).await.expect("status line");
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).await.expect("header line");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    (status, headers)
}

fn chunked(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"))
}

/// Reads one chunk of a chunked body; `None` at the end.
async fn read_chunk<R: AsyncBufReadExt + Unpin>(r: &mut R) -> Option<Vec<u8>> {
    let mut line = String::new();
    if r.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let size = usize::from_str_radix(line.trim().split(';').next()?, 16).ok()?;
    if size == 0 {
        return None;
    }
    let mut buf = vec![0; size + 2];
    r.read_exact(&mut buf).await.ok()?;
    buf.truncate(size);
    Some(buf)
}

impl Client {
    /// A client that sends the tests' token (`serve` requires one by default).
    pub fn new(relay_url: &str) -> Self {
        Self::anonymous(relay_url).with_header(
            "Authorization",
            &format!("Bearer {}", codex_relay_testkit::RELAY_TEST_TOKEN),
        )
    }

    /// A client that sends no credentials.
    pub fn anonymous(relay_url: &str) -> Self {
        let addr = relay_url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        Self {
            addr,
            headers: Vec::new(),
        }
    }

    pub fn with_header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.to_owned(), v.to_owned()));
        self
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        extra: &[(&str, &str)],
        body: &[u8],
    ) -> Resp {
        let mut headers = self.headers.clone();
        headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut stream = TcpStream::connect(&self.addr).await.expect("connect");
        stream
            .write_all(head(method, path, &self.addr, &headers, body).as_bytes())
            .await
            .unwrap();
        // The server may answer (413) before reading a large body.
        let _ = stream.write_all(body).await;
        let mut r = BufReader::new(stream);
        let (status, headers) = read_head(&mut r).await;
        let mut body = Vec::new();
        if chunked(&headers) {
            while let Some(c) = read_chunk(&mut r).await {
                body.extend(c);
            }
        } else {
            let _ = r.read_to_end(&mut body).await;
        }
        Resp {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send("GET", path, &[], b"").await
    }

    /// POSTs `body` with `Transfer-Encoding: chunked` (no declared length), in 64 KiB chunks.
    pub async fn post_chunked(&self, path: &str, extra: &[(&str, &str)], body: &[u8]) -> Resp {
        let mut req = format!("POST {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        for (k, v) in self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(extra.iter().copied())
        {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
        let mut stream = TcpStream::connect(&self.addr).await.expect("connect");
        stream.write_all(req.as_bytes()).await.unwrap();
        for chunk in body.chunks(64 * 1024) {
            let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
            // The server may answer (413) and close before the whole body is sent.
            if stream.write_all(&framed).await.is_err() {
                break;
            }
        }
        let _ = stream.write_all(b"0\r\n\r\n").await;
        let mut r = BufReader::new(stream);
        let (status, headers) = read_head(&mut r).await;
        let mut body = Vec::new();
        if chunked(&headers) {
            while let Some(c) = read_chunk(&mut r).await {
                body.extend(c);
            }
        } else {
            let _ = r.read_to_end(&mut body).await;
        }
        Resp {
            status,
            headers,
            body,
        }
    }

    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.send(
            "POST",
            path,
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        )
        .await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send("DELETE", path, &[], b"").await
    }

    /// Opens an SSE stream; panics unless it answers 200.
    pub async fn stream(&self, path: &str, extra: &[(&str, &str)]) -> Sse {
        let (status, sse) = self.try_stream(path, extra).await;
        assert_eq!(status, 200, "stream {path}");
        sse.unwrap()
    }

    pub async fn try_stream(&self, path: &str, extra: &[(&str, &str)]) -> (u16, Option<Sse>) {
        let mut headers = self.headers.clone();
        headers.push(("Accept".into(), "text/event-stream".into()));
        headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut stream = TcpStream::connect(&self.addr).await.expect("connect");
        stream
            .write_all(head("GET", path, &self.addr, &headers, b"").as_bytes())
            .await
            .unwrap();
        let mut r = BufReader::new(stream);
        let (status, headers) = read_head(&mut r).await;
        if status != 200 {
            return (status, None);
        }
        assert!(chunked(&headers), "an SSE response is chunked: {headers:?}");
        (
            status,
            Some(Sse {
                r,
                text: String::new(),
                comments: 0,
            }),
        )
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub event: String,
    pub id: Option<String>,
    pub data: String,
}

impl Event {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }
}

/// An open SSE stream.
pub struct Sse {
    r: BufReader<TcpStream>,
    text: String,
    /// Comment-only blocks seen (keep-alives).
    pub comments: usize,
}

impl Sse {
    /// The next event, `None` when the stream ended or nothing came within `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + timeout;
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
                if fields == 0 {
                    self.comments += 1;
                    continue;
                }
                return Some(ev);
            }
            let chunk = tokio::time::timeout_at(deadline, read_chunk(&mut self.r))
                .await
                .ok()??;
            self.text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Whether the stream ends within `timeout` (events and keep-alives meanwhile are read and
    /// dropped); `false` when it is still open then.
    pub async fn ended_within(&mut self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            if self.next(left).await.is_none() {
                return tokio::time::Instant::now() < deadline;
            }
        }
    }

    /// Events until `stop` matches one (included); panics after `timeout`.
    pub async fn until(&mut self, timeout: Duration, stop: impl Fn(&Event) -> bool) -> Vec<Event> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let ev = self
                .next(left)
                .await
                .unwrap_or_else(|| panic!("the stream ended or stalled; seen: {out:#?}"));
            let done = stop(&ev);
            out.push(ev);
            if done {
                return out;
            }
        }
    }
}

/// Logs in at `/login` with `token` as the form does; returns the `name=value` cookie the
/// relay set.
pub async fn login(relay_url: &str, token: &str) -> String {
    let c = Client::anonymous(relay_url);
    let host = c.addr.clone();
    let r = c
        .send(
            "POST",
            "/login",
            &[
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("Origin", &format!("http://{host}")),
            ],
            format!("token={token}&next=/").as_bytes(),
        )
        .await;
    assert_eq!(r.status, 303, "login: {}", r.text());
    r.header("set-cookie")
        .expect("a login cookie")
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}
