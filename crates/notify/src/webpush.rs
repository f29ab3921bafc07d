//! Web Push: the message encrypted for one browser as RFC 8291 says (P-256 ECDH, HKDF-SHA256,
//! one `aes128gcm` record, RFC 8188), and the relay identified to the push service with a
//! VAPID ES256 JWT (RFC 8292). The VAPID key is made once and kept in the data directory.

use std::path::Path;

use aes_gcm::aead::{Aead, KeyInit};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use hkdf::Hkdf;
use p256::ecdsa::signature::Signer;
use p256::elliptic_curve::sec1::ToSec1Point;
use p256::{PublicKey, SecretKey};
use sha2::Sha256;

/// What can go wrong before anything is sent.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("the subscription's key is not a P-256 point: {0}")]
    BadKey(String),
    #[error("the subscription's auth secret is not 16 bytes")]
    BadAuth,
    #[error("the VAPID key file {path}: {message}")]
    KeyFile { path: String, message: String },
}

fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("the operating system's random source");
    b
}

fn uncompressed(pk: &PublicKey) -> Vec<u8> {
    pk.to_sec1_point(false).as_bytes().to_vec()
}

/// The record size the header announces (one record holds the whole payload).
const RECORD_SIZE: u32 = 4096;

/// Encrypts `payload` for the browser key `ua_public` (65 bytes) and `auth` (16 bytes), with
/// the sender's one-time key `as_secret` and `salt` (fresh for every message: see
/// [`encrypt`]); returns the `aes128gcm` body.
pub fn encrypt_with(
    payload: &[u8],
    ua_public: &[u8],
    auth: &[u8],
    as_secret: &SecretKey,
    salt: &[u8; 16],
) -> Result<Vec<u8>, PushError> {
    let ua = PublicKey::from_sec1_bytes(ua_public).map_err(|e| PushError::BadKey(e.to_string()))?;
    if auth.len() != 16 {
        return Err(PushError::BadAuth);
    }
    let as_public = uncompressed(&as_secret.public_key());
    let shared = p256::ecdh::diffie_hellman(as_secret.to_nonzero_scalar(), ua.as_affine());
    // IKM = HKDF(auth, ecdh, "WebPush: info" 0 ua_public as_public, 32)
    let mut key_info = b"WebPush: info\0".to_vec();
    key_info.extend_from_slice(&uncompressed(&ua));
    key_info.extend_from_slice(&as_public);
    let mut ikm = [0u8; 32];
    Hkdf::<Sha256>::new(Some(auth), shared.raw_secret_bytes())
        .expand(&key_info, &mut ikm)
        .expect("32 bytes fit");
    let prk = Hkdf::<Sha256>::new(Some(salt), &ikm);
    let mut cek = [0u8; 16];
    let mut nonce = [0u8; 12];
    prk.expand(b"Content-Encoding: aes128gcm\0", &mut cek)
        .expect("16 bytes fit");
    prk.expand(b"Content-Encoding: nonce\0", &mut nonce)
        .expect("12 bytes fit");
    // One record, the last: the payload then the delimiter 0x02, no padding.
    let mut plain = payload.to_vec();
    plain.push(2);
    let cipher = aes_gcm::Aes128Gcm::new_from_slice(&cek).expect("a 16-byte key");
    let sealed = cipher
        .encrypt(&nonce.into(), plain.as_slice())
        .expect("AES-GCM encrypts any short message");
    let mut body = Vec::with_capacity(16 + 4 + 1 + 65 + sealed.len());
    body.extend_from_slice(salt);
    body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    body.push(as_public.len() as u8);
    body.extend_from_slice(&as_public);
    body.extend_from_slice(&sealed);
    Ok(body)
}

/// [`encrypt_with`] a fresh key and salt.
pub fn encrypt(payload: &[u8], ua_public: &[u8], auth: &[u8]) -> Result<Vec<u8>, PushError> {
    let secret = loop {
        if let Ok(k) = SecretKey::from_slice(&random::<32>()) {
            break k;
        }
    };
    encrypt_with(payload, ua_public, auth, &secret, &random::<16>())
}

/// The relay's VAPID identity.
#[derive(Clone)]
pub struct Vapid {
    key: SecretKey,
    subject: String,
}

impl std::fmt::Debug for Vapid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Vapid({})", self.public_key())
    }
}

impl Vapid {
    pub fn new(key: SecretKey, subject: impl Into<String>) -> Self {
        Self {
            key,
            subject: subject.into(),
        }
    }

    /// The key in `path` (base64url of its 32 bytes), made and written (mode 0600) when the
    /// file does not exist.
    pub fn load_or_create(path: &Path, subject: impl Into<String>) -> Result<Self, PushError> {
        let err = |message: String| PushError::KeyFile {
            path: path.display().to_string(),
            message,
        };
        let key = match std::fs::read_to_string(path) {
            Ok(text) => {
                let bytes = B64URL.decode(text.trim()).map_err(|e| err(e.to_string()))?;
                SecretKey::from_slice(&bytes).map_err(|e| err(e.to_string()))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = loop {
                    if let Ok(k) = SecretKey::from_slice(&random::<32>()) {
                        break k;
                    }
                };
                use std::io::Write;
                use std::os::unix::fs::OpenOptionsExt;
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
                }
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(|e| err(e.to_string()))?;
                f.write_all(B64URL.encode(key.to_bytes()).as_bytes())
                    .map_err(|e| err(e.to_string()))?;
                key
            }
            Err(e) => return Err(err(e.to_string())),
        };
        Ok(Self::new(key, subject))
    }

    /// The public key browsers subscribe with (`applicationServerKey`), base64url.
    pub fn public_key(&self) -> String {
        B64URL.encode(uncompressed(&self.key.public_key()))
    }

    /// `Authorization: vapid t=<JWT>, k=<public key>` for a push to `endpoint`, valid 12 h
    /// from `now` (Unix seconds).
    pub fn authorization(&self, endpoint: &str, now: i64) -> String {
        let aud = origin(endpoint);
        let header = B64URL.encode(br#"{"typ":"JWT","alg":"ES256"}"#);
        let claims = B64URL.encode(
            serde_json::json!({"aud": aud, "exp": now + 12 * 3600, "sub": self.subject})
                .to_string(),
        );
        let signing = p256::ecdsa::SigningKey::from(self.key.clone());
        let input = format!("{header}.{claims}");
        let sig: p256::ecdsa::Signature = signing.sign(input.as_bytes());
        format!(
            "vapid t={input}.{}, k={}",
            B64URL.encode(sig.to_bytes()),
            self.public_key()
        )
    }
}

/// `scheme://host[:port]` of a URL.
fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    format!("{scheme}://{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Vec<u8> {
        B64URL.decode(s).unwrap()
    }

    /// RFC 8291, Appendix A: the same keys, salt and message give the same bytes.
    #[test]
    fn the_rfc_8291_example_encrypts_to_its_bytes() {
        let as_secret =
            SecretKey::from_slice(&b("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")).unwrap();
        assert_eq!(
            B64URL.encode(uncompressed(&as_secret.public_key())),
            "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
        );
        let ua_public = b(
            "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
        );
        let auth = b("BTBZMqHH6r4Tts7J_aSIgg");
        let salt: [u8; 16] = b("DGv6ra1nlYgDCS1FRnbzlw").try_into().unwrap();
        let body = encrypt_with(
            b"When I grow up, I want to be a watermelon",
            &ua_public,
            &auth,
            &as_secret,
            &salt,
        )
        .unwrap();
        assert_eq!(
            B64URL.encode(body),
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
        );
        assert!(matches!(
            encrypt_with(b"x", &ua_public, &auth[..15], &as_secret, &salt),
            Err(PushError::BadAuth)
        ));
        assert!(matches!(
            encrypt_with(b"x", &ua_public[..64], &auth, &as_secret, &salt),
            Err(PushError::BadKey(_))
        ));
    }

    /// The JWT is ES256 over its first two parts with the key it names, for the endpoint's
    /// origin.
    #[test]
    fn the_vapid_header_verifies_with_its_key() {
        use p256::ecdsa::signature::Verifier;
        let vapid = Vapid::new(
            SecretKey::from_slice(&[7u8; 32]).unwrap(),
            "mailto:ops@example.com",
        );
        let auth = vapid.authorization("https://push.example.net:8443/wpush/abc?x=1", 1_000);
        let (t, k) = auth
            .strip_prefix("vapid t=")
            .unwrap()
            .split_once(", k=")
            .unwrap();
        assert_eq!(k, vapid.public_key());
        let parts: Vec<&str> = t.split('.').collect();
        let claims: serde_json::Value = serde_json::from_slice(&b(parts[1])).unwrap();
        assert_eq!(
            claims,
            serde_json::json!({"aud": "https://push.example.net:8443", "exp": 44_200,
                "sub": "mailto:ops@example.com"})
        );
        let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(&b(k)).unwrap();
        let sig = p256::ecdsa::Signature::from_slice(&b(parts[2])).unwrap();
        let signed = format!("{}.{}", parts[0], parts[1]);
        assert!(key.verify(signed.as_bytes(), &sig).is_ok());
        assert!(key.verify(b"another message", &sig).is_err());
    }
}
