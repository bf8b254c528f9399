//! clap value parsers for numeric settings whose refusal says what the setting takes.
//!
//! clap's own integer and float parsers refuse `RAKUTEN_POLL_SHARDS=lots` with Rust's
//! `invalid digit found in string` (or `invalid float literal`), which names neither the variable
//! nor what it takes. [`whole`] and [`seconds`] refuse in the form of every other bad setting:
//! `error: invalid setting --shards / RAKUTEN_POLL_SHARDS: "lots" is not a whole number; it takes
//! a whole number from 1 to 1024`, exit code 2 (D-setting-refusal-one-line).

use std::ffi::OsStr;
use std::fmt::Display;
use std::ops::RangeInclusive;
use std::str::FromStr;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{Arg, Command};

use crate::secret_arg::describe;

/// The parser built by [`whole`].
#[derive(Clone)]
pub struct WholeParser<T>(RangeInclusive<T>);

/// A whole number in `range` (both ends included), e.g. `whole::<u32>(1..=1024)`; the refusal
/// names the flag, the variable, the value and the range. Name the type: the field's type must
/// be `T`, and an untyped literal range would be `i32`.
pub fn whole<T>(range: RangeInclusive<T>) -> WholeParser<T>
where
    T: FromStr + PartialOrd + Display + Clone + Send + Sync + 'static,
{
    WholeParser(range)
}

/// A number of seconds, decimals allowed (`0.5`), e.g. `value_parser = seconds()`; the refusal
/// names the flag, the variable and the value. Which values are in range is for the settings'
/// own validation to say (it also checks values set in code).
pub fn seconds() -> SecondsParser {
    SecondsParser
}

/// `s` as a finite decimal number, or what is wrong with it.
fn parse_seconds(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| {
            format!("{s:?} is not a number; it takes a number of seconds (decimals allowed: 2.5)")
        })
}

/// A refusal in the form of [`crate::invalid_setting_message`], printed by clap as is.
fn refuse(arg: Option<&Arg>, reason: impl Display) -> clap::Error {
    clap::Error::raw(
        ErrorKind::ValueValidation,
        format!("invalid setting {}: {reason}\n", describe(arg)),
    )
}

impl<T> TypedValueParser for WholeParser<T>
where
    T: FromStr + PartialOrd + Display + Clone + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(
        &self,
        _cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let (lo, hi) = (self.0.start(), self.0.end());
        let takes = format!("it takes a whole number from {lo} to {hi}");
        let raw = value.to_string_lossy();
        let Some(n) = raw.trim().parse::<T>().ok() else {
            // Digits that do not fit the type are out of range, not "no whole number".
            let digits = raw.trim().trim_start_matches(['-', '+']);
            let what = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                "is out of range"
            } else {
                "is not a whole number"
            };
            return Err(refuse(arg, format!("{raw:?} {what}; {takes}")));
        };
        if !self.0.contains(&n) {
            return Err(refuse(arg, format!("{raw:?} is out of range; {takes}")));
        }
        Ok(n)
    }
}

/// The parser built by [`seconds`].
#[derive(Clone, Copy)]
pub struct SecondsParser;

impl TypedValueParser for SecondsParser {
    type Value = f64;

    fn parse_ref(
        &self,
        _cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<f64, clap::Error> {
        parse_seconds(&value.to_string_lossy()).map_err(|reason| refuse(arg, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[arg(long, env = "NUMBER_TEST_SHARDS", default_value_t = 16, value_parser = whole::<u32>(1..=1024))]
        shards: u32,
        #[arg(long, env = "NUMBER_TEST_TTL", default_value_t = 300.0, value_parser = seconds())]
        ttl: f64,
    }

    fn refusal(args: &[&str]) -> String {
        let e = Cli::try_parse_from(args).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        e.to_string()
    }

    #[test]
    fn a_bad_number_names_the_setting_the_value_and_what_it_takes() {
        assert_eq!(
            refusal(&["x", "--shards", "lots"]),
            "error: invalid setting --shards / NUMBER_TEST_SHARDS: \"lots\" is not a whole number; \
             it takes a whole number from 1 to 1024\n"
        );
        for out in ["0", "2000", "99999999999999999999", "-1"] {
            let text = refusal(&["x", &format!("--shards={out}")]);
            assert!(
                text.contains(&format!(
                    "{out:?} is out of range; it takes a whole number from 1 to 1024"
                )),
                "{text}"
            );
        }
        assert_eq!(
            refusal(&["x", "--ttl", "abc"]),
            "error: invalid setting --ttl / NUMBER_TEST_TTL: \"abc\" is not a number; it takes a \
             number of seconds (decimals allowed: 2.5)\n"
        );
        assert!(refusal(&["x", "--ttl", "NaN"]).contains("\"NaN\" is not a number"));
        let ok = Cli::try_parse_from(["x", "--shards", " 1024", "--ttl", "0.5"]).unwrap();
        assert_eq!((ok.shards, ok.ttl), (1024, 0.5));
    }
}
