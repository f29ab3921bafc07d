//! The first answer wins across instances: before the owner tells Codex an answer, it records
//! it in Postgres with a conditional insert under its fence. A second answer (another front, a
//! forwarded one racing a local one) finds the row and is refused; an instance that lost its
//! lease, or cannot reach Postgres, tells Codex nothing, and the request stays open for the
//! instance that runs the session now.

use super::Clustered;
use super::db;
use crate::error::RelayError;
use crate::host::Host;
use crate::store::fence;

impl Clustered {
    /// Records `by`'s answer to `request` as the one that counts; `Err(AlreadyResolved)` when
    /// another was recorded first. Nothing to do outside a cluster.
    pub(crate) async fn claim_answer(
        &self,
        host: &Host,
        session: &str,
        request: &str,
        by: &crate::decider::Decider,
    ) -> Result<(), RelayError> {
        let Some(c) = host.cluster().cloned() else {
            return Ok(());
        };
        let unavailable = |what: &str, e: sqlx::Error| {
            if fence::is_fenced(&e) {
                RelayError::Owner {
                    session: session.to_owned(),
                    owner: c.id.clone(),
                    why: "this instance lost its lease; the instance that runs the session now takes the answer".into(),
                }
            } else {
                db(what)(e)
            }
        };
        let mut tx = c
            .pool
            .begin()
            .await
            .map_err(|e| unavailable("recording the answer", e))?;
        fence::check(&mut tx, &c.fence, c.fence.epoch())
            .await
            .map_err(|e| unavailable("recording the answer", e))?;
        let first: Option<String> = sqlx::query_scalar(
            "INSERT INTO relay_answers (request_id, session_id, instance, answered_by) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (request_id) DO NOTHING RETURNING request_id",
        )
        .bind(request)
        .bind(session)
        .bind(&c.id)
        .bind(by.to_string())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| unavailable("recording the answer", e))?;
        if first.is_none() {
            let earlier: Option<String> =
                sqlx::query_scalar("SELECT answered_by FROM relay_answers WHERE request_id = $1")
                    .bind(request)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(|e| unavailable("reading the first answer", e))?;
            return Err(RelayError::AlreadyResolved {
                id: request.to_owned(),
                decision: "answered".into(),
                by: earlier.unwrap_or_else(|| "another answer".into()),
            });
        }
        tx.commit()
            .await
            .map_err(|e| unavailable("recording the answer", e))?;
        Ok(())
    }
}
