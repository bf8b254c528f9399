//! Deprecated environment variable names still honoured: when only the old name is set, the
//! argument reads it (and [`crate::start()`] logs each use as a warning).

use std::ffi::OsString;

use clap::{Arg, Command};

/// A deprecated environment variable still read in place of its current name.
#[derive(Debug, Clone, Copy)]
pub struct Alias {
    /// The old name (read only when `current` is not set).
    pub deprecated: &'static str,
    /// The name the setting has now.
    pub current: &'static str,
}

/// Points each argument whose variable is `current` at `deprecated` when only the deprecated
/// one is set (`lookup` reads the environment). Returns the command and the aliases used.
pub(crate) fn apply_aliases(
    mut cmd: Command,
    aliases: &[Alias],
    lookup: impl Fn(&str) -> Option<OsString>,
) -> (Command, Vec<Alias>) {
    let mut used = Vec::new();
    for a in aliases {
        if lookup(a.current).is_some() || lookup(a.deprecated).is_none() {
            continue;
        }
        let mut hit = false;
        let subs: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .collect();
        for (sub, id) in args_with_env(&cmd, a.current) {
            hit = true;
            cmd = match sub {
                Some(s) if subs.contains(&s) => {
                    cmd.mut_subcommand(s, |sc| sc.mut_arg(id, |arg| arg.env(a.deprecated)))
                }
                _ => cmd.mut_arg(id, |arg| arg.env(a.deprecated)),
            };
        }
        if hit {
            used.push(*a);
        }
    }
    (cmd, used)
}

/// `(subcommand, arg id)` of every argument read from `env`.
fn args_with_env(cmd: &Command, env: &str) -> Vec<(Option<String>, String)> {
    let is = |a: &Arg| a.get_env().is_some_and(|e| e == env);
    let mut out: Vec<(Option<String>, String)> = cmd
        .get_arguments()
        .filter(|a| is(a))
        .map(|a| (None, a.get_id().to_string()))
        .collect();
    for sc in cmd.get_subcommands() {
        out.extend(
            sc.get_arguments()
                .filter(|a| is(a))
                .map(|a| (Some(sc.get_name().to_owned()), a.get_id().to_string())),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use clap::CommandFactory;

    use super::*;
    use crate::flag_for_env;
    use crate::test_cli::Cli;

    #[test]
    fn a_deprecated_variable_is_read_only_when_the_current_one_is_unset() {
        let aliases = [Alias {
            deprecated: "T_OLD_PORT",
            current: "RAKUTEN_T_PORT",
        }];
        let old_only = |k: &str| (k == "T_OLD_PORT").then(|| OsString::from("7"));
        let (cmd, used) = apply_aliases(Cli::command(), &aliases, old_only);
        assert_eq!(used.len(), 1);
        assert_eq!(flag_for_env(&cmd, "T_OLD_PORT").as_deref(), Some("--port"));
        let both = |_: &str| Some(OsString::from("7"));
        let (cmd, used) = apply_aliases(Cli::command(), &aliases, both);
        assert!(used.is_empty());
        assert_eq!(
            flag_for_env(&cmd, "RAKUTEN_T_PORT").as_deref(),
            Some("--port")
        );
    }
}
