//! A stand-in for `codex app-server` for speed and memory benchmarks (never for proving a
//! feature): answers the handshake, `thread/start`/`resume` and `turn/start`, then streams
//! `FAKE_EVENTS` agent-message items per turn as fast as it can, or at `FAKE_RATE` per second.
//! Each item's text is `t=<unix nanos when written>` so a reader can measure latency. With
//! `FAKE_APPROVE_EVERY=N`, every Nth turn first asks a command approval and waits for its
//! answer (an accept streams the items; anything else ends the turn with none).

use std::collections::HashMap;
use std::io::{BufRead, BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--version") {
        println!("codex-cli 0.169.0");
        return;
    }
    if !args.iter().any(|a| a == "app-server") {
        eprintln!("fake-app-server: only `--version` and `app-server` are supported");
        std::process::exit(2);
    }
    let events = env_u64("FAKE_EVENTS", 1000);
    let rate = env_u64("FAKE_RATE", 0);
    let out = Arc::new(Mutex::new(BufWriter::with_capacity(
        1 << 16,
        std::io::stdout(),
    )));
    let threads = AtomicU64::new(0);
    let turns = Arc::new(AtomicU64::new(0));
    let approve_every = env_u64("FAKE_APPROVE_EVERY", 0);
    // Server requests waiting for the client's answer, by id.
    let waiting: Arc<Mutex<HashMap<u64, mpsc::Sender<serde_json::Value>>>> = Arc::default();
    let next_request = Arc::new(AtomicU64::new(0));
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").cloned() else {
            continue;
        };
        if msg.get("method").is_none() {
            // The client's answer to one of our requests.
            let waiter = id.as_u64().and_then(|n| waiting.lock().unwrap().remove(&n));
            if let Some(tx) = waiter {
                let _ = tx.send(msg.get("result").cloned().unwrap_or_default());
            }
            continue;
        }
        let method = msg.get("method").and_then(|m| m.as_str()).unwrap_or("");
        let params = msg.get("params").cloned().unwrap_or_default();
        let result = match method {
            "initialize" => {
                let name = params
                    .pointer("/clientInfo/name")
                    .and_then(|v| v.as_str())
                    .unwrap_or("client");
                serde_json::json!({"userAgent": format!("{name}/0.169.0 (fake)")})
            }
            "thread/start" => {
                let n = threads.fetch_add(1, Ordering::Relaxed);
                serde_json::json!({"thread": {"id": format!("fake-thread-{}-{n}", std::process::id()), "turns": []}, "model": "fake"})
            }
            "thread/resume" => {
                serde_json::json!({"thread": {"id": params["threadId"], "turns": []}})
            }
            "turn/start" => {
                let thread = params["threadId"].as_str().unwrap_or("").to_owned();
                let n = turns.fetch_add(1, Ordering::Relaxed);
                // Unique beyond this process: a thread resumed on a new process keeps its turns'.
                let turn = format!("fake-turn-{}-{n}", std::process::id());
                let reply = serde_json::json!({"id": id, "result": {"turn": {"id": turn, "status": "inProgress", "items": []}}});
                {
                    let mut o = out.lock().unwrap();
                    let _ = writeln!(o, "{reply}");
                    let _ = o.flush();
                }
                let out = out.clone();
                let ask = (approve_every > 0 && (n + 1).is_multiple_of(approve_every)).then(|| {
                    let rid = next_request.fetch_add(1, Ordering::Relaxed);
                    let (tx, rx) = mpsc::channel();
                    waiting.lock().unwrap().insert(rid, tx);
                    (rid, rx)
                });
                std::thread::spawn(move || {
                    let approved = match ask {
                        None => true,
                        Some((rid, rx)) => ask_approval(&out, &thread, &turn, rid, &rx),
                    };
                    stream(
                        &out,
                        &thread,
                        &turn,
                        if approved { events } else { 0 },
                        rate,
                    )
                });
                continue;
            }
            "thread/list" => serde_json::json!({"data": [], "nextCursor": null}),
            _ => serde_json::json!({}),
        };
        let mut o = out.lock().unwrap();
        let _ = writeln!(o, "{}", serde_json::json!({"id": id, "result": result}));
        let _ = o.flush();
    }
}

/// Asks the client to approve a command in `turn` and waits for the answer: whether it was an
/// accept.
fn ask_approval(
    out: &Mutex<BufWriter<std::io::Stdout>>,
    thread: &str,
    turn: &str,
    rid: u64,
    answer: &mpsc::Receiver<serde_json::Value>,
) -> bool {
    {
        let mut o = out.lock().unwrap();
        let _ = writeln!(
            o,
            r#"{{"id":{rid},"method":"item/commandExecution/requestApproval","params":{{"threadId":"{thread}","turnId":"{turn}","itemId":"cmd-{turn}","command":"touch soak.txt","cwd":"/tmp"}}}}"#
        );
        let _ = o.flush();
    }
    let decision = answer.recv().unwrap_or_default();
    {
        let mut o = out.lock().unwrap();
        let _ = writeln!(
            o,
            r#"{{"method":"serverRequest/resolved","params":{{"threadId":"{thread}","requestId":{rid}}}}}"#
        );
    }
    decision["decision"] == "accept"
}

fn stream(
    out: &Mutex<BufWriter<std::io::Stdout>>,
    thread: &str,
    turn: &str,
    events: u64,
    rate: u64,
) {
    let line = |o: &mut BufWriter<std::io::Stdout>, method: &str, params: String| {
        let _ = writeln!(o, r#"{{"method":"{method}","params":{params}}}"#);
    };
    {
        let mut o = out.lock().unwrap();
        line(
            &mut o,
            "turn/started",
            format!(
                r#"{{"threadId":"{thread}","turn":{{"id":"{turn}","status":"inProgress","items":[]}}}}"#
            ),
        );
    }
    let start = Instant::now();
    for i in 0..events {
        if rate > 0 {
            let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let mut o = out.lock().unwrap();
        line(
            &mut o,
            "item/completed",
            format!(
                r#"{{"threadId":"{thread}","turnId":"{turn}","item":{{"type":"agentMessage","id":"m{i}","text":"t={}"}},"completedAtMs":0}}"#,
                nanos()
            ),
        );
        if rate > 0 {
            let _ = o.flush();
        }
    }
    let mut o = out.lock().unwrap();
    line(
        &mut o,
        "turn/completed",
        format!(
            r#"{{"threadId":"{thread}","turn":{{"id":"{turn}","status":"completed","items":[]}}}}"#
        ),
    );
    let _ = o.flush();
}
