//! Row reads shared by the store's files. The decoders themselves live in
//! [`crate::store::common`]; the item select list, which differs by engine, in
//! [`crate::store::dialect`].

use rakuten_types::Timestamp;

use super::Db;
use crate::store::StoreResult;
use crate::store::common::corrupt;
pub(crate) use crate::store::common::ts;

/// The stored go-live instant of the priority feature.
pub(crate) async fn feature_enabled_at<'e>(
    ex: impl sqlx::Executor<'e, Database = Db>,
) -> StoreResult<Timestamp> {
    let v: Option<String> =
        sqlx::query_scalar("SELECT value FROM meta WHERE key = 'feature_enabled_at'")
            .fetch_optional(ex)
            .await?;
    let v = v.ok_or_else(|| corrupt("meta.feature_enabled_at"))?;
    Timestamp::parse(&v).map_err(|_| corrupt("meta.feature_enabled_at"))
}
