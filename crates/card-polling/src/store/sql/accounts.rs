//! Accounts and their tokens ([`AccountStore`]): sign-in by token hash, replacement, revocation.

use async_trait::async_trait;
use futures::FutureExt;
use sqlx::Row;

use rakuten_types::Timestamp;

use super::{Conn, Pool, SqlStore, map_constraint, one_row, t};
use crate::domain::TokenHash;
use crate::domain::account::Account;
use crate::store::common::account_from_row;
use crate::store::{AccountRecord, AccountStore, StoreError, StoreResult};

pub(crate) async fn account_find_by_token(
    pool: &Pool,
    hash: &TokenHash,
) -> StoreResult<Option<Account>> {
    let row = sqlx::query(
        "SELECT id, role, shop_id, token_sha256, perm_manual_trigger, perm_card_data \
         FROM accounts WHERE token_sha256 = $1 AND revoked_at IS NULL",
    )
    .bind(hash.0.as_slice())
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    account_from_row(&row, hash)
}

/// Account `id` with its current token's hash (`None` when revoked).
pub(crate) async fn account_get(pool: &Pool, id: &str) -> StoreResult<Option<AccountRecord>> {
    let row = sqlx::query(
        "SELECT id, role, shop_id, token_sha256, perm_manual_trigger, perm_card_data, revoked_at, \
         token_generation FROM accounts WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let stored: Vec<u8> = row.try_get("token_sha256")?;
    let Ok(hash) = <[u8; 32]>::try_from(stored.as_slice()) else {
        return Ok(None);
    };
    let hash = TokenHash(hash);
    let Some(account) = account_from_row(&row, &hash)? else {
        return Ok(None);
    };
    let revoked: Option<String> = row.try_get("revoked_at")?;
    Ok(Some(AccountRecord {
        account,
        token: revoked.is_none().then_some(hash),
        token_generation: row.try_get("token_generation")?,
    }))
}

/// Gives account `id` the token hash `token` and lifts a revocation.
pub(crate) async fn account_set_token(
    conn: &mut Conn,
    id: &str,
    token: &[u8],
    now: Timestamp,
) -> StoreResult<()> {
    let holder: Option<String> =
        sqlx::query_scalar("SELECT id FROM accounts WHERE token_sha256 = $1")
            .bind(token)
            .fetch_optional(&mut *conn)
            .await?;
    if holder.as_deref().is_some_and(|h| h != id) {
        return Err(StoreError::Conflict(
            "the token is already another account's".into(),
        ));
    }
    one_row(
        sqlx::query(
            "UPDATE accounts SET token_sha256 = $1, revoked_at = NULL, token_changed_at = $2, \
             token_generation = token_generation + 1 WHERE id = $3",
        )
        .bind(token)
        .bind(t(now))
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(|e| map_constraint(e, "the token"))?,
    )
}

/// Revokes account `id` (a revoked one keeps its first revocation time).
pub(crate) async fn account_revoke(conn: &mut Conn, id: &str, now: Timestamp) -> StoreResult<()> {
    one_row(
        sqlx::query(
            "UPDATE accounts SET revoked_at = COALESCE(revoked_at, $1), \
             token_generation = token_generation + 1 WHERE id = $2",
        )
            .bind(t(now))
            .bind(id)
            .execute(&mut *conn)
            .await?,
    )
}

#[async_trait]
impl AccountStore for SqlStore {
    async fn account_find_by_token(&self, hash: &TokenHash) -> StoreResult<Option<Account>> {
        account_find_by_token(&self.pool, hash).await
    }

    async fn account_get(&self, id: &str) -> StoreResult<Option<AccountRecord>> {
        account_get(&self.pool, id).await
    }

    async fn account_set_token(
        &self,
        id: &str,
        token: &TokenHash,
        now: Timestamp,
    ) -> StoreResult<()> {
        self.write(
            (id.to_owned(), token.0.to_vec(), now),
            |c, (id, token, now)| account_set_token(c, id, token, *now).boxed(),
        )
        .await
    }

    async fn account_revoke(&self, id: &str, now: Timestamp) -> StoreResult<()> {
        self.write((id.to_owned(), now), |c, (id, now)| {
            account_revoke(c, id, *now).boxed()
        })
        .await
    }
}
