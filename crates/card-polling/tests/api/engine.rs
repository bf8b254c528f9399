//! What the one SQL store (`src/store/sql/`) relies on from each engine: `$n` placeholders bound
//! by number (sqlx's SQLite driver included), and every migration file of the engine's folder
//! embedded and applied.

use sha2::{Digest, Sha384};

use super::helpers::*;

#[super::lane]
#[tokio::test]
async fn numbered_placeholders_bind_by_number_reused_and_out_of_order() {
    let app = spawn_app().await;
    // `$1` used twice, `$2` before `$1`: the values follow the numbers, not the order of use.
    let s: String = sqlx::query_scalar("SELECT $2 || '-' || $1 || '-' || $1")
        .bind("first")
        .bind("second")
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    assert_eq!(s, "second-first-first");
    // Numbers of two types in one statement, the higher first.
    let (n, t): (i64, String) = sqlx::query_as("SELECT CAST($2 AS BIGINT) * 2, CAST($1 AS TEXT)")
        .bind("x")
        .bind(21_i64)
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    assert_eq!((n, t.as_str()), (42, "x"));
}

#[super::lane]
#[tokio::test]
async fn every_migration_file_on_disk_is_embedded_and_applied() {
    let app = spawn_app().await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(super::MIGRATIONS_DIR);
    let mut files: Vec<(i64, String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            let (version, description) = name.split_once('_').expect("NNNN_description.sql");
            let sql = std::fs::read_to_string(&path).unwrap();
            let version = version.parse().expect("numbered file");
            // A released migration whose comments were reworded is applied with the checksum
            // it was released with (D-released-migrations-pinned).
            let checksum = match super::RELEASED.iter().find(|r| r.version == version) {
                Some(r) => hex_bytes(r.checksum),
                None => Sha384::digest(sql).to_vec(),
            };
            (version, description.replace('_', " "), checksum)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no migrations in {}", dir.display());
    let applied: Vec<(i64, String, bool, Vec<u8>)> = sqlx::query_as(
        "SELECT version, description, success, checksum FROM _sqlx_migrations ORDER BY version",
    )
    .fetch_all(app.db.pool())
    .await
    .unwrap();
    let applied: Vec<_> = applied
        .into_iter()
        .map(|(v, d, ok, sum)| {
            assert!(ok, "migration {v} did not succeed");
            (v, d, sum)
        })
        .collect();
    assert_eq!(applied, files, "the folder and the applied migrations differ");
}

/// The bytes of a lowercase hex string.
fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}
