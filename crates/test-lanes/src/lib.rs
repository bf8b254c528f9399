//! Test lanes (D-test-lanes). `cargo test --workspace` runs every test that needs only the Rust
//! toolchain; a test that needs more — a service, a browser, libfaketime, or minutes of running — belongs to a
//! lane and is ignored, with the way to turn it on as the reason, unless `RAKUTEN_TEST_LANES`
//! names its lane:
//!
//! | lane | what its tests need |
//! |---|---|
//! | `postgres` | PostgreSQL at `DATABASE_URL_TEST` (default `postgres://postgres@127.0.0.1:5432/test`) |
//! | `redis` | Redis at `REDIS_URL_TEST` (default `redis://127.0.0.1:6379/`) |
//! | `browser` | Debian's `chromium` and `chromium-driver` under `/usr/bin` |
//! | `faketime` | Debian's `faketime` (libfaketime's preload library) |
//! | `chaos` | a few minutes: the fault-injection harness against the real binaries |
//! | `soak` | long runs under load |
//!
//! `RAKUTEN_TEST_LANES` is a comma-separated list of lanes, or `all`; a name that is no lane
//! stops the build of the tests (a typo must not quietly run nothing). A test whose lanes are all
//! on runs, and fails loudly when its service does not answer, as it always has.
//!
//! Usage, above the test attribute: `#[test_util::lane(postgres)]` (several lanes:
//! `#[test_util::lane(postgres, faketime)]`, ignored unless every one is on). A file compiled once
//! per storage engine names `#[super::lane]`, which its engine module re-exports: [`lane`] for
//! SQLite, [`postgres_lane`] (the postgres lane plus those named) for PostgreSQL.
//!
//! An attribute rather than a `cfg` set by build scripts because: the lanes are read where the
//! test is compiled and only there — the expansion reads the variable with `option_env!`, so
//! rustc records it among the test target's inputs and cargo recompiles only the test targets
//! when it changes (a build script's `cfg` would rebuild the library and everything that
//! depends on it); every test is compiled whatever the lanes, so `cargo clippy` sees lane code
//! on any machine; and a file compiled once per engine takes its engine's lane from the module
//! it is compiled into, which no `cfg` can tell apart.

use proc_macro::{Delimiter, TokenStream, TokenTree};

/// Every lane, in the order the messages name them.
const LANES: [&str; 6] = ["postgres", "redis", "browser", "faketime", "chaos", "soak"];

/// The variable naming the lanes that run.
const VAR: &str = "RAKUTEN_TEST_LANES";

/// Marks a test as needing the lanes named (`#[lane(postgres)]`, `#[lane(postgres, faketime)]`):
/// ignored unless `RAKUTEN_TEST_LANES` turns all of them on. Goes above `#[test]` /
/// `#[tokio::test]`. With no lane named it changes nothing (a scenario file's attribute in the
/// SQLite engine module).
#[proc_macro_attribute]
pub fn lane(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(&[], attr, item)
}

/// [`lane`] with the `postgres` lane added to those named: the attribute of a scenario file
/// compiled into a PostgreSQL engine module (re-exported there as `lane`).
#[proc_macro_attribute]
pub fn postgres_lane(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(&["postgres"], attr, item)
}

fn expand(base: &[&str], attr: TokenStream, item: TokenStream) -> TokenStream {
    let decided = lane_names(attr).and_then(|named| {
        check_item(&item)?;
        let mut needed: Vec<String> = base.iter().map(|s| (*s).to_owned()).collect();
        needed.extend(named);
        let on = lanes_on(std::env::var(VAR).ok().as_deref())?;
        Ok(ignore_reason(&needed, &on))
    });
    let mut out = TokenStream::new();
    match decided {
        Ok(Some(reason)) => out.extend(parse(&format!("#[ignore = {reason:?}]"))),
        Ok(None) => {}
        Err(e) => out.extend(parse(&format!("::core::compile_error!({e:?});"))),
    }
    out.extend(item);
    // Makes `RAKUTEN_TEST_LANES` an input of this compilation, so that cargo recompiles the test
    // target when it changes (a proc macro's own reads of the environment are not tracked).
    out.extend(parse(&format!(
        "const _: ::core::option::Option<&str> = ::core::option_env!({VAR:?});"
    )));
    out
}

fn parse(code: &str) -> TokenStream {
    code.parse().expect("generated code parses")
}

/// The lanes an attribute's arguments name: identifiers separated by commas, each a lane.
fn lane_names(attr: TokenStream) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut want_name = true;
    for t in attr {
        match (&t, want_name) {
            (TokenTree::Ident(i), true) => {
                let name = i.to_string();
                if !LANES.contains(&name.as_str()) {
                    return Err(format!(
                        "`{name}` is no test lane; the lanes: {}",
                        LANES.join(", ")
                    ));
                }
                names.push(name);
                want_name = false;
            }
            (TokenTree::Punct(p), false) if p.as_char() == ',' => want_name = true,
            _ => {
                return Err(format!(
                    "expected lane names separated by commas, as in #[lane(postgres, faketime)], \
                     found `{t}`"
                ));
            }
        }
    }
    Ok(names)
}

/// Refuses an item that is not a test yet: no `#[test]` / `#[tokio::test]` below the lane
/// attribute. Also catches the attribute put below a plain `#[test]`, which has then already
/// been expanded and would never see the `#[ignore]`.
fn check_item(item: &TokenStream) -> Result<(), String> {
    let mut tokens = item.clone().into_iter().peekable();
    while let Some(t) = tokens.next() {
        let TokenTree::Punct(p) = &t else { continue };
        if p.as_char() != '#' {
            continue;
        }
        let Some(TokenTree::Group(g)) = tokens.peek() else {
            continue;
        };
        if g.delimiter() != Delimiter::Bracket {
            continue;
        }
        let last_ident = g
            .stream()
            .into_iter()
            .take_while(|t| match t {
                TokenTree::Ident(_) => true,
                TokenTree::Punct(p) => p.as_char() == ':',
                _ => false,
            })
            .filter_map(|t| match t {
                TokenTree::Ident(i) => Some(i.to_string()),
                _ => None,
            })
            .last();
        if last_ident.as_deref() == Some("test") {
            return Ok(());
        }
        tokens.next();
    }
    Err("a lane attribute goes on a test, above its #[test] or #[tokio::test]".into())
}

/// The lanes `value` (the variable's value, if set) turns on.
fn lanes_on(value: Option<&str>) -> Result<Vec<&'static str>, String> {
    let mut on = Vec::new();
    for name in value.unwrap_or("").split(',').map(str::trim) {
        match name {
            "" => {}
            "all" => on.extend(LANES),
            _ => match LANES.iter().find(|l| **l == name) {
                Some(l) => on.push(*l),
                None => {
                    return Err(format!(
                        "{VAR} names `{name}`, which is no test lane; the lanes: {} (or all)",
                        LANES.join(", ")
                    ));
                }
            },
        }
    }
    Ok(on)
}

/// The `#[ignore]` reason of a test needing `needed` while `on` run, or `None` when it runs:
/// the lanes it needs and the setting that runs it.
fn ignore_reason(needed: &[String], on: &[&str]) -> Option<String> {
    let needed: Vec<&str> = LANES
        .iter()
        .copied()
        .filter(|l| needed.iter().any(|n| n == l))
        .collect();
    if needed.iter().all(|n| on.contains(n)) {
        return None;
    }
    let noun = if needed.len() == 1 { "lane" } else { "lanes" };
    Some(format!(
        "{noun} {}: {VAR}={}",
        needed.join(", "),
        needed.join(",")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_variable_names_lanes_separated_by_commas_or_all() {
        assert_eq!(lanes_on(None).unwrap(), Vec::<&str>::new());
        assert_eq!(lanes_on(Some("")).unwrap(), Vec::<&str>::new());
        assert_eq!(
            lanes_on(Some("postgres, redis,")).unwrap(),
            ["postgres", "redis"]
        );
        assert_eq!(lanes_on(Some("all")).unwrap(), LANES);
    }

    #[test]
    fn a_name_that_is_no_lane_is_refused_with_the_lanes() {
        let e = lanes_on(Some("postgres,postgress")).unwrap_err();
        assert!(e.contains("`postgress`"), "{e}");
        assert!(
            e.contains("postgres, redis, browser, faketime, chaos, soak"),
            "{e}"
        );
    }

    #[test]
    fn a_test_runs_only_when_every_lane_it_needs_is_on() {
        let pg_ft = owned(&["faketime", "postgres"]);
        assert_eq!(ignore_reason(&pg_ft, &["postgres", "faketime"]), None);
        assert_eq!(
            ignore_reason(&pg_ft, &["postgres"]).unwrap(),
            "lanes postgres, faketime: RAKUTEN_TEST_LANES=postgres,faketime"
        );
        assert_eq!(
            ignore_reason(&owned(&["postgres"]), &[]).unwrap(),
            "lane postgres: RAKUTEN_TEST_LANES=postgres"
        );
        assert_eq!(ignore_reason(&[], &[]), None);
    }
}
