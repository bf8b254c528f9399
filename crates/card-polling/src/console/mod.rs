//! The operator console at `/console`, served by card-polling itself.
//!
//! | path | page | who |
//! |---|---|---|
//! | `GET /console` | queue depths per task type and lane, the last cycle's decisions | super_admin, platform (agents: their item counts only) |
//! | `GET /console/items` | items, filters: status, task type, ICCID, shop (and its sub-shops) | scoped |
//! | `GET /console/exceptions` | failed, expired, attempts at the limit, with a failure reason | scoped |
//! | `GET /console/items/{id}` | the item, its audit trail and carrier-call log, close/retrigger | scoped |
//! | `POST /console/items/{id}/close`, `…/retrigger` | with a reason; the same rules as the API | scoped, by permission |
//! | `GET/POST /console/sign-in`, `POST /console/sign-out` | session | any account but enterprise |
//!
//! Sign-in takes an account token (or the bootstrap admin token). The session carries the
//! account as it was at sign-in (id, role, shop, permissions); every read and write goes through
//! the account's [`Scope`], pushed down into SQL by the store, so an agent sees exactly its shop
//! tree, and an item outside it answers exactly like a missing one.

pub mod pages;

use axum::Router;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use web_console::ConsoleForm;
use web_console::layout::{self, Chrome, Notice};
use web_console::session::Session;

use crate::domain::{Account, Role, Scope};
use crate::http::AppState;
use crate::http::auth::account_of_token;

/// The service name in the console's frame.
pub const SERVICE: &str = "card-polling";

const NAV: &[(&str, &str)] = &[
    ("/console", "Overview"),
    ("/console/items", "Items"),
    ("/console/exceptions", "Exceptions"),
];

/// The console's routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .merge(layout::static_router())
        .route("/console", get(pages::overview))
        .route("/console/sign-in", get(sign_in_form).post(sign_in))
        .route("/console/sign-out", post(sign_out))
        .route("/console/items", get(pages::items))
        .route("/console/exceptions", get(pages::exceptions))
        .route("/console/items/{id}", get(pages::item))
        .route("/console/items/{id}/close", post(pages::close))
        .route("/console/items/{id}/retrigger", post(pages::retrigger))
}

/// The account a session belongs to, as it was at sign-in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionAccount {
    id: String,
    role: Role,
    shop_id: Option<String>,
    perm_manual_trigger: bool,
    perm_card_data: bool,
}

impl From<Account> for SessionAccount {
    fn from(a: Account) -> Self {
        SessionAccount {
            id: a.id,
            role: a.role,
            shop_id: a.shop_id,
            perm_manual_trigger: a.perm_manual_trigger,
            perm_card_data: a.perm_card_data,
        }
    }
}

/// A signed-in account: the extractor of every console page (else: to the sign-in page).
#[derive(Debug, Clone)]
pub struct Signed {
    session: Session<SessionAccount>,
    /// The account.
    pub account: Account,
    /// What it may see.
    pub scope: Scope,
    role_label: String,
}

impl Signed {
    /// The frame of every page: the service, the account and its role.
    pub fn chrome(&self) -> Chrome<'_> {
        Chrome {
            service: SERVICE,
            nav: NAV,
            who: Some((&self.account.id, &self.role_label)),
            csrf: Some(&self.session.csrf),
        }
    }

    /// A page in the frame.
    pub fn page(
        &self,
        active: &str,
        title: &str,
        notice: Option<&Notice>,
        body: maud::Markup,
    ) -> Response {
        layout::page(&self.chrome(), active, title, notice, body)
    }

    /// An error page in the frame.
    pub fn error(&self, status: StatusCode, message: &str) -> Response {
        layout::error_page(
            &self.chrome(),
            status,
            message,
            ("/console/items", "Back to the items"),
        )
    }

    /// The session's CSRF token.
    pub fn csrf(&self) -> &str {
        &self.session.csrf
    }

    /// Whether a form carried the session's CSRF token.
    pub fn csrf_ok(&self, presented: Option<&str>) -> bool {
        self.session.csrf_ok(presented)
    }
}

impl FromRequestParts<AppState> for Signed {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, Response> {
        let to_sign_in = || Redirect::to("/console/sign-in").into_response();
        let session: Session<SessionAccount> = st
            .console_key
            .session(&parts.headers, st.clock.now())
            .ok_or_else(to_sign_in)?;
        let a = &session.who;
        let account = Account {
            id: a.id.clone(),
            role: a.role,
            shop_id: a.shop_id.clone(),
            perm_manual_trigger: a.perm_manual_trigger,
            perm_card_data: a.perm_card_data,
        };
        let scope = account.scope().ok_or_else(to_sign_in)?;
        let role_label = match &scope {
            Scope::All => account.role.as_str().to_owned(),
            Scope::ShopTree(shop) => format!("{}, shop {shop}", account.role.as_str()),
        };
        Ok(Signed {
            session,
            account,
            scope,
            role_label,
        })
    }
}

async fn sign_in_form() -> Response {
    layout::sign_in_page(SERVICE, "Account token", None)
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
pub struct SignInForm {
    token: String,
}

async fn sign_in(
    State(st): State<AppState>,
    headers: HeaderMap,
    ConsoleForm(form): ConsoleForm<SignInForm>,
) -> Response {
    let token = form.token.trim();
    let account = if token.is_empty() || token.len() > 256 {
        Ok(None)
    } else {
        account_of_token(&st, token).await
    };
    match account {
        Ok(Some(a)) if a.scope().is_some() => {
            tracing::info!(account = %a.id, "console sign-in");
            let jar = st
                .console_key
                .sign_in(&headers, SessionAccount::from(a), st.clock.now());
            (jar, Redirect::to("/console")).into_response()
        }
        Ok(Some(_)) => layout::sign_in_page(
            SERVICE,
            "Account token",
            Some("Enterprise accounts have no access to the console."),
        ),
        Ok(None) => layout::sign_in_page(SERVICE, "Account token", Some("Unknown token.")),
        Err(e) => {
            tracing::error!(error = %e, "console sign-in: store failed");
            layout::sign_in_page(
                SERVICE,
                "Account token",
                Some("The database did not answer."),
            )
        }
    }
}

/// A form that carries only the CSRF token.
#[derive(Debug, Deserialize)]
pub struct CsrfForm {
    csrf: Option<String>,
}

async fn sign_out(
    State(st): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    ConsoleForm(form): ConsoleForm<CsrfForm>,
) -> Response {
    if !signed.csrf_ok(form.csrf.as_deref()) {
        return csrf_refused(&signed);
    }
    st.console_key.sign_out(&headers)
}

/// The answer to a form without the session's CSRF token.
pub fn csrf_refused(signed: &Signed) -> Response {
    signed.error(StatusCode::FORBIDDEN, layout::CSRF_REFUSED)
}
