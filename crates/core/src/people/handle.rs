//! [`People`]: the engine API of users, personal tokens, invitations and the audit log, over
//! the store (so every relay on one store sees one set, and a revocation holds at once on all
//! of them: a token is checked against the store on every use, not cached).

use std::time::Duration;

use serde::Serialize;

use super::{
    AuditEntry, AuditQuery, Grant, INVITE_PREFIX, Person, Role, TOKEN_PREFIX, hash_secret,
    new_secret,
};
use crate::ids::{now_ms, random_id};
use crate::relay::Relay;
use crate::store::{InviteRecord, Store, StoreError, TokenRecord, UserRecord};

/// How often a token's `lastUsedAt` is written (at most once per this, per token).
const TOUCH_EVERY_MS: i64 = 60_000;
/// The longest a name may be.
const MAX_NAME: usize = 80;

/// What can go wrong with users and tokens.
#[derive(Debug, thiserror::Error)]
pub enum PeopleError {
    #[error("{0}")]
    Invalid(String),
    #[error("no such {0}")]
    NotFound(&'static str),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why an invitation cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum InviteError {
    #[error("this invitation is not known here")]
    Unknown,
    #[error("this invitation was already used; ask for a new one")]
    Used,
    #[error("this invitation expired; ask for a new one")]
    Expired,
    #[error("a user named {0:?} already exists; ask for an invitation under another name")]
    NameTaken(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A user, as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub created_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Set when the user was disabled: every token and login of theirs is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<i64>,
}

impl From<UserRecord> for User {
    fn from(u: UserRecord) -> Self {
        Self {
            id: u.id,
            name: u.name,
            role: Role::parse(&u.role).unwrap_or(Role::Viewer),
            created_at: u.created_at,
            created_by: u.created_by,
            disabled_at: u.disabled_at,
        }
    }
}

/// A personal token, as listed (never its secret, which is shown once, when made).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenInfo {
    pub id: String,
    pub user_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub role: Role,
    /// The sessions it is limited to; absent: every session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
    pub created_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<i64>,
    /// When it stops working by itself (an SSO sign-in's login); absent: never.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

fn sessions_of(text: Option<&str>) -> Option<Vec<String>> {
    // A list that cannot be read limits to nothing (fail closed), not to everything.
    text.map(|t| serde_json::from_str(t).unwrap_or_default())
}

impl From<TokenRecord> for TokenInfo {
    fn from(t: TokenRecord) -> Self {
        Self {
            sessions: sessions_of(t.sessions.as_deref()),
            id: t.id,
            user_id: t.user_id,
            label: t.label,
            role: Role::parse(&t.role).unwrap_or(Role::Viewer),
            created_at: t.created_at,
            last_used_at: t.last_used_at,
            revoked_at: t.revoked_at,
            expires_at: t.expires_at,
        }
    }
}

/// A token just made: its secret (shown this once) and how it is listed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewToken {
    pub token: String,
    #[serde(flatten)]
    pub info: TokenInfo,
}

/// An invitation, as listed (never its code).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Invitation {
    pub id: String,
    pub name: String,
    pub role: Role,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
    pub created_at: i64,
    pub expires_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

impl From<InviteRecord> for Invitation {
    fn from(i: InviteRecord) -> Self {
        Self {
            sessions: sessions_of(i.sessions.as_deref()),
            id: i.id,
            name: i.name,
            role: Role::parse(&i.role).unwrap_or(Role::Viewer),
            created_at: i.created_at,
            expires_at: i.expires_at,
            used_at: i.used_at,
            user_id: i.user_id,
        }
    }
}

/// What using an invitation made: the user, and their first token.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Redeemed {
    pub user: User,
    pub token: NewToken,
}

/// Users, tokens, invitations and the audit log (see the module doc). Cheap to clone.
#[derive(Clone)]
pub struct People {
    pub(super) store: Store,
}

impl Relay {
    /// The relay's people: users, personal tokens, invitations, the audit log.
    pub fn people(&self) -> People {
        People::new(self.store().clone())
    }
}

fn check_name(name: &str) -> Result<String, PeopleError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(PeopleError::Invalid(format!(
            "a user's name is 1 to {MAX_NAME} printable characters"
        )));
    }
    if name == super::ADMIN_TOKEN_ID {
        return Err(PeopleError::Invalid(format!(
            "{name:?} names the relay's own token"
        )));
    }
    Ok(name.to_owned())
}

fn sessions_text(sessions: &Option<Vec<String>>) -> Option<String> {
    sessions
        .as_ref()
        .map(|s| serde_json::to_string(s).unwrap_or_else(|_| "[]".into()))
}

impl People {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    pub(super) fn store(&self) -> &Store {
        &self.store
    }

    /// Adds a named user.
    pub async fn create_user(
        &self,
        name: &str,
        role: Role,
        by: Option<&Person>,
    ) -> Result<User, PeopleError> {
        let name = check_name(name)?;
        if self.store.user(&name).await?.is_some() {
            return Err(PeopleError::Conflict(format!(
                "a user named {name:?} already exists"
            )));
        }
        let rec = UserRecord {
            id: random_id("usr_"),
            name,
            role: role.as_str().into(),
            created_at: now_ms(),
            created_by: by.map(|p| p.name.clone()),
            disabled_at: None,
        };
        self.store.insert_user(&rec).await?;
        Ok(rec.into())
    }

    pub async fn users(&self) -> Result<Vec<User>, PeopleError> {
        Ok(self
            .store
            .users()
            .await?
            .into_iter()
            .map(User::from)
            .collect())
    }

    pub async fn user(&self, id_or_name: &str) -> Result<User, PeopleError> {
        Ok(self
            .store
            .user(id_or_name)
            .await?
            .ok_or(PeopleError::NotFound("user"))?
            .into())
    }

    /// Changes a user's role and/or disables (or enables) them; a disabled user's tokens and
    /// logins are refused from the next request on, everywhere.
    pub async fn update_user(
        &self,
        id_or_name: &str,
        role: Option<Role>,
        disabled: Option<bool>,
    ) -> Result<User, PeopleError> {
        let mut u = self.user(id_or_name).await?;
        if let Some(role) = role {
            u.role = role;
        }
        match disabled {
            Some(true) if u.disabled_at.is_none() => u.disabled_at = Some(now_ms()),
            Some(false) => u.disabled_at = None,
            _ => {}
        }
        self.store
            .update_user(&u.id, u.role.as_str(), u.disabled_at)
            .await?;
        Ok(u)
    }

    /// Makes a personal token for a user: at most the user's role, optionally limited to
    /// some sessions. The secret is in the answer only.
    pub async fn create_token(
        &self,
        user_id_or_name: &str,
        role: Option<Role>,
        label: Option<String>,
        sessions: Option<Vec<String>>,
    ) -> Result<NewToken, PeopleError> {
        let user = self.user(user_id_or_name).await?;
        if user.disabled_at.is_some() {
            return Err(PeopleError::Invalid(format!(
                "{} is disabled; enable them first",
                user.name
            )));
        }
        let role = role.unwrap_or(user.role);
        if role > user.role {
            return Err(PeopleError::Invalid(format!(
                "{} is {}; a token of theirs cannot be {role}",
                user.name, user.role
            )));
        }
        let secret = new_secret(TOKEN_PREFIX);
        let rec = TokenRecord {
            id: random_id("tok_"),
            hash: hash_secret(&secret),
            user_id: user.id,
            label: label.filter(|l| !l.trim().is_empty()),
            role: role.as_str().into(),
            sessions: sessions_text(&sessions),
            created_at: now_ms(),
            last_used_at: None,
            revoked_at: None,
            expires_at: None,
        };
        self.store.insert_token(&rec).await?;
        Ok(NewToken {
            token: secret,
            info: rec.into(),
        })
    }

    pub async fn tokens(&self, user: Option<&str>) -> Result<Vec<TokenInfo>, PeopleError> {
        let user_id = match user {
            Some(u) => Some(self.user(u).await?.id),
            None => None,
        };
        Ok(self
            .store
            .tokens(user_id.as_deref())
            .await?
            .into_iter()
            .map(TokenInfo::from)
            .collect())
    }

    /// Revokes a token: refused from the next request on, on every relay of the store.
    pub async fn revoke_token(&self, id: &str) -> Result<(), PeopleError> {
        if self.store.revoke_token(id, now_ms()).await? {
            return Ok(());
        }
        let known = self.store.tokens(None).await?.iter().any(|t| t.id == id);
        Err(if known {
            PeopleError::Conflict(format!("token {id} is already revoked"))
        } else {
            PeopleError::NotFound("token")
        })
    }

    /// Whether the token with id `id` still lets its holder in (not revoked, its user not
    /// disabled): what an open stream re-checks ([`Grant::token_id`]).
    pub async fn token_active(&self, id: &str) -> Result<bool, StoreError> {
        self.store.token_active(id).await
    }

    /// What a presented secret grants, checked against the store now: `None` when it is not a
    /// personal token, unknown, revoked, or its user is disabled.
    pub async fn check_token(&self, secret: &str) -> Result<Option<Grant>, StoreError> {
        let secret = secret.trim();
        if !secret.starts_with(TOKEN_PREFIX) {
            return Ok(None);
        }
        let Some(t) = self.store.token_use(&hash_secret(secret)).await? else {
            return Ok(None);
        };
        let now = now_ms();
        if t.revoked_at.is_some()
            || t.disabled_at.is_some()
            || t.expires_at.is_some_and(|e| e <= now)
        {
            return Ok(None);
        }
        if t.last_used_at.is_none_or(|at| now - at >= TOUCH_EVERY_MS)
            && let Err(e) = self.store.touch_token(&t.id, now).await
        {
            tracing::debug!("noting a token's use: {e}");
        }
        let role = Role::parse(&t.role)
            .unwrap_or(Role::Viewer)
            .min(Role::parse(&t.user_role).unwrap_or(Role::Viewer));
        Ok(Some(Grant {
            token_id: t.id,
            user_id: t.user_id,
            user_name: t.user_name,
            role,
            sessions: sessions_of(t.sessions.as_deref()),
        }))
    }

    /// Invites `name` as `role`: the code (shown this once) makes the user when used, once,
    /// within `ttl`.
    pub async fn invite(
        &self,
        name: &str,
        role: Role,
        sessions: Option<Vec<String>>,
        ttl: Duration,
        by: Option<&Person>,
    ) -> Result<(String, Invitation), PeopleError> {
        let name = check_name(name)?;
        if self.store.user(&name).await?.is_some() {
            return Err(PeopleError::Conflict(format!(
                "a user named {name:?} already exists"
            )));
        }
        let code = new_secret(INVITE_PREFIX);
        let now = now_ms();
        let rec = InviteRecord {
            hash: hash_secret(&code),
            id: random_id("inv_"),
            name,
            role: role.as_str().into(),
            sessions: sessions_text(&sessions),
            created_at: now,
            created_by: by.map(|p| p.name.clone()),
            expires_at: now.saturating_add(ttl.as_millis().min(i64::MAX as u128) as i64),
            used_at: None,
            user_id: None,
        };
        self.store.insert_invite(&rec).await?;
        Ok((code, rec.into()))
    }

    pub async fn invitations(&self) -> Result<Vec<Invitation>, PeopleError> {
        Ok(self
            .store
            .invites()
            .await?
            .into_iter()
            .map(Invitation::from)
            .collect())
    }

    /// The invitation a code names, if it can still be used.
    pub async fn peek_invitation(&self, code: &str) -> Result<Invitation, InviteError> {
        self.peek_invitation_hashed(&hash_secret(code)).await
    }

    /// [`Self::peek_invitation`] by the code's hash (what a sign-in under way keeps).
    pub(crate) async fn peek_invitation_hashed(
        &self,
        hash: &str,
    ) -> Result<Invitation, InviteError> {
        let rec = self.store.invite(hash).await?.ok_or(InviteError::Unknown)?;
        if rec.used_at.is_some() {
            return Err(InviteError::Used);
        }
        if rec.expires_at <= now_ms() {
            return Err(InviteError::Expired);
        }
        Ok(rec.into())
    }

    /// Uses an invitation: makes its user and their first token. Only the first use of a
    /// code succeeds (on any relay of the store).
    pub async fn redeem(&self, code: &str) -> Result<Redeemed, InviteError> {
        self.redeem_hashed(&hash_secret(code)).await
    }

    /// [`Self::redeem`] by the code's hash.
    pub(crate) async fn redeem_hashed(&self, hash: &str) -> Result<Redeemed, InviteError> {
        let inv = self.peek_invitation_hashed(hash).await?;
        if self.store.user(&inv.name).await?.is_some() {
            return Err(InviteError::NameTaken(inv.name));
        }
        let user_id = random_id("usr_");
        if !self.store.use_invite(hash, &user_id, now_ms()).await? {
            return Err(self
                .peek_invitation_hashed(hash)
                .await
                .err()
                .unwrap_or(InviteError::Used));
        }
        let rec = UserRecord {
            id: user_id,
            name: inv.name.clone(),
            role: inv.role.as_str().into(),
            created_at: now_ms(),
            created_by: Some(format!("invitation {}", inv.id)),
            disabled_at: None,
        };
        self.store.insert_user(&rec).await?;
        let token = self
            .create_token(
                &rec.id,
                None,
                Some("invitation".into()),
                inv.sessions.clone(),
            )
            .await
            .map_err(|e| match e {
                PeopleError::Store(s) => InviteError::Store(s),
                _ => InviteError::Unknown,
            })?;
        Ok(Redeemed {
            user: rec.into(),
            token,
        })
    }

    /// Appends an entry to the audit log.
    pub async fn audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        self.store.append_audit(&entry.record()).await
    }

    /// The audit log's entries matching `q`, oldest first.
    pub async fn audit_log(&self, q: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        Ok(self
            .store
            .audit(&q.filter())
            .await?
            .into_iter()
            .map(AuditEntry::from_record)
            .collect())
    }
}
