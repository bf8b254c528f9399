//! The one implementation ([`super`]) compiled for PostgreSQL, one transaction per transition.

pub(crate) type Db = sqlx::Postgres;
pub(crate) type Conn = sqlx::PgConnection;
pub(crate) type Pool = sqlx::PgPool;
pub(crate) type Store = crate::store::postgres::PgStore;
super::one_implementation!();
