//! Answer links: a signed, single-use, expiring capability to answer one pending request
//! without a login, put only into the notification sent to a person. The token carries its
//! expiry and a random nonce, signed (HMAC-SHA256) with a key this relay process holds in
//! memory only; the store keeps the SHA-256 of the token (never the token) and when it was
//! used. A link is checked against its request id, so it cannot answer another request.

use base64::Engine;
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

pub use crate::error::LinkError;
use crate::error::RelayError;
use crate::ids::now_ms;
use crate::store::{AnswerLinkRecord, Store};

type HmacSha256 = hmac::Hmac<Sha256>;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;
const VERSION: &str = "v1";

impl From<LinkError> for RelayError {
    fn from(e: LinkError) -> Self {
        RelayError::AnswerLink(e)
    }
}

/// The relay's answer links: its signing key (random, per process) and the store.
pub struct Links {
    key: [u8; 32],
}

impl Default for Links {
    fn default() -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the operating system's random source");
        Self { key }
    }
}

pub(crate) fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Links {
    fn mac(&self, request: &str, expires: i64, nonce: &str) -> Vec<u8> {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("any key length");
        mac.update(
            format!("codex-relay answer link {VERSION}\n{request}\n{expires}\n{nonce}").as_bytes(),
        );
        mac.finalize().into_bytes().to_vec()
    }

    /// A new link token for `request` of `session`, usable once until `expires` (Unix ms);
    /// its hash goes to the store before the token is returned.
    pub(crate) async fn mint(
        &self,
        store: &Store,
        session: &str,
        request: &str,
        expires: i64,
    ) -> Result<String, RelayError> {
        let mut nonce = [0u8; 18];
        getrandom::fill(&mut nonce).expect("the operating system's random source");
        let nonce = B64.encode(nonce);
        let token = format!(
            "{VERSION}.{expires}.{nonce}.{}",
            B64.encode(self.mac(request, expires, &nonce))
        );
        store
            .insert_answer_link(&AnswerLinkRecord {
                hash: token_hash(&token),
                request_id: request.to_owned(),
                session_id: session.to_owned(),
                expires_at: expires,
                used_at: None,
                created_at: now_ms(),
            })
            .await?;
        Ok(token)
    }

    /// Checks a token for `request` without using it: signature, expiry, and that the store
    /// knows it unused. Returns the stored row.
    pub(crate) async fn check(
        &self,
        store: &Store,
        request: &str,
        token: &str,
    ) -> Result<AnswerLinkRecord, LinkError> {
        let mut parts = token.split('.');
        let (Some(VERSION), Some(expires), Some(nonce), Some(mac), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(LinkError::Invalid);
        };
        let expires: i64 = expires.parse().map_err(|_| LinkError::Invalid)?;
        let mac = B64.decode(mac).map_err(|_| LinkError::Invalid)?;
        let mut check = HmacSha256::new_from_slice(&self.key).expect("any key length");
        check.update(
            format!("codex-relay answer link {VERSION}\n{request}\n{expires}\n{nonce}").as_bytes(),
        );
        if check.verify_slice(&mac).is_err() {
            // Signed for another request id (the link's path was changed), or forged.
            return Err(LinkError::Invalid);
        }
        let row = store
            .answer_link(&token_hash(token))
            .await
            .map_err(|e| LinkError::Store(e.to_string()))?
            .ok_or(LinkError::Invalid)?;
        if row.request_id != request {
            return Err(LinkError::OtherRequest);
        }
        if row.used_at.is_some() {
            return Err(LinkError::Used);
        }
        if expires <= now_ms() || row.expires_at <= now_ms() {
            return Err(LinkError::Expired);
        }
        Ok(row)
    }

    /// Uses a checked token: true for the one caller that marked it used.
    pub(crate) async fn consume(&self, store: &Store, token: &str) -> Result<bool, LinkError> {
        store
            .use_answer_link(&token_hash(token), now_ms())
            .await
            .map_err(|e| LinkError::Store(e.to_string()))
    }
}
