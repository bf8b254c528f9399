//! Row decoding helpers shared by the driver's files. The decoders themselves are
//! database-independent and live in [`crate::store::common`]; only this driver's SQL is here.

use sqlx::PgExecutor;

use rakuten_types::Timestamp;

use crate::store::StoreResult;
use crate::store::common::corrupt;
pub(crate) use crate::store::common::{item_view, ts};

/// The stored go-live instant of the priority feature.
pub(crate) async fn feature_enabled_at<'e>(ex: impl PgExecutor<'e>) -> StoreResult<Timestamp> {
    let v: Option<String> =
        sqlx::query_scalar("SELECT value FROM meta WHERE key = 'feature_enabled_at'")
            .fetch_optional(ex)
            .await?;
    let v = v.ok_or_else(|| corrupt("meta.feature_enabled_at"))?;
    Timestamp::parse(&v).map_err(|_| corrupt("meta.feature_enabled_at"))
}

/// The select list for [`item_view`] (table alias `i`).
pub(crate) const ITEM_COLUMNS: &str = "i.*, \
    (SELECT string_agg(s.source, chr(31) ORDER BY s.source COLLATE \"C\") FROM priority_item_sources s WHERE s.item_id = i.id) AS sources, \
    (SELECT string_agg(c.ancestor_id, chr(31) ORDER BY c.depth DESC) FROM shop_closure c WHERE c.descendant_id = i.shop_id) AS chain";
