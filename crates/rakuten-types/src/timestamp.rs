//! The canonical timestamp: UTC, millisecond precision, rendered as fixed-width RFC 3339 text
//! (`2026-07-27T09:15:00.000Z`, always 24 characters).
//!
//! Why fixed width: SQLite compares TEXT byte by byte, so only a fixed-width form makes text order
//! equal time order. `time`'s default RFC 3339 output drops or varies the fraction; we never use it
//! for storage.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// A point in time, milliseconds since the Unix epoch (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

/// A timestamp string that is not RFC 3339.
#[derive(Debug, thiserror::Error)]
#[error("not an RFC 3339 timestamp: {0:?}")]
pub struct TimestampError(pub String);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// From milliseconds since the Unix epoch.
    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// The current system time. Only [`crate::SystemClock`] should call this.
    pub fn now_utc() -> Self {
        Self::from_offset(OffsetDateTime::now_utc())
    }

    /// From a `time` value (any offset; converted to UTC, truncated to milliseconds).
    pub fn from_offset(t: OffsetDateTime) -> Self {
        Timestamp((t.unix_timestamp_nanos() / 1_000_000) as i64)
    }

    /// As a `time` value in UTC.
    pub fn to_offset(self) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp_nanos(self.0 as i128 * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }

    /// Parses any RFC 3339 timestamp (any offset, any fraction); the result is UTC milliseconds.
    ///
    /// # Errors
    /// [`TimestampError`] when the text is not RFC 3339 or out of range.
    pub fn parse(s: &str) -> Result<Self, TimestampError> {
        OffsetDateTime::parse(s, &Rfc3339)
            .map(Self::from_offset)
            .map_err(|_| TimestampError(s.chars().take(64).collect()))
    }

    /// This instant plus a duration (saturating).
    pub fn plus(self, d: Duration) -> Self {
        Timestamp(
            self.0
                .saturating_add(d.as_millis().min(i64::MAX as u128) as i64),
        )
    }

    /// This instant minus a duration (saturating).
    pub fn minus(self, d: Duration) -> Self {
        Timestamp(
            self.0
                .saturating_sub(d.as_millis().min(i64::MAX as u128) as i64),
        )
    }

    /// Seconds from `earlier` to `self`, negative when `earlier` is later.
    pub fn seconds_since(self, earlier: Timestamp) -> f64 {
        (self.0 - earlier.0) as f64 / 1000.0
    }

    /// The fixed-width text form, `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub fn to_rfc3339(self) -> String {
        let t = self.to_offset().to_offset(UtcOffset::UTC);
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.millisecond()
        )
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::DateTime,
            )))
            .description(Some("UTC, fixed width: 2026-07-27T09:15:00.000Z"))
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn renders_fixed_width_utc() {
        let t = Timestamp::parse("2026-07-27T18:15:00+09:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-07-27T09:15:00.000Z");
        assert_eq!(Timestamp::EPOCH.to_rfc3339(), "1970-01-01T00:00:00.000Z");
    }

    proptest! {
        #[test]
        fn text_order_is_time_order(a in 0i64..4_102_444_800_000, b in 0i64..4_102_444_800_000) {
            let (ta, tb) = (Timestamp::from_millis(a), Timestamp::from_millis(b));
            prop_assert_eq!(ta.to_rfc3339().len(), 24);
            prop_assert_eq!(ta.cmp(&tb), ta.to_rfc3339().cmp(&tb.to_rfc3339()));
            prop_assert_eq!(Timestamp::parse(&ta.to_rfc3339()).unwrap(), ta);
        }
    }
}
