//! Client answers as the legacy server read them. Legacy clients answer an approval with
//! `{decision}`; clients on newer MCP SDKs must also send `action` (their SDK validates the
//! result), which would make the answer parse as a plain elicitation result and lose the
//! decision. A response whose result has a `decision` is narrowed to `{decision}` before the
//! MCP layer parses it, exactly what the legacy server read.

use serde_json::Value;

/// Narrows one JSON-RPC message (or a batch); `true` if it changed.
pub fn narrow(message: &mut Value) -> bool {
    match message {
        Value::Array(batch) => batch.iter_mut().fold(false, |c, m| narrow(m) | c),
        Value::Object(m) if m.contains_key("id") && !m.contains_key("method") => {
            let Some(Value::Object(result)) = m.get_mut("result") else {
                return false;
            };
            let Some(decision) = result.get("decision").cloned() else {
                return false;
            };
            if result.len() == 1 {
                return false;
            }
            result.retain(|k, _| k == "_meta");
            result.insert("decision".into(), decision);
            true
        }
        _ => false,
    }
}

/// Narrows one line of the stdio stream; other lines pass unchanged.
pub fn narrow_line(line: &str) -> Option<String> {
    if !line.contains("\"decision\"") {
        return None;
    }
    let mut v: Value = serde_json::from_str(line).ok()?;
    narrow(&mut v).then(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decisions_survive_an_sdk_that_adds_an_action() {
        let line = r#"{"jsonrpc":"2.0","id":0,"result":{"action":"accept","content":{},"decision":"approved"}}"#;
        let out: Value = serde_json::from_str(&narrow_line(line).unwrap()).unwrap();
        assert_eq!(out["result"], json!({"decision": "approved"}));
        assert!(
            narrow_line(r#"{"jsonrpc":"2.0","id":0,"result":{"decision":"denied"}}"#).is_none()
        );
        assert!(narrow_line(r#"{"jsonrpc":"2.0","id":1,"result":{"action":"accept"}}"#).is_none());
        assert!(
            narrow_line(
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"decision":"x","a":1}}"#
            )
            .is_none()
        );
    }
}
