//! TEST-ONLY crash injection (`RAKUTEN_WORKER_FAILPOINT`): the process calls
//! [`std::process::abort`] at a named step boundary, so crash tests can run the real binary, kill
//! it exactly there, and restart it. Empty = off.
//!
//! Compiled in only with the cargo feature `failpoints` (the tests and the chaos harness turn it
//! on): without it the setting does not exist and [`Failpoint::hit`] does nothing, so a release
//! binary cannot be made to abort this way.
//!
//! | value | where the process dies |
//! |---|---|
//! | `before_submit` | submit intent durably pending, lease renewed, nothing sent to the site |
//! | `after_submit` | the site answered the submit; nothing about it recorded locally yet |
//! | `before_report[:state]` | the step is journaled (evidence + outbox row), report not sent |
//! | `after_report[:state]` | the report was acknowledged by the gateway |
//!
//! `state` (an order state, default `ordered`) picks which report the report failpoints hit.

use rakuten_types::OrderState;

/// A named crash point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Before the site submit call.
    BeforeSubmit,
    /// After the site submit call returned.
    AfterSubmit,
    /// Before sending the report of `state`.
    BeforeReport(OrderState),
    /// After the report of `state` was acknowledged.
    AfterReport(OrderState),
}

/// The configured crash point, if any.
#[derive(Debug, Clone, Copy, Default)]
pub struct Failpoint(
    #[cfg_attr(
        not(feature = "failpoints"),
        allow(dead_code, reason = "read only by `hit` with the feature")
    )]
    Option<Point>,
);

impl Failpoint {
    /// Parses the setting.
    ///
    /// # Errors
    /// An unknown name or state.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(Failpoint(None));
        }
        let (name, state) = match s.split_once(':') {
            Some((n, st)) => (n, st.parse::<OrderState>().map_err(|e| e.to_string())?),
            None => (s, OrderState::Ordered),
        };
        let p = match name {
            "before_submit" => Point::BeforeSubmit,
            "after_submit" => Point::AfterSubmit,
            "before_report" => Point::BeforeReport(state),
            "after_report" => Point::AfterReport(state),
            other => {
                return Err(format!(
                    "unknown failpoint {other:?}; expected before_submit, after_submit, before_report[:state], after_report[:state]"
                ));
            }
        };
        Ok(Failpoint(Some(p)))
    }

    /// Aborts the process when `p` is the configured point (feature `failpoints` only; without
    /// it, nothing).
    pub fn hit(&self, p: Point) {
        #[cfg(feature = "failpoints")]
        if self.0 == Some(p) {
            eprintln!("RAKUTEN_WORKER_FAILPOINT: aborting at {p:?}");
            std::process::abort();
        }
        #[cfg(not(feature = "failpoints"))]
        let _ = p;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_point_and_refuses_unknown_names() {
        assert_eq!(Failpoint::parse("").unwrap().0, None);
        assert_eq!(
            Failpoint::parse("before_submit").unwrap().0,
            Some(Point::BeforeSubmit)
        );
        assert_eq!(
            Failpoint::parse("before_report").unwrap().0,
            Some(Point::BeforeReport(OrderState::Ordered))
        );
        assert_eq!(
            Failpoint::parse("after_report:paid").unwrap().0,
            Some(Point::AfterReport(OrderState::Paid))
        );
        assert!(Failpoint::parse("during_lunch").is_err());
        assert!(Failpoint::parse("after_report:eaten").is_err());
    }
}
