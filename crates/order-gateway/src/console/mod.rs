//! The operator console at `/console`: server-rendered pages over the store, for the
//! person on call. One question per page: what is stuck and why, and what can I do.
//!
//! | path | page |
//! |---|---|
//! | `GET /console` | overview: counts by status, oldest queued age, open alerts, workers with retire |
//! | `GET /console/attention` | every `stale` and `needs_human` task (and `failed` of the last 24 h), oldest first, with its reason |
//! | `GET /console/tasks` | task list, status/site filters, paging |
//! | `GET /console/tasks/{id}` | task page: intent, lease, reports with evidence, known state, the gathered order list, the operator-action audit, actions |
//! | `GET /console/alerts` | alert records, open or all |
//! | `POST /console/tasks/{id}/reclaim`, `…/resolve`, `…/cancel` | reclaim a stale task to a worker; resolve a stale/needs_human task as succeeded or failed; cancel a queued task — each with a reason |
//! | `POST /console/workers/{id}/retire` | retire a worker, with a reason |
//! | `GET /console/queries`, `GET /console/queries/{id}` | account queries, list and detail |
//! | `GET/POST /console/sign-in`, `POST /console/sign-out` | session |
//!
//! Who may sign in: an operator token ([`crate::roles::Role::Operator`]). The session (a signed
//! cookie, [`web_console::session`]) names the token's actor and carries a keyed fingerprint of
//! the token itself (never the token); each request checks that this very token is still
//! configured for that operator, so removing a name, or replacing its token (a leaked one
//! rotated), ends the sessions it opened (D-console-session-bound-to-token). Every action form carries the session's CSRF token and a reason; the actor's name
//! and the reason go with the action to the store.
//!
//! Files: [`pages`] (the read pages), [`actions`] (the forms' POST handlers).

pub mod actions;
pub mod pages;

use axum::Router;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{MethodRouter, get, post};
use serde::{Deserialize, Serialize};
use web_console::ConsoleForm;
use web_console::layout::{self, Chrome, Notice};
use web_console::session::Session;

use crate::http::AppState;
use crate::roles::Role;

/// The service name in the console's frame.
pub const SERVICE: &str = "order-gateway";

/// The navigation bar.
pub const NAV: &[(&str, &str)] = &[
    ("/console", "Overview"),
    ("/console/attention", "Needs attention"),
    ("/console/tasks", "Tasks"),
    ("/console/alerts", "Alerts"),
    ("/console/queries", "Account queries"),
];

/// The console's routes.
pub fn router() -> Router<AppState> {
    routes()
        .into_iter()
        .fold(Router::new(), |r, (path, handler)| r.route(path, handler))
        .merge(layout::static_router())
}

/// The console's pages and forms (path, handlers): [`router`] is built from this list, and
/// [`crate::http::served_paths`] lists it.
pub fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/console", get(pages::overview)),
        ("/console/", get(|| async { Redirect::to("/console") })),
        ("/console/sign-in", get(sign_in_form).post(sign_in)),
        ("/console/sign-out", post(sign_out)),
        ("/console/attention", get(pages::attention)),
        ("/console/tasks", get(pages::tasks)),
        ("/console/tasks/{task_id}", get(pages::task)),
        ("/console/tasks/{task_id}/reclaim", post(actions::reclaim)),
        ("/console/tasks/{task_id}/resolve", post(actions::resolve)),
        ("/console/tasks/{task_id}/cancel", post(actions::cancel)),
        ("/console/workers/{worker_id}/retire", post(actions::retire)),
        ("/console/alerts", get(pages::alerts)),
        ("/console/queries", get(pages::queries)),
        ("/console/queries/{query_id}", get(pages::query)),
    ]
}

/// The console's static files (web-console's stylesheet and script, open to anyone).
pub const STATIC_PATHS: [&str; 2] = ["/console/static/console.css", "/console/static/console.js"];

/// Who a console session belongs to: the operator token's actor name, and which token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Operator {
    /// The token's name (recorded with every action).
    pub name: String,
    /// The keyed fingerprint of the token that opened the session
    /// ([`crate::roles::Credentials::sign_in`]); a session without one (signed before it
    /// existed) is no session.
    #[serde(default)]
    pub credential: String,
}

/// A signed-in operator: the extractor of every console page. Without a valid session the
/// request is sent to the sign-in page.
#[derive(Debug, Clone)]
pub struct Signed(pub Session<Operator>);

impl Signed {
    /// The actor's name.
    pub fn name(&self) -> &str {
        &self.0.who.name
    }

    /// The frame of a page for this operator.
    pub fn chrome(&self) -> Chrome<'_> {
        Chrome {
            service: SERVICE,
            nav: NAV,
            who: Some((&self.0.who.name, "operator")),
            csrf: Some(&self.0.csrf),
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
            ("/console", "Back to the overview"),
        )
    }
}

impl FromRequestParts<AppState> for Signed {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, Response> {
        let session: Option<Session<Operator>> =
            st.console_key.session(&parts.headers, st.clock.now());
        let role = session
            .as_ref()
            .and_then(|s| st.credentials.session_role(&s.who.name, &s.who.credential));
        match (session, role) {
            (Some(s), Some(Role::Operator)) => Ok(Signed(s)),
            _ => Err(Redirect::to("/console/sign-in").into_response()),
        }
    }
}

async fn sign_in_form() -> Response {
    layout::sign_in_page(SERVICE, "Operator token", None)
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
    match st.credentials.sign_in(form.token.trim()) {
        Some((actor, credential)) if actor.role == Role::Operator => {
            tracing::info!(actor = %actor.name, "console sign-in");
            let who = Operator {
                name: actor.name,
                credential,
            };
            let jar = st.console_key.sign_in(&headers, who, st.clock.now());
            (jar, Redirect::to("/console")).into_response()
        }
        Some((actor, _)) => layout::sign_in_page(
            SERVICE,
            "Operator token",
            Some(&format!(
                "This is {} {} token; the console needs an operator token.",
                // "an upstream", "a worker".
                if actor
                    .role
                    .to_string()
                    .starts_with(['a', 'e', 'i', 'o', 'u'])
                {
                    "an"
                } else {
                    "a"
                },
                actor.role
            )),
        ),
        None => layout::sign_in_page(SERVICE, "Operator token", Some("Unknown token.")),
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
    if !signed.0.csrf_ok(form.csrf.as_deref()) {
        return csrf_refused(&signed);
    }
    tracing::info!(actor = %signed.name(), "console sign-out");
    st.console_key.sign_out(&headers)
}

/// The answer to a form without the session's CSRF token.
pub fn csrf_refused(signed: &Signed) -> Response {
    signed.error(StatusCode::FORBIDDEN, layout::CSRF_REFUSED)
}
