//! The operator console's shared parts, used by order-gateway and card-polling, which
//! each serve their own pages at `/console`.
//!
//! Layout:
//! - [`session`]: the signed session cookie (HttpOnly, SameSite=Strict, Secure behind TLS) that a
//!   sign-in with a token sets, and the CSRF token it carries for every state-changing form.
//! - [`layout`]: the page frame (header, navigation, who is signed in, sign-out), security headers
//!   (a `'self'`-only Content-Security-Policy), the embedded stylesheet and script, and small
//!   rendering helpers (timestamps, ages, status badges, pagers, reason forms).
//! - [`signed`]: the glue each service's console shares: the signed-in person as an extractor
//!   ([`Signed`]), the frame drawn for them, sign-in, sign-out and the CSRF refusal; a service
//!   implements [`ConsoleApp`] once on its state.
//! - [`form`]: the form extractor whose refusals (too large, not a form, a field missing) are
//!   console pages.
//! - `webdriver` (feature `webdriver`, tests only): chromedriver + headless Chromium for the browser
//!   tests, with port bind-and-retry, bounded waits and screenshots.
//!
//! Everything is embedded in the binary: no CDN, no JavaScript build chain; the one script only
//! asks for confirmation before an action.

pub mod form;
pub mod layout;
pub mod session;
pub mod signed;
#[cfg(feature = "webdriver")]
pub mod webdriver;

pub use form::ConsoleForm;
pub use layout::{Chrome, Notice};
pub use session::{ConsoleKey, Session};
pub use signed::{ConsoleApp, Person, SignInRefused, Signed, Site};
