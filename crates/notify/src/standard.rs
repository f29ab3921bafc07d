//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `<webhook-id>.<webhook-timestamp>.<body>` with the secret's bytes (`whsec_<base64>`), and
//! the receiver's check (constant time, timestamp tolerance).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{KeyInit, Mac};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// Why a secret or a signature does not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    #[error("a secret is whsec_ followed by base64 (24 to 64 bytes)")]
    BadSecret,
    #[error("no v1 signature matches")]
    Mismatch,
    #[error("the timestamp is {0} s away from now (over the tolerance)")]
    Stale(i64),
}

/// The key bytes of a `whsec_<base64>` secret.
pub fn secret_bytes(secret: &str) -> Result<Vec<u8>, SignError> {
    let b64 = secret.strip_prefix("whsec_").ok_or(SignError::BadSecret)?;
    let key = B64.decode(b64).map_err(|_| SignError::BadSecret)?;
    if !(24..=64).contains(&key.len()) {
        return Err(SignError::BadSecret);
    }
    Ok(key)
}

fn mac(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("any key length");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    mac
}

/// The `webhook-signature` value for one attempt.
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    format!(
        "v1,{}",
        B64.encode(mac(key, id, timestamp, body).finalize().into_bytes())
    )
}

/// The receiver's check: one of the space-separated `v1,` signatures matches, and the
/// timestamp is within `tolerance_secs` of `now`.
pub fn verify(
    key: &[u8],
    id: &str,
    timestamp: i64,
    body: &[u8],
    signatures: &str,
    now: i64,
    tolerance_secs: i64,
) -> Result<(), SignError> {
    if (now - timestamp).abs() > tolerance_secs {
        return Err(SignError::Stale(now - timestamp));
    }
    let ok = signatures.split(' ').any(|s| {
        s.strip_prefix("v1,")
            .and_then(|b| B64.decode(b).ok())
            .is_some_and(|sig| mac(key, id, timestamp, body).verify_slice(&sig).is_ok())
    });
    if ok { Ok(()) } else { Err(SignError::Mismatch) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference libraries.
    #[test]
    fn the_specifications_example_signs_and_verifies() {
        let key = secret_bytes("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let (id, ts, body) = (
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        let sig = sign(&key, id, ts, body);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert_eq!(
            verify(
                &key,
                id,
                ts,
                body,
                &format!("v1,bm9wZQ== {sig}"),
                ts + 10,
                300
            ),
            Ok(())
        );
        assert_eq!(
            verify(&key, id, ts, br#"{"test": 2432232315}"#, &sig, ts, 300),
            Err(SignError::Mismatch)
        );
        assert_eq!(
            verify(&key, "msg_other", ts, body, &sig, ts, 300),
            Err(SignError::Mismatch)
        );
        assert_eq!(
            verify(&key, id, ts, body, &sig, ts + 301, 300),
            Err(SignError::Stale(301))
        );
        assert_eq!(
            secret_bytes("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            Err(SignError::BadSecret)
        );
        assert_eq!(secret_bytes("whsec_c2hvcnQ="), Err(SignError::BadSecret));
    }
}
