//! A simulated shop for the trading worker's tests and the demo: items, cart, confirm page,
//! order submission, payment (optionally with a 3-D Secure challenge), order list and order detail
//! with a delivery stage, and the scraper's `POST /api/item_detail`. Every order submission is
//! logged so that tests can count them, and faults can be injected by configuration.
//!
//! Layout:
//! - [`config`]: command line, [`ShopConfig`], fault switches ([`Faults`]).
//! - [`catalog`]: the seed items.
//! - [`store`]: in-memory state and the shop's rules (cart, confirm, submit, pay, orders).
//! - [`page`]: HTML pages with the state embedded as JSON (`<script id="__INITIAL_STATE__">`).
//! - [`html`]: the visible page a person or the browser adapter works: navigation, tables, links,
//!   forms and buttons (every `POST` route also takes its form, `application/x-www-form-urlencoded`).
//! - [`routes`]: the HTTP routes (shop pages, `/api/item_detail`, `/admin/*`).
//! - [`app`]: [`Application::build`] and [`spawn`].
//!
//! Routes (account pages need `Cookie: session=<token>`, else they answer the login page):
//!
//! | route | what |
//! |---|---|
//! | `POST /api/item_detail` `{url}` | envelope with the item's `purchase` block |
//! | `GET /` | item list |
//! | `GET /items/{code}` | item page (`{code}` may also be the numeric item id) |
//! | `GET /cart`, `POST /cart/add` `{item_id, variant_id?, quantity}`, `POST /cart/clear` | cart |
//! | `GET /order/confirm` | payable amount, shipping, payment method, pay deadline |
//! | `POST /order/submit` `{expected_payable_yen, note?}` | places the order |
//! | `POST /orders/{n}/pay` | pays: `paid`, `challenge_required` or `awaiting_payment` |
//! | `GET /orders?page=N` | order list, newest first (`orderListData`; each order with its remark `note`) |
//! | `GET /orders/{n}` | order detail with `stage_label` and the remark `note` |
//! | `GET /admin/submissions` | every submission (JSON) |
//! | `GET`/`POST /admin/faults` | read / change faults (incl. `fail_route: {path, times}`: 503 n times) |
//! | `GET /admin/orders`, `POST /admin/orders/{n}/status` `{status}` | inspect / move orders |
//! | `POST /admin/orders/seed` `{orders: [{order_date, item_code?, status?}]}` | add past orders (paging tests) |

pub mod app;
pub mod catalog;
pub mod config;
pub mod html;
pub mod page;
pub mod routes;
pub mod store;

pub use app::{Application, SpawnedShop, spawn};
pub use config::{FailRoute, Faults, PaymentMethod, ShopConfig};
pub use store::{SeedOrder, SimOrderStatus, Submission};
