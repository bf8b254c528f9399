//! A clap value parser for secret settings (tokens, token lists, URLs with passwords).
//!
//! clap formats a value parser's `String` error as `invalid value '<value>' for '--flag'`, which
//! printed the secret itself to stderr (and so to the journal under systemd). [`secret`] wraps a
//! parse function and turns its error into a raw clap error that names the flag and its
//! environment variable and says what is wrong, but never quotes the value or any part of it.
//! The process still exits with code 2 (clap's usage error).

use std::ffi::OsStr;
use std::fmt::Display;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{Arg, Command};

/// The parser built by [`secret`]; see the module documentation.
#[derive(Clone, Copy)]
pub struct SecretParser<F>(F);

/// Wraps `parse` (`&str -> Result<T, E>`) so that a refused value yields
/// `error: invalid setting --flag / ENV_VAR: <what is wrong>` without the value. `E`'s `Display` must itself
/// never quote the value.
pub fn secret<T, E, F>(parse: F) -> SecretParser<F>
where
    F: Fn(&str) -> Result<T, E> + Clone + Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    E: Display,
{
    SecretParser(parse)
}

/// `--flag / ENV_VAR` for the message (the form of [`crate::invalid_setting_message`]),
/// `the setting` if clap gave no argument.
pub(crate) fn describe(arg: Option<&Arg>) -> String {
    let Some(arg) = arg else {
        return "the setting".to_owned();
    };
    let flag = match arg.get_long() {
        Some(long) => format!("--{long}"),
        None => arg.get_id().to_string(),
    };
    match arg.get_env() {
        Some(env) => format!("{flag} / {}", env.to_string_lossy()),
        None => flag,
    }
}

impl<T, E, F> TypedValueParser for SecretParser<F>
where
    F: Fn(&str) -> Result<T, E> + Clone + Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    E: Display,
{
    type Value = T;

    fn parse_ref(
        &self,
        _cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let what = describe(arg);
        // A raw error is printed as `error: <message>` only: no value, no usage block that
        // could be mistaken for part of the message.
        let refuse = |msg: String| {
            clap::Error::raw(
                ErrorKind::ValueValidation,
                format!("invalid setting {what}: {msg}\n"),
            )
        };
        let s = value
            .to_str()
            .ok_or_else(|| refuse("the value is not valid UTF-8".to_owned()))?;
        (self.0)(s).map_err(|e| refuse(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn min16(s: &str) -> Result<String, String> {
        if s.len() < 16 {
            return Err("must be at least 16 characters".into());
        }
        Ok(s.to_owned())
    }

    #[derive(Parser, Debug)]
    struct Cli {
        #[arg(long, env = "SECRET_ARG_TEST_TOKEN", hide_env_values = true, value_parser = secret(min16))]
        token: String,
    }

    #[test]
    fn refused_secret_is_not_echoed() {
        let err = Cli::try_parse_from(["x", "--token", "sh0rtS3CRET"]).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("sh0rtS3CRET"), "{text}");
        assert!(!text.contains("S3CRET"), "{text}");
        assert!(text.contains("error: invalid setting --token / SECRET_ARG_TEST_TOKEN: must be at least 16 characters"), "{text}");
        assert_eq!(err.exit_code(), 2);
        let ok = Cli::try_parse_from(["x", "--token", "0123456789abcdefXYZ"]).unwrap();
        assert_eq!(ok.token, "0123456789abcdefXYZ");
    }
}
