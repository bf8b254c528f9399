//! Released migrations keep the checksum every database recorded for them (D-released-migrations-pinned).
//!
//! sqlx stores the SHA-384 of a migration's text when it applies it and refuses to start when the
//! embedded text no longer has that checksum. A released migration's statements never change, but
//! its comments may be reworded later; such a migration is listed as [`Released`]: the migrator
//! carries the checksum of the text as released ([`pin_released`]), and a test of each crate
//! ([`check_released`]) holds the file's statements — its lines without the `--` comment lines — to
//! the statements as released, so only comments can have changed.

use sqlx::migrate::Migration;

/// A migration whose file's comments differ from the text databases applied.
#[derive(Debug, Clone, Copy)]
pub struct Released {
    /// The migration's version.
    pub version: i64,
    /// sqlx's checksum (SHA-384, lowercase hex) of the text as released.
    pub checksum: &'static str,
    /// The checksum of its statements as released: the text without its `--` comment lines.
    pub statements: &'static str,
}

/// Gives each listed migration the checksum of its released text.
///
/// # Panics
/// When a listed checksum is not 96 hex digits (a constant of the binary, checked by its tests).
pub fn pin_released(mut migrations: Vec<Migration>, released: &[Released]) -> Vec<Migration> {
    for m in &mut migrations {
        if let Some(r) = released.iter().find(|r| r.version == m.version) {
            m.checksum = unhex(r.checksum).into();
        }
    }
    migrations
}

/// Checks that each listed migration's statements are the ones released: `Err` names the version
/// whose statements (not only comments) changed, or a listed version that does not exist.
pub fn check_released(migrations: &[Migration], released: &[Released]) -> Result<(), String> {
    for r in released {
        let m = migrations
            .iter()
            .find(|m| m.version == r.version)
            .ok_or_else(|| format!("released migration {} is not embedded", r.version))?;
        let now = statements_checksum(m.sql.as_str());
        if now != r.statements {
            return Err(format!(
                "migration {} changed its statements after release (statements checksum {now}, \
                 released {}); write a new migration instead",
                r.version, r.statements
            ));
        }
    }
    Ok(())
}

/// The hex checksum of `sql` without its `--` comment lines, as [`Released::statements`] holds it.
pub fn statements_checksum(sql: &str) -> String {
    let statements: Vec<&str> = sql
        .split('\n')
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect();
    hex(&checksum(&statements.join("\n")))
}

fn checksum(sql: &str) -> Vec<u8> {
    use sqlx::SqlSafeStr;
    // sqlx's own checksum, so the figure is the one a database records.
    Migration::new(
        0,
        "".into(),
        sqlx::migrate::MigrationType::Simple,
        sqlx::AssertSqlSafe(sql.to_owned()).into_sql_str(),
        false,
    )
    .checksum
    .into_owned()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len() == 96, "a SHA-384 checksum is 96 hex digits");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digits"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn migration(version: i64, sql: &'static str) -> Migration {
        use sqlx::SqlSafeStr;
        Migration::new(
            version,
            "t".into(),
            sqlx::migrate::MigrationType::Simple,
            sqlx::AssertSqlSafe(sql).into_sql_str(),
            false,
        )
    }

    #[test]
    fn a_reworded_comment_keeps_the_released_checksum() {
        let released_text = "-- old words\nCREATE TABLE t (a INT);\n";
        let released = Released {
            version: 1,
            checksum: Box::leak(hex(&checksum(released_text)).into_boxed_str()),
            statements: Box::leak(statements_checksum(released_text).into_boxed_str()),
        };
        let today = vec![migration(1, "-- new words\nCREATE TABLE t (a INT);\n")];
        assert!(check_released(&today, &[released]).is_ok());
        let pinned = pin_released(today, &[released]);
        assert_eq!(hex(&pinned[0].checksum), released.checksum);
    }

    #[test]
    fn a_changed_statement_is_refused() {
        let released_text = "-- words\nCREATE TABLE t (a INT);\n";
        let released = Released {
            version: 1,
            checksum: Box::leak(hex(&checksum(released_text)).into_boxed_str()),
            statements: Box::leak(statements_checksum(released_text).into_boxed_str()),
        };
        let today = vec![migration(1, "-- words\nCREATE TABLE t (a BIGINT);\n")];
        let err = check_released(&today, &[released]).unwrap_err();
        assert!(err.contains("migration 1 changed its statements"), "{err}");
    }
}
