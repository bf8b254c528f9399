//! The operator console at `/console`, served by card-polling itself.
//!
//! | path | page | who |
//! |---|---|---|
//! | `GET /console` | queue depths per task type and lane, the last cycle's decisions | `ReadQueues` (super_admin, platform); others: links only |
//! | `GET /console/items` | items, filters: status, task type, ICCID, shop (and its sub-shops) | `ReadItems`, scoped |
//! | `GET /console/exceptions` | failed, expired, attempts at the limit, with a failure reason | `ReadItems`, scoped |
//! | `GET /console/items/{id}` | the item, its audit trail and carrier-call log, close/retrigger | `ReadItems`, scoped |
//! | `POST /console/items/{id}/close`, `…/retrigger` | with a reason | `Close`, `Enqueue`, scoped |
//! | `GET/POST /console/sign-in`, `POST /console/sign-out` | session | any account but enterprise |
//!
//! The session extractor, the frame, sign-in and sign-out are the shared [`web_console::signed`];
//! this file says what they need about accounts ([`ConsoleApp`] on the state). Sign-in takes an
//! account token (or the bootstrap admin token). The session carries the account id and a keyed
//! fingerprint of that token ([`CredentialKey`]); every request reads the account as it is now and
//! ends the session when the token that opened it no longer signs it in (replaced, revoked, or a
//! changed admin token). Every page asks the API's rule ([`authorize`], [`AccountRules::allowed`])
//! for the same action as its API route, and reads in the scope it answers, pushed down into SQL by
//! the store: an agent sees exactly its shop tree, an item outside it answers exactly like a
//! missing one, and an account without the manual trigger permission reads no item here either.

pub mod credential_key;
pub mod pages;

pub use credential_key::CredentialKey;
use credential_key::hex;

use axum::Router;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use axum::routing::MethodRouter;
use rakuten_types::Timestamp;
use serde::{Deserialize, Serialize};
use web_console::layout;
use web_console::signed::{self, ConsoleApp, Person, SignInRefused, Site};
use web_console::{ConsoleKey, Signed as SignedAs};

use crate::domain::{Account, Action, Role, Scope, TokenHash, authorize};
use crate::state::AppState;

/// The service name in the console's frame.
pub const SERVICE: &str = "card-polling";

const NAV: &[(&str, &str)] = &[
    ("/console", "Overview"),
    ("/console/items", "Items"),
    ("/console/exceptions", "Exceptions"),
];

/// The console's pages and forms (method, path, handler): the router is built from this list,
/// and [`crate::http::served_routes`] lists it.
pub(crate) fn routes() -> Vec<(Method, &'static str, MethodRouter<AppState>)> {
    use axum::routing::MethodFilter as M;
    use axum::routing::on;
    vec![
        (Method::GET, "/console", on(M::GET, pages::overview)),
        (
            Method::GET,
            "/console/sign-in",
            on(M::GET, signed::sign_in_form::<AppState>),
        ),
        (
            Method::POST,
            "/console/sign-in",
            on(M::POST, signed::sign_in::<AppState>),
        ),
        (
            Method::POST,
            "/console/sign-out",
            on(M::POST, signed::sign_out::<AppState>),
        ),
        (Method::GET, "/console/items", on(M::GET, pages::items)),
        (
            Method::GET,
            "/console/exceptions",
            on(M::GET, pages::exceptions),
        ),
        (Method::GET, "/console/items/{id}", on(M::GET, pages::item)),
        (
            Method::POST,
            "/console/items/{id}/close",
            on(M::POST, pages::close),
        ),
        (
            Method::POST,
            "/console/items/{id}/retrigger",
            on(M::POST, pages::retrigger),
        ),
    ]
}

/// The console's static files (web-console's stylesheet and script, open to anyone).
pub(crate) const STATIC_ROUTES: [&str; 2] =
    ["/console/static/console.css", "/console/static/console.js"];

/// The console's routes.
pub fn router() -> Router<AppState> {
    routes()
        .into_iter()
        .fold(Router::new(), |r, (_, path, handler)| {
            r.route(path, handler)
        })
        .merge(layout::static_router())
}

/// What a session cookie holds: whose it is and a keyed fingerprint of the credential that opened
/// it, never the credential (D-access-console-session-credential).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionAccount {
    /// The account id (`admin` for the bootstrap admin).
    id: String,
    /// Opened with the bootstrap admin token (`RAKUTEN_POLL_ADMIN_TOKEN`).
    bootstrap: bool,
    /// [`CredentialKey::fingerprint`] of the token it was opened with, hex.
    credential: String,
}

/// A signed-in account: the extractor of every console page (else: to the sign-in page). The
/// account is read as it is now on every request ([`ConsoleApp::person`]), and the session ends
/// when the credential that opened it has been replaced or revoked, or the admin token changed.
pub type Signed = SignedAs<AppState>;

/// What the signed-in account may do on a page: the API's rule ([`authorize`]).
pub trait AccountRules {
    /// The scope this account does `action` in ([`authorize`], the API's rule), or the 403 page.
    ///
    /// # Errors
    /// The 403 page (boxed: a page is large), when the account may not.
    fn allowed(&self, action: Action) -> Result<Scope, Box<Response>>;

    /// Whether this account may do `action` ([`authorize`]).
    fn may(&self, action: Action) -> bool;

    /// The answer to what this account may not do.
    fn forbidden(&self) -> Response;
}

impl AccountRules for Signed {
    fn allowed(&self, action: Action) -> Result<Scope, Box<Response>> {
        authorize(&self.person, action).map_err(|_| Box::new(self.forbidden()))
    }

    fn may(&self, action: Action) -> bool {
        authorize(&self.person, action).is_ok()
    }

    fn forbidden(&self) -> Response {
        self.error(
            StatusCode::FORBIDDEN,
            "Your account may not do this (role or permission).",
        )
    }
}

/// The account a session names, as stored now, when the credential that opened the session still
/// signs it in; `None` otherwise (the session has ended).
async fn current_account(
    st: &AppState,
    who: &SessionAccount,
) -> Result<Option<Account>, crate::store::StoreError> {
    if who.bootstrap {
        let admin = &st.admin_token_hash;
        return Ok(st
            .credential_key
            .matches(admin, 0, &who.credential)
            .then(Account::bootstrap_admin));
    }
    let Some(record) = st.store.account_get(&who.id).await? else {
        return Ok(None);
    };
    let generation = record.token_generation;
    Ok(record
        .token
        .filter(|token| {
            st.credential_key
                .matches(token, generation, &who.credential)
        })
        .map(|_| record.account))
}

impl ConsoleApp for AppState {
    type Who = SessionAccount;
    type Person = Account;

    const SITE: Site = Site {
        service: SERVICE,
        nav: NAV,
        token_label: "Account token",
        back: ("/console/items", "Back to the items"),
    };

    fn console_key(&self) -> &ConsoleKey {
        &self.console_key
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    async fn person(&self, who: &SessionAccount) -> Result<Option<Person<Account>>, String> {
        let account = match current_account(self, who).await {
            Ok(Some(account)) => account,
            Ok(None) => return Ok(None),
            Err(e) => {
                tracing::error!(error = %e, "console: reading the session's account failed");
                return Err("The database did not answer.".to_owned());
            }
        };
        // The console is for accounts that may use the service at all (not enterprise).
        if authorize(&account, Action::ReadConfig).is_err() {
            return Ok(None);
        }
        let role = match (&account.role, &account.shop_id) {
            (Role::Agent, Some(shop)) => format!("{}, shop {shop}", account.role.as_str()),
            (role, _) => role.as_str().to_owned(),
        };
        Ok(Some(Person {
            name: account.id.clone(),
            person: account,
            role,
        }))
    }

    async fn sign_in(&self, token: &str) -> Result<SessionAccount, SignInRefused> {
        let account = if token.is_empty() || token.len() > 256 {
            Ok(None)
        } else {
            self.account_of_token(token).await
        };
        match account {
            Ok(Some(a)) if authorize(&a, Action::ReadConfig).is_ok() => {
                let hash = TokenHash::of(token);
                let bootstrap = self.admin_token_hash.ct_eq(&hash.0);
                let generation = if bootstrap {
                    0
                } else {
                    match self.store.account_get(&a.id).await {
                        Ok(Some(record)) => record.token_generation,
                        Ok(None) => {
                            return Err(SignInRefused::Unknown("Unknown token.".to_owned()));
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "console sign-in: store failed");
                            return Err(SignInRefused::Unavailable(
                                "The database did not answer.".to_owned(),
                            ));
                        }
                    }
                };
                tracing::info!(account = %a.id, "console sign-in");
                Ok(SessionAccount {
                    bootstrap,
                    credential: hex(&self.credential_key.fingerprint(&hash, generation)),
                    id: a.id,
                })
            }
            Ok(Some(_)) => Err(SignInRefused::NoAccess(
                "Enterprise accounts have no access to the console.".to_owned(),
            )),
            Ok(None) => Err(SignInRefused::Unknown("Unknown token.".to_owned())),
            Err(e) => {
                tracing::error!(error = %e, "console sign-in: store failed");
                Err(SignInRefused::Unavailable(
                    "The database did not answer.".to_owned(),
                ))
            }
        }
    }
}
