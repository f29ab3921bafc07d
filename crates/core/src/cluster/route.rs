//! Where the engine's calls go in a cluster: a session another instance runs is a mirror here
//! and its actions go to the owner; a new session starts here unless this instance is past its
//! load; a request is answered where it was asked.

use std::time::Duration;

use super::mailbox;
use super::{Clustered, db, mirror, sql};
use crate::broker::Resolution;
use crate::config::CreateOptions;
use crate::error::RelayError;
use crate::host::Host;
use crate::op::{Create, Created, reply_of};
use crate::session::{SayOutcome, SessionHandle};

/// How long a session whose owner recorded it may take to reach the store.
const FIRST_COMMIT: Duration = Duration::from_secs(2);
/// How long a request id the store does not have is looked for again before it is unknown.
const UNSEEN_REQUEST_WAIT: Duration = Duration::from_secs(1);

impl Clustered {
    /// A session of this relay, or, in a cluster, one stored that another instance runs (or
    /// ran): mirrored here from then on. An instance can be asked about a session before the
    /// notice of its first commit arrives.
    pub(crate) async fn find(&self, host: &Host, id: &str) -> Result<SessionHandle, RelayError> {
        if let Some(h) = host.held(id) {
            return Ok(h);
        }
        let Some(c) = host.cluster().cloned() else {
            return Err(RelayError::UnknownSession(id.to_owned()));
        };
        if id.trim().is_empty() {
            return Err(RelayError::UnknownSession(id.to_owned()));
        }
        // An owner records a new session before its first batch commits: wait that long.
        let deadline = tokio::time::Instant::now() + FIRST_COMMIT;
        loop {
            if let Some(h) = mirror::load(host, id).await? {
                return Ok(h);
            }
            let owned = sql::owner_of(&c.pool, id)
                .await
                .map_err(db("finding the session's owner"))?;
            if owned.is_none() || tokio::time::Instant::now() >= deadline {
                return Err(RelayError::UnknownSession(id.to_owned()));
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
    }
    /// A session this relay does not have: `Some(mirror)` when another instance runs it,
    /// `Some(session)` when it is this instance's in the store (adopted from its log now),
    /// `None` when it is (now) this instance's to resume.
    pub(crate) async fn locate(
        &self,
        host: &Host,
        id: &str,
    ) -> Result<Option<SessionHandle>, RelayError> {
        let Some(c) = host.cluster() else {
            return Ok(None);
        };
        let known = sql::owner_of(&c.pool, id)
            .await
            .map_err(db("finding the session's owner"))?;
        let owner = match known {
            Some((owner, _)) if owner != c.id => owner,
            // This instance's to resume (and, for a thread nobody ran, to claim): work it
            // must be able to store.
            _ => {
                host.check_writable()?;
                sql::claim(&c.pool, id, &c.id)
                    .await
                    .map_err(db("claiming the session"))?
            }
        };
        if owner == c.id {
            // This instance's, stored, and not held here: it is taking the session back (it
            // joined again after losing its lease, and adopts its sessions one by one). It is
            // adopted from its log now, never resumed as a thread with nothing of it.
            if host.store().session(id).await?.is_some() {
                let why = format!(
                    "instance {} stopped running this session while this turn was running",
                    c.id
                );
                mirror::adopt(host, id, &why).await?;
                if let Some(h) = host.held(id).filter(|h| !h.remote) {
                    return Ok(Some(h));
                }
            }
            return Ok(None);
        }
        match mirror::load(host, id).await? {
            Some(h) => Ok(Some(h)),
            None => Err(RelayError::Owner {
                session: id.to_owned(),
                owner,
                why: "it has not stored the session yet; try again in a moment".into(),
            }),
        }
    }
    /// Gives up a claim made for a thread that could not be resumed here.
    pub(crate) fn unclaim(&self, id: &str) {
        let c = self.0.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            let gone = sqlx::query(
                "DELETE FROM relay_owners o WHERE o.session_id = $1 AND o.owner = $2 \
                 AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = $1)",
            )
            .bind(&id)
            .bind(&c.id)
            .execute(&c.pool)
            .await;
            if let Err(e) = gone {
                tracing::debug!(session = %id, "giving up a claim failed: {e}");
            }
        });
    }
    /// Records a session this instance just created as its own.
    pub(crate) async fn claim(&self, host: &Host, id: &str) -> Result<(), RelayError> {
        let Some(c) = host.cluster() else {
            return Ok(());
        };
        let owner = sql::claim_fenced(&c.pool, &c.fence, id)
            .await
            .map_err(|e| {
                if crate::store::fence::is_fenced(&e) {
                    RelayError::Unavailable {
                        instance: c.id.clone(),
                        why: format!(
                            "instance {} lost its lease while it started the session, so it did not keep it: send this to another instance of the cluster, or try again in a moment",
                            c.id
                        ),
                    }
                } else {
                    db("recording the new session's owner")(e)
                }
            })?;
        if owner != c.id {
            return Err(RelayError::Remote {
                code: "store_unavailable".into(),
                message: format!("the new session {id} is already run by instance {owner}"),
            });
        }
        Ok(())
    }
    /// Starts the session on the least loaded live instance when this one runs at least
    /// `max_load` sessions and that one runs fewer. Sessions with tools of this process (the
    /// library's) always start here.
    pub(crate) async fn place_new(
        &self,
        host: &Host,
        opts: &CreateOptions,
    ) -> Result<Option<(SessionHandle, Option<SayOutcome>)>, RelayError> {
        let Some(c) = host.cluster() else {
            return Ok(None);
        };
        let Some(max) = c.config.max_load else {
            return Ok(None);
        };
        let load = host.local_sessions();
        if load < max || !opts.dynamic_tools.is_empty() {
            return Ok(None);
        }
        let Some((target, theirs)) = sql::least_loaded(&c.pool, &c.id)
            .await
            .map_err(db("finding the least loaded instance"))?
        else {
            return Ok(None);
        };
        if theirs as usize >= load {
            return Ok(None);
        }
        tracing::info!(instance = %c.id, load, to = %target, theirs, "starting a session on a less loaded instance");
        let op = Create {
            options: Box::new(opts.clone()),
        };
        let created: Created = match mailbox::call(host, &target, op.into()).await {
            Ok(answer) => reply_of(&answer)?,
            // Taken over before it took the command: nothing was started there; start here.
            Err(mailbox::Undelivered::Withdrawn(_)) => return Ok(None),
            Err(mailbox::Undelivered::Unanswered(why)) => {
                return Err(RelayError::Owner {
                    session: "(new)".into(),
                    owner: target.clone(),
                    why,
                });
            }
        };
        let handle = mirror::load(host, &created.session_id)
            .await?
            .ok_or_else(|| RelayError::Owner {
                session: created.session_id.clone(),
                owner: target,
                why: "its new session is not in the store".into(),
            })?;
        Ok(Some((handle, created.first)))
    }
    /// A request as the store has it: its session, and how it ended if it did (a request of
    /// another instance's session this one has not mirrored, or one already resolved). A
    /// client can see a request on its owner's live stream before the owner commits it, and
    /// answer through another instance at once: with `wait`, an id the store does not have is
    /// looked for again for up to [`UNSEEN_REQUEST_WAIT`] before it is called unknown.
    pub(crate) async fn stored_request(
        &self,
        request: &str,
        wait: bool,
    ) -> Option<(String, Option<Resolution>)> {
        let c = &self.0;
        let until = tokio::time::Instant::now() + UNSEEN_REQUEST_WAIT;
        loop {
            if let Some((session, resolution)) =
                sql::session_of_request(&c.pool, request).await.ok()?
            {
                let resolution = resolution.and_then(|r| serde_json::from_str(&r).ok());
                return Some((session, resolution));
            }
            if !wait || tokio::time::Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}
