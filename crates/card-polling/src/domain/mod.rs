//! The host domain the priority queue needs: shops in an agent
//! hierarchy, accounts and roles, cards, devices and bindings, package orders and usage records,
//! and the configured polling task types.

pub mod access;
pub mod account;
pub mod asset;
pub mod key;
pub mod package;
pub mod shop;
pub mod task_type;

pub use access::{Action, Denied, authorize};
pub use account::{Account, Role, Scope, TokenHash};
pub use asset::{AssetRef, AssetType};
pub use key::parse_key;
pub use package::{OrderStatus, PackageKind, PaymentStatus, UsageStatus};
pub use shop::Shop;
pub use task_type::{TaskType, TaskTypes};
