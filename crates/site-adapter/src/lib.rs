//! Site adapters for the simulated shop: the worker's site adapter protocol
//! (`trading_worker::site::adapter`) served over shop-sim, either through plain HTTP (the `sim`
//! seam) or through headless Chromium driven over WebDriver ([`browser::BrowserSite`]), which
//! takes a screenshot at every step. They prove the protocol and the conformance kit; the
//! adapter for the real site is written the same way (see `crates/trading-worker/ADAPTERS.md`).
//!
//! Layout:
//! - [`driver`]: chromedriver + one Chromium session: port choice, flags, clean-up.
//! - [`browser`]: [`browser::BrowserSite`], the shop's pages worked in the browser.
//! - [`serve`]: an adapter on a loopback listener ([`serve::spawn`]).

pub mod browser;
pub mod driver;
pub mod serve;
