//! Single sign-on's stored part: which identity at an OpenID provider (its issuer and `sub`)
//! signs in as which user, the sign-ins under way (single use, shared by every relay on the
//! store), and who a verified sign-in is: a bound identity, an invitation used through SSO,
//! a verified email equal to a user's name (when allowed), or a new user (when allowed).
//! The protocol itself (discovery, PKCE, the ID token's checks) is the HTTP front's.
//! docs/SECURITY.md "Single sign-on".

use std::time::Duration;

use serde::Serialize;

use super::{InviteError, TokenInfo, new_secret};
use super::{NewToken, People, PeopleError, Person, Role, TOKEN_PREFIX, User, hash_secret};
use crate::ids::{now_ms, random_id};
use crate::store::{IdentityRecord, PendingSsoRecord, StoreError, TokenRecord};

/// How an SSO sign-in's login token is labelled (then the provider's name).
pub const SSO_LOGIN_LABEL: &str = "sso: ";

/// An identity at a provider bound to a user, as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub issuer: String,
    /// The provider's `sub` claim.
    pub subject: String,
    pub user_id: String,
    /// The email the provider last gave (informative; never what signs in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    pub created_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_sign_in_at: Option<i64>,
}

impl From<IdentityRecord> for Identity {
    fn from(r: IdentityRecord) -> Self {
        Self {
            issuer: r.issuer,
            subject: r.subject,
            user_id: r.user_id,
            email: r.email,
            created_at: r.created_at,
            created_by: r.created_by,
            last_sign_in_at: r.last_sign_in_at,
        }
    }
}

/// A sign-in under way, as the callback takes it back.
#[derive(Debug, Clone)]
pub struct PendingSso {
    pub nonce: String,
    pub verifier: String,
    /// Where the browser goes once signed in (a path on the relay).
    pub next: String,
    /// The invitation this sign-in uses (its code's hash).
    pub invite_hash: Option<String>,
}

/// What a provider verified about the person signing in (from a checked ID token).
#[derive(Debug, Clone, Default)]
pub struct SsoClaims {
    pub issuer: String,
    pub subject: String,
    pub email: Option<String>,
    pub email_verified: bool,
    pub name: Option<String>,
}

/// Who an unbound identity may be, beyond an identity an admin bound or an invitation.
#[derive(Debug, Clone, Copy, Default)]
pub struct SsoPolicy {
    /// A verified email equal to a user's name signs in as that user (and binds the identity).
    pub match_email: bool,
    /// Unknown identities become new users with this role; `None`: they are refused.
    pub create_role: Option<Role>,
}

/// How a sign-in found its user (the audit entry says it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SsoMatch {
    Bound,
    Invitation,
    Email,
    Created,
}

impl SsoMatch {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bound => "bound",
            Self::Invitation => "invitation",
            Self::Email => "email",
            Self::Created => "created",
        }
    }
}

/// Why a verified sign-in is not let in.
#[derive(Debug, thiserror::Error)]
pub enum SsoRefused {
    #[error(
        "this identity is not a user of this relay; ask an admin to bind it to your user or to invite you"
    )]
    Unknown,
    #[error("this user is disabled")]
    Disabled,
    #[error(
        "this identity already signs in as {0}; the invitation was not used (it still works from another identity)"
    )]
    AlreadyBound(String),
    #[error(
        "this invitation is limited to some sessions, which a sign-in cannot keep; accept it with its link instead"
    )]
    LimitedInvitation,
    #[error("a user named {0:?} already exists and is not bound to this identity; ask an admin")]
    NameTaken(String),
    #[error(transparent)]
    Invitation(#[from] InviteError),
    #[error(transparent)]
    People(#[from] PeopleError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl People {
    /// Keeps a sign-in under way for `ttl`, under the SHA-256 of its `state`.
    pub async fn begin_sso(
        &self,
        state: &str,
        pending: &PendingSso,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        self.store
            .insert_sso_pending(&PendingSsoRecord {
                state_hash: hash_secret(state),
                nonce: pending.nonce.clone(),
                verifier: pending.verifier.clone(),
                next: pending.next.clone(),
                invite_hash: pending.invite_hash.clone(),
                created_at: now,
                expires_at: now.saturating_add(ttl.as_millis().min(i64::MAX as u128) as i64),
            })
            .await
    }

    /// Takes back the sign-in `state` names: `None` when it is unknown, already taken (on
    /// any relay of the store) or expired. Either way it cannot be used again.
    pub async fn finish_sso(&self, state: &str) -> Result<Option<PendingSso>, StoreError> {
        let Some(r) = self.store.take_sso_pending(&hash_secret(state)).await? else {
            return Ok(None);
        };
        if r.expires_at <= now_ms() {
            return Ok(None);
        }
        Ok(Some(PendingSso {
            nonce: r.nonce,
            verifier: r.verifier,
            next: r.next,
            invite_hash: r.invite_hash,
        }))
    }

    /// The code's hash, for [`PendingSso::invite_hash`], when the invitation can be used.
    pub async fn invitation_for_sso(&self, code: &str) -> Result<String, InviteError> {
        let hash = hash_secret(code);
        self.peek_invitation_hashed(&hash).await?;
        Ok(hash)
    }

    /// Identities bound to users (one user's when given).
    pub async fn identities(&self, user: Option<&str>) -> Result<Vec<Identity>, PeopleError> {
        let user_id = match user {
            Some(u) => Some(self.user(u).await?.id),
            None => None,
        };
        Ok(self
            .store
            .identities(user_id.as_deref())
            .await?
            .into_iter()
            .map(Identity::from)
            .collect())
    }

    /// Binds an identity (issuer and `sub`) to a user: it then signs in as them.
    pub async fn bind_identity(
        &self,
        user: &str,
        issuer: &str,
        subject: &str,
        by: Option<&Person>,
    ) -> Result<Identity, PeopleError> {
        let user = self.user(user).await?;
        let (issuer, subject) = (issuer.trim(), subject.trim());
        if issuer.is_empty() || subject.is_empty() || subject.len() > 255 {
            return Err(PeopleError::Invalid(
                "an identity is an issuer and a subject (`sub`, at most 255 characters)".into(),
            ));
        }
        let rec = IdentityRecord {
            issuer: issuer.into(),
            subject: subject.into(),
            user_id: user.id.clone(),
            email: None,
            created_at: now_ms(),
            created_by: by.map(|p| p.name.clone()),
            last_sign_in_at: None,
        };
        if !self.store.insert_identity(&rec).await? {
            return Err(PeopleError::Conflict(
                "that identity is already bound to a user".into(),
            ));
        }
        Ok(rec.into())
    }

    /// Unbinds an identity from a user.
    pub async fn unbind_identity(
        &self,
        user: &str,
        issuer: &str,
        subject: &str,
    ) -> Result<(), PeopleError> {
        let user = self.user(user).await?;
        if self
            .store
            .delete_identity(&user.id, issuer, subject)
            .await?
        {
            Ok(())
        } else {
            Err(PeopleError::NotFound("identity"))
        }
    }

    /// Who a verified sign-in is (see the module doc), binding the identity when it was
    /// matched another way; refused when nothing allows it in.
    pub async fn sso_user(
        &self,
        c: &SsoClaims,
        policy: SsoPolicy,
        invite_hash: Option<&str>,
    ) -> Result<(User, SsoMatch), SsoRefused> {
        let bound = self.store.identity(&c.issuer, &c.subject).await?;
        if let Some(hash) = invite_hash {
            if let Some(b) = bound {
                let name = self
                    .user(&b.user_id)
                    .await
                    .map(|u| u.name)
                    .unwrap_or(b.user_id);
                return Err(SsoRefused::AlreadyBound(name));
            }
            if self.peek_invitation_hashed(hash).await?.sessions.is_some() {
                return Err(SsoRefused::LimitedInvitation);
            }
            let made = self.redeem_hashed(hash).await?;
            // The invitation's own token is not handed out (the browser gets a login token).
            let _ = self.revoke_token(&made.token.info.id).await;
            self.bind(c, &made.user.id, "invitation").await?;
            return Ok((made.user, SsoMatch::Invitation));
        }
        if let Some(b) = bound {
            let user = self.user(&b.user_id).await?;
            if user.disabled_at.is_some() {
                return Err(SsoRefused::Disabled);
            }
            self.store
                .touch_identity(&c.issuer, &c.subject, c.email.as_deref(), now_ms())
                .await?;
            return Ok((user, SsoMatch::Bound));
        }
        let verified_email = c.email.as_deref().filter(|_| c.email_verified);
        if policy.match_email
            && let Some(email) = verified_email
            && let Some(rec) = self.store.user(email).await?
        {
            let user = User::from(rec);
            if user.disabled_at.is_some() {
                return Err(SsoRefused::Disabled);
            }
            self.bind(c, &user.id, "verified email").await?;
            return Ok((user, SsoMatch::Email));
        }
        let Some(role) = policy.create_role else {
            return Err(SsoRefused::Unknown);
        };
        let name = verified_email
            .map(str::to_owned)
            .or_else(|| c.name.clone().filter(|n| !n.trim().is_empty()))
            .unwrap_or_else(|| format!("sso-{}", c.subject));
        if self.store.user(&name).await?.is_some() {
            return Err(SsoRefused::NameTaken(name));
        }
        let user = self
            .create_user(&name, role, None)
            .await
            .map_err(|e| match e {
                PeopleError::Conflict(_) => SsoRefused::NameTaken(name.clone()),
                e => SsoRefused::People(e),
            })?;
        self.bind(c, &user.id, "single sign-on").await?;
        Ok((user, SsoMatch::Created))
    }

    async fn bind(&self, c: &SsoClaims, user_id: &str, by: &str) -> Result<(), SsoRefused> {
        let rec = IdentityRecord {
            issuer: c.issuer.clone(),
            subject: c.subject.clone(),
            user_id: user_id.into(),
            email: c.email.clone(),
            created_at: now_ms(),
            created_by: Some(by.into()),
            last_sign_in_at: Some(now_ms()),
        };
        if self.store.insert_identity(&rec).await? {
            Ok(())
        } else {
            // Another relay bound it a moment ago (the same sign-in, twice): refuse rather
            // than guess which user it is now.
            Err(SsoRefused::AlreadyBound("another user".into()))
        }
    }

    /// Ends the browser login a presented secret is, when it is an SSO sign-in's token (its
    /// label starts with [`SSO_LOGIN_LABEL`] and it expires by itself): revoked, so the cookie's
    /// value is refused from now on, everywhere. Other tokens (an API token used as a cookie)
    /// are left alone. True when one was revoked.
    pub async fn end_sso_login(&self, secret: &str) -> Result<bool, StoreError> {
        let Some(grant) = self.check_token(secret).await? else {
            return Ok(false);
        };
        let tokens = self.store.tokens(Some(&grant.user_id)).await?;
        let Some(t) = tokens.iter().find(|t| t.id == grant.token_id) else {
            return Ok(false);
        };
        let sso = t.expires_at.is_some()
            && t.label
                .as_deref()
                .is_some_and(|l| l.starts_with(SSO_LOGIN_LABEL));
        if !sso {
            return Ok(false);
        }
        self.store.revoke_token(&t.id, now_ms()).await
    }

    /// A personal token that signs a browser in as `user` until `ttl` has passed (checked on
    /// the server, like a revocation): what an SSO sign-in's cookie holds.
    pub async fn login_token(
        &self,
        user: &User,
        provider: &str,
        ttl: Duration,
    ) -> Result<NewToken, PeopleError> {
        let label = format!("{SSO_LOGIN_LABEL}{provider}");
        let secret = new_secret(TOKEN_PREFIX);
        let now = now_ms();
        let rec = TokenRecord {
            id: random_id("tok_"),
            hash: hash_secret(&secret),
            user_id: user.id.clone(),
            label: Some(label),
            role: user.role.as_str().into(),
            sessions: None,
            created_at: now,
            last_used_at: None,
            revoked_at: None,
            expires_at: Some(now.saturating_add(ttl.as_millis().min(i64::MAX as u128) as i64)),
        };
        self.store.insert_token(&rec).await?;
        Ok(NewToken {
            token: secret,
            info: TokenInfo::from(rec),
        })
    }
}
