//! How the one SQL implementation (`store/sql/`) is compiled once per engine.

/// Compiles the one SQL implementation (`store/sql/`) in the engine module it is invoked in, for
/// sqlx driver `$db` and the `dialect` module of the same name (D-one-sql-store-per-engine): it names `Db` and
/// `dialect` there and loads `sql/mod.rs` as that module's `sql` (once per engine, hence the
/// `duplicate_mod` allowance).
macro_rules! one_implementation {
    ($db:ty, $engine:ident) => {
        /// The sqlx driver `store/sql/` is compiled for in this module.
        pub(crate) type Db = $db;
        pub(crate) use crate::store::dialect::$engine as dialect;

        #[allow(clippy::duplicate_mod)]
        #[path = "sql/mod.rs"]
        mod sql;
    };
}
pub(crate) use one_implementation;
