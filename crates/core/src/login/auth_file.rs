//! Codex's `CODEX_HOME/auth.json` as the relay reads and writes it: the ChatGPT tokens
//! (`tokens.{id_token, access_token, refresh_token, account_id}`, `last_refresh`), every other
//! field kept as it was, written atomically (a 0600 temporary file renamed over it).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::LoginError;

/// One generation of a ChatGPT login's tokens. Its `Debug` shows no token.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Tokens {
    pub id_token: String,
    pub access_token: String,
    pub refresh_token: String,
    pub account_id: Option<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("refresh_token", &fingerprint(&self.refresh_token))
            .field("account_id", &self.account_id)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// The ChatGPT account: `tokens.account_id`, else the id token's claim.
    pub fn account(&self) -> Option<String> {
        self.account_id.clone().or_else(|| {
            auth_claim(&self.id_token, "chatgpt_account_id")
                .or_else(|| auth_claim(&self.access_token, "chatgpt_account_id"))
        })
    }

    /// The plan the id token names (`chatgpt_plan_type`), if any.
    pub fn plan(&self) -> Option<String> {
        auth_claim(&self.id_token, "chatgpt_plan_type")
    }
}

/// `auth.json` as read: the whole document and its ChatGPT tokens.
pub(crate) struct AuthFile {
    pub doc: Map<String, Value>,
    pub tokens: Tokens,
}

/// The file of a Codex home.
pub(crate) fn path_in(codex_home: &Path) -> PathBuf {
    codex_home.join("auth.json")
}

/// Reads `auth.json`: `Ok(None)` when there is no file or it holds no ChatGPT login (an API
/// key, say); an error for a file that cannot be read or parsed. Errors quote no content.
pub(crate) fn read(path: &Path) -> Result<Option<AuthFile>, LoginError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LoginError::io("reading", path, e)),
    };
    let doc: Map<String, Value> = serde_json::from_str(&text).map_err(|e| LoginError::Invalid {
        path: path.to_owned(),
        reason: format!(
            "not a JSON object (line {}, column {})",
            e.line(),
            e.column()
        ),
    })?;
    let mode = doc.get("auth_mode").and_then(Value::as_str);
    let api_key = doc
        .get("OPENAI_API_KEY")
        .and_then(Value::as_str)
        .is_some_and(|k| !k.is_empty());
    if !matches!(mode, None | Some("chatgpt")) || (mode.is_none() && api_key) {
        return Ok(None);
    }
    let Some(tokens) = doc.get("tokens").and_then(Value::as_object) else {
        return Ok(None);
    };
    let field = |k: &str| tokens.get(k).and_then(Value::as_str).map(str::to_owned);
    let missing = |k: &str| LoginError::Invalid {
        path: path.to_owned(),
        reason: format!("tokens.{k} is missing or empty"),
    };
    let nonempty = |k: &str| field(k).filter(|v| !v.is_empty()).ok_or_else(|| missing(k));
    let tokens = Tokens {
        id_token: nonempty("id_token")?,
        access_token: nonempty("access_token")?,
        refresh_token: nonempty("refresh_token")?,
        account_id: field("account_id").filter(|v| !v.is_empty()),
    };
    Ok(Some(AuthFile { doc, tokens }))
}

/// Writes `new` into the document read before (other fields untouched, `last_refresh` now),
/// atomically: a 0600 temporary file beside it, synced, renamed over it, the directory synced.
pub(crate) fn write(
    path: &Path,
    mut doc: Map<String, Value>,
    new: &Tokens,
) -> Result<(), LoginError> {
    let tokens = doc
        .entry("tokens")
        .or_insert_with(|| Value::Object(Map::new()));
    if !tokens.is_object() {
        *tokens = Value::Object(Map::new());
    }
    if let Value::Object(t) = tokens {
        t.insert("id_token".into(), Value::String(new.id_token.clone()));
        t.insert(
            "access_token".into(),
            Value::String(new.access_token.clone()),
        );
        t.insert(
            "refresh_token".into(),
            Value::String(new.refresh_token.clone()),
        );
        if let Some(account) = &new.account_id {
            t.insert("account_id".into(), Value::String(account.clone()));
        }
    }
    doc.insert("last_refresh".into(), Value::String(rfc3339_now()));
    let text =
        serde_json::to_string_pretty(&Value::Object(doc)).map_err(|e| LoginError::Invalid {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let tmp = dir.join(format!(
        ".auth.json.codex-relay-{}-{}",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let result = (|| {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| LoginError::io("writing", path, e))
}

static TMP_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A token's SHA-256, hex: what the cluster stores and logs show instead of the token.
pub(crate) fn fingerprint(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A claim of a JWT's `https://api.openai.com/auth` object, as Codex reads it.
fn auth_claim(jwt: &str, key: &str) -> Option<String> {
    let claims = jwt_claims(jwt)?;
    claims
        .get("https://api.openai.com/auth")?
        .get(key)?
        .as_str()
        .map(str::to_owned)
}

/// A JWT's claims (the payload, base64url without padding, as Codex decodes it); `None` for
/// anything else.
pub(crate) fn jwt_claims(jwt: &str) -> Option<Value> {
    let mut parts = jwt.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    serde_json::from_slice(&b64url_decode(payload)?).ok()
}

fn b64url_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        } as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits & 0xff) as u8);
        }
    }
    Some(out)
}

/// Seconds since the epoch of an RFC 3339 time in UTC as Codex writes it
/// (`2026-05-04T10:11:12.123456Z`; the fraction is ignored).
pub(crate) fn parse_rfc3339(s: &str) -> Option<i64> {
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if s.get(4..5)? != "-" || !matches!(s.get(10..11)?, "T" | "t" | " ") {
        return None;
    }
    // Days from 1970-01-01 of a civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// Seconds since the epoch, now.
pub(crate) fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

use crate::time::rfc3339_now_micros as rfc3339_now;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::rfc3339_micros as rfc3339;
    use serde_json::json;

    fn jwt(claims: &Value) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let data = claims.to_string();
        let mut out = String::new();
        for chunk in data.as_bytes().chunks(3) {
            let n = chunk.iter().fold(0u32, |n, b| n << 8 | *b as u32) << (8 * (3 - chunk.len()));
            for i in 0..=chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            }
        }
        format!("e30.{out}.sig")
    }

    #[test]
    fn dates_are_rfc3339_in_utc() {
        for secs in [0, 951_825_600, 1_767_225_599, 4_102_444_800] {
            assert_eq!(parse_rfc3339(&rfc3339(secs, 7)), Some(secs));
        }
        assert_eq!(parse_rfc3339("2026-01-01T00:00:00Z"), Some(1_767_225_600));
        assert_eq!(parse_rfc3339("yesterday"), None);
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(rfc3339(951_825_600, 5), "2000-02-29T12:00:00.000005Z");
        assert_eq!(
            rfc3339(1_767_225_599, 999_999),
            "2025-12-31T23:59:59.999999Z"
        );
    }

    #[test]
    fn a_chatgpt_login_is_read_rewritten_atomically_and_other_fields_survive() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path());
        assert!(read(&path).unwrap().is_none(), "no file, no login");
        let id = jwt(&json!({"email": "a@b.c", "https://api.openai.com/auth":
            {"chatgpt_account_id": "acct-9", "chatgpt_plan_type": "plus"}}));
        std::fs::write(
            &path,
            json!({"OPENAI_API_KEY": null, "auth_mode": "chatgpt", "future_field": [1, 2],
                "tokens": {"id_token": id, "access_token": "at-0", "refresh_token": "rt-0"},
                "last_refresh": "2026-01-01T00:00:00Z"})
            .to_string(),
        )
        .unwrap();
        let file = read(&path).unwrap().expect("a ChatGPT login");
        assert_eq!(file.tokens.refresh_token, "rt-0");
        assert_eq!(file.tokens.account().as_deref(), Some("acct-9"));
        assert_eq!(file.tokens.plan().as_deref(), Some("plus"));
        let shown = format!("{:?}", file.tokens);
        assert!(
            !shown.contains("rt-0") && !shown.contains("at-0"),
            "{shown}"
        );

        let new = Tokens {
            id_token: id.clone(),
            access_token: "at-1".into(),
            refresh_token: "rt-1".into(),
            account_id: Some("acct-9".into()),
        };
        write(&path, file.doc, &new).unwrap();
        let again = read(&path).unwrap().unwrap();
        assert_eq!(again.tokens, new);
        assert_eq!(again.doc["future_field"], json!([1, 2]));
        assert_ne!(again.doc["last_refresh"], json!("2026-01-01T00:00:00Z"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".auth.json"))
            .collect();
        assert!(leftovers.is_empty(), "no temporary file is left behind");
    }

    #[test]
    fn an_api_key_login_is_not_a_chatgpt_login_and_a_broken_file_is_named_not_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path());
        std::fs::write(&path, r#"{"OPENAI_API_KEY": "sk-secret"}"#).unwrap();
        assert!(read(&path).unwrap().is_none());
        std::fs::write(
            &path,
            r#"{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-x"}"#,
        )
        .unwrap();
        assert!(read(&path).unwrap().is_none());
        std::fs::write(
            &path,
            r#"{"tokens": {"id_token": "x.y.z", "access_token": "at-secret"}}"#,
        )
        .unwrap();
        let err = read(&path).err().expect("no refresh token").to_string();
        assert!(
            err.contains("refresh_token") && !err.contains("at-secret"),
            "{err}"
        );
        std::fs::write(&path, r#"{"tokens": "rt-secret"#).unwrap();
        let err = read(&path).err().expect("broken JSON").to_string();
        assert!(
            err.contains("auth.json") && !err.contains("rt-secret"),
            "{err}"
        );
    }
}
