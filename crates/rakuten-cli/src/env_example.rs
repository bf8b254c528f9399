//! The test every binary runs on its `.env.example`: the file names exactly the variables its
//! `--help` lists, so an operator copying it misses no setting and keeps no stale one.

/// Checks a binary's `.env.example` against its `--help` output: every variable the help names
/// (`[env: NAME…]`) must appear in the example (as `NAME=` or commented `#NAME=`), and the example
/// must name nothing else. `ignore`: variables of test-only builds (e.g. failpoints).
///
/// # Errors
/// A message saying which file is out of date, with the missing and the stale names, for a test
/// to print as is.
pub fn check_env_example(
    example_path: &str,
    example: &str,
    help_command: &str,
    help: &str,
    ignore: &[&str],
) -> Result<(), String> {
    let in_help: std::collections::BTreeSet<String> = help
        .split("[env:")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            (!name.is_empty() && !ignore.contains(&name.as_str())).then_some(name)
        })
        .collect();
    let in_example: std::collections::BTreeSet<String> = example
        .lines()
        .filter_map(|l| {
            let l = l.trim().trim_start_matches('#').trim_start();
            let (name, _) = l.split_once('=')?;
            let ok = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            ok.then(|| name.to_owned())
        })
        .collect();
    let missing: Vec<&String> = in_help.difference(&in_example).collect();
    let stale: Vec<&String> = in_example.difference(&in_help).collect();
    if missing.is_empty() && stale.is_empty() {
        return Ok(());
    }
    let list = |v: &[&String]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        }
    };
    Err(format!(
        "{example_path} is out of date with `{help_command}`:\n  missing (add them, with a comment and the default): {}\n  stale (remove them, or add the setting back): {}",
        list(&missing),
        list(&stale)
    ))
}

/// For a binary's test: runs `bin args… --help` (empty environment, so no value leaks in) and
/// checks `example_path` against it with [`check_env_example`].
///
/// # Panics
/// The binary cannot run, the file cannot be read, or they disagree (the message lists the
/// missing and stale names).
pub fn assert_env_example_matches_help(
    bin: &str,
    args: &[&str],
    example_path: &str,
    ignore: &[&str],
) {
    let out = std::process::Command::new(bin)
        .args(args)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"));
    assert!(out.status.success(), "{bin} --help failed");
    let help = String::from_utf8_lossy(&out.stdout);
    let example = std::fs::read_to_string(example_path)
        .unwrap_or_else(|e| panic!("cannot read {example_path}: {e}"));
    let name = std::path::Path::new(bin)
        .file_name()
        .map_or_else(|| bin.to_owned(), |n| n.to_string_lossy().into_owned());
    let command = std::iter::once(name.as_str())
        .chain(args.iter().copied())
        .chain(["--help"])
        .collect::<Vec<_>>()
        .join(" ");
    if let Err(msg) = check_env_example(example_path, &example, &command, &help, ignore) {
        panic!("{msg}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_env_example_check_names_missing_and_stale_variables() {
        let help = "--port <P>\n  Port [env: RAKUTEN_T_PORT=] [default: 1]\n--x [env: RAKUTEN_T_X]\n[env: RAKUTEN_T_TEST_ONLY=]";
        let good = "# port\n#RAKUTEN_T_PORT=1\nRAKUTEN_T_X=y\n";
        assert_eq!(
            check_env_example(
                "a.env",
                good,
                "t serve --help",
                help,
                &["RAKUTEN_T_TEST_ONLY"]
            ),
            Ok(())
        );
        let bad = "#RAKUTEN_T_PORT=1\nRAKUTEN_T_OLD=1\n";
        let e = check_env_example(
            "a.env",
            bad,
            "t serve --help",
            help,
            &["RAKUTEN_T_TEST_ONLY"],
        )
        .unwrap_err();
        assert!(
            e.contains("a.env is out of date with `t serve --help`"),
            "{e}"
        );
        assert!(
            e.contains("missing (add them, with a comment and the default): RAKUTEN_T_X"),
            "{e}"
        );
        assert!(
            e.contains("stale (remove them, or add the setting back): RAKUTEN_T_OLD"),
            "{e}"
        );
    }
}
