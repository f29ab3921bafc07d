//! `--bare`: the same turns with no peer at all: lines read off the app-server's stdout, each
//! parsed into a `serde_json::Value`, answers matched by id, `turn/completed` matched by thread.
//! The least any program that drives `codex app-server` must do per line.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, oneshot};

type Waiters<K, V> = Arc<Mutex<HashMap<K, V>>>;

/// A bare JSON-RPC connection to one app-server.
pub struct Bare {
    stdin: tokio::sync::Mutex<ChildStdin>,
    next_id: std::sync::atomic::AtomicU64,
    answers: Waiters<u64, oneshot::Sender<Value>>,
    /// A thread's `turn/completed` notifications: the `turn` object.
    turns: Waiters<String, mpsc::UnboundedSender<Value>>,
    _child: tokio::process::Child,
}

impl Bare {
    pub async fn start(codex: &str, home: &str) -> Result<Arc<Self>, String> {
        let mut child = tokio::process::Command::new(codex)
            .arg("app-server")
            .env("CODEX_HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn {codex}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let bare = Arc::new(Self {
            stdin: tokio::sync::Mutex::new(child.stdin.take().ok_or("no stdin")?),
            next_id: 1.into(),
            answers: Arc::default(),
            turns: Arc::default(),
            _child: child,
        });
        let (answers, turns) = (bare.answers.clone(), bare.turns.clone());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(mut msg) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let id = msg.get("id").and_then(Value::as_u64);
                match (msg.get("method").and_then(Value::as_str), id) {
                    (None, Some(id)) => {
                        if let Some(tx) = answers.lock().unwrap().remove(&id) {
                            let _ = tx.send(msg);
                        }
                    }
                    (Some("turn/completed"), None) => {
                        let params = msg["params"].take();
                        let thread = params["threadId"].as_str().unwrap_or_default();
                        if let Some(tx) = turns.lock().unwrap().get(thread) {
                            let _ = tx.send(params["turn"].clone());
                        }
                    }
                    _ => {}
                }
            }
        });
        let init = json!({"clientInfo": {"name": "drive-app-server", "version": "0"},
            "capabilities": {"experimentalApi": true}});
        bare.call("initialize", init).await?;
        bare.send(json!({"method": "initialized"})).await?;
        Ok(bare)
    }

    async fn send(&self, msg: Value) -> Result<(), String> {
        let mut line = msg.to_string();
        line.push('\n');
        let mut stdin = self.stdin.lock().await;
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("write to app-server: {e}"))
    }

    /// A request and its `result`.
    async fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.answers.lock().unwrap().insert(id, tx);
        self.send(json!({"id": id, "method": method, "params": params}))
            .await?;
        let mut answer = rx.await.map_err(|_| "app-server gone".to_owned())?;
        match answer.get_mut("result") {
            Some(result) => Ok(result.take()),
            None => Err(format!("{method}: {answer}")),
        }
    }

    /// A new thread and the receiver of its `turn/completed` notifications.
    pub async fn thread(
        &self,
        cwd: &str,
    ) -> Result<(String, mpsc::UnboundedReceiver<Value>), String> {
        let params = json!({"cwd": cwd, "approvalPolicy": "never", "sandbox": "read-only"});
        let result = self.call("thread/start", params).await?;
        let id = result["thread"]["id"]
            .as_str()
            .ok_or("thread/start: no thread id")?
            .to_owned();
        let (tx, rx) = mpsc::unbounded_channel();
        self.turns.lock().unwrap().insert(id.clone(), tx);
        Ok((id, rx))
    }

    /// Runs one turn and waits for its `turn/completed`.
    pub async fn turn(
        &self,
        thread: &str,
        done: &mut mpsc::UnboundedReceiver<Value>,
        prompt: String,
    ) -> Result<(), String> {
        let params = json!({"threadId": thread, "input": [{"type": "text", "text": prompt}]});
        let result = self.call("turn/start", params).await?;
        let turn = result["turn"]["id"].as_str().ok_or("turn/start: no id")?;
        loop {
            let ended = done.recv().await.ok_or("app-server gone")?;
            if ended["id"] == turn {
                return match ended["status"].as_str() {
                    Some("completed") => Ok(()),
                    _ => Err(format!("turn ended: {ended}")),
                };
            }
        }
    }
}
