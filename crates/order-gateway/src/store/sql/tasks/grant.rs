//! A grant set on a task row: what a worker's lease and the operator's reclaim both write (owner,
//! expiry, count, a fresh token, the gate key), its lease-history row and the grant as the worker
//! sees it.

use rakuten_types::order::LeaseGrant;
use rakuten_types::{Timestamp, WorkerId};
use uuid::Uuid;

use super::super::{Conn, Db, grants};
use super::row::latest_state;
use crate::store::StoreError;
use crate::store::dialect::Dialect;
use crate::store::operator::GrantVia;
use crate::store::sql::rows::TaskRow;

/// Whether `e` is a unique violation: on a grant, the partial unique index `one_active_task`
/// refusing a second active task on one gate.
pub(super) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.kind() == sqlx::error::ErrorKind::UniqueViolation)
}

fn new_token() -> String {
    Uuid::now_v7().to_string()
}

/// A fresh grant to set on a task already selected (and locked) by the caller.
pub(super) struct Grant<'a> {
    pub(super) row: &'a TaskRow,
    pub(super) worker_id: &'a WorkerId,
    pub(super) gate_key: String,
    /// The SQL condition the row must still meet; its parameters start at `$7`.
    pub(super) guard: &'static str,
    pub(super) guard_binds: Vec<String>,
    pub(super) expires: Timestamp,
}

impl Grant<'_> {
    /// Sets the grant: `(lease_count, lease_token)`, or `None` when the guard no longer holds. A
    /// unique violation (the gate is taken) rolls back only this statement, so the rest of the
    /// transaction (the heartbeat) still commits.
    pub(super) async fn set(
        &self,
        conn: &mut Conn,
        now: Timestamp,
    ) -> Result<Option<(i64, String)>, sqlx::Error> {
        if Db::SAVEPOINT_AROUND_CONFLICT {
            sqlx::query("SAVEPOINT grant_attempt")
                .execute(&mut *conn)
                .await?;
        }
        let r = self.update(conn, now).await;
        if Db::SAVEPOINT_AROUND_CONFLICT {
            let end = if r.is_ok() {
                "RELEASE SAVEPOINT grant_attempt"
            } else {
                "ROLLBACK TO SAVEPOINT grant_attempt"
            };
            sqlx::query(end).execute(&mut *conn).await?;
        }
        r
    }

    /// Writes the grant's row of the lease history, once [`Self::set`] succeeded.
    pub(super) async fn recorded(
        &self,
        conn: &mut Conn,
        (lease_count, lease_token): &(i64, String),
        via: GrantVia,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        grants::grant_opened(
            conn,
            &self.row.task_id,
            *lease_count,
            self.worker_id.as_str(),
            via,
            lease_token,
            self.expires,
            now,
        )
        .await
    }

    /// The grant as the worker sees it, once [`Self::set`] succeeded.
    pub(super) async fn view(
        &self,
        conn: &mut Conn,
        (lease_count, lease_token): (i64, String),
    ) -> Result<LeaseGrant, StoreError> {
        let row = self.row;
        Ok(LeaseGrant {
            task_id: row.task_id.clone(),
            site: row.site.clone(),
            intent: row.intent()?,
            lease_expires_at: self.expires,
            lease_count,
            known_state: latest_state(conn, row.task_id.as_str()).await?,
            lease_token,
        })
    }

    async fn update(
        &self,
        conn: &mut Conn,
        now: Timestamp,
    ) -> Result<Option<(i64, String)>, sqlx::Error> {
        let token = new_token();
        let sql = format!(
            "UPDATE tasks SET status = 'leased', lease_owner = $1, lease_expires_at = $2, \
             lease_count = lease_count + 1, lease_token = $3, gate_key = $4, updated_at = $5 \
             WHERE task_id = $6 AND {} RETURNING lease_count",
            self.guard
        );
        let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
            .bind(self.worker_id.as_str().to_owned())
            .bind(self.expires.to_rfc3339())
            .bind(token.clone())
            .bind(self.gate_key.clone())
            .bind(now.to_rfc3339())
            .bind(self.row.task_id.as_str().to_owned());
        for b in &self.guard_binds {
            q = q.bind(b.clone());
        }
        Ok(q.fetch_optional(&mut *conn).await?.map(|n| (n, token)))
    }
}
