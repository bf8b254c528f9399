//! The one implementation ([`super`]) compiled for SQLite, run by the group-commit writer.

pub(crate) type Db = sqlx::Sqlite;
pub(crate) type Conn = sqlx::SqliteConnection;
pub(crate) type Pool = sqlx::SqlitePool;
pub(crate) type Store = crate::store::sqlite::SqliteStore;
super::one_implementation!();
