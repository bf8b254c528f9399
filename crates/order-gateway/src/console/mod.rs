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
//! Files: [`pages`] (the read pages, one file per page), [`actions`] (the forms' POST handlers);
//! here the routes and what this console tells the shared glue ([`web_console::signed`]: the
//! session extractor, the frame, sign-in and sign-out) about operators.

pub mod actions;
pub mod pages;

use axum::Router;
use axum::response::Redirect;
use axum::routing::{MethodRouter, get, post};
use rakuten_types::Timestamp;
use serde::{Deserialize, Serialize};
use web_console::layout;
use web_console::signed::{self, ConsoleApp, Person, SignInRefused, Site};
use web_console::{ConsoleKey, Signed as SignedAs};

use crate::roles::Role;
use crate::state::AppState;

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
        (
            "/console/sign-in",
            get(signed::sign_in_form::<AppState>).post(signed::sign_in::<AppState>),
        ),
        ("/console/sign-out", post(signed::sign_out::<AppState>)),
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
pub type Signed = SignedAs<AppState>;

impl ConsoleApp for AppState {
    type Who = Operator;
    type Person = Operator;

    const SITE: Site = Site {
        service: SERVICE,
        nav: NAV,
        token_label: "Operator token",
        back: ("/console", "Back to the overview"),
    };

    fn console_key(&self) -> &ConsoleKey {
        &self.console_key
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The operator while this very token is still configured for them
    /// (D-console-session-bound-to-token).
    async fn person(&self, who: &Operator) -> Result<Option<Person<Operator>>, String> {
        let role = self.credentials.session_role(&who.name, &who.credential);
        Ok((role == Some(Role::Operator)).then(|| Person {
            person: who.clone(),
            name: who.name.clone(),
            role: "operator".to_owned(),
        }))
    }

    async fn sign_in(&self, token: &str) -> Result<Operator, SignInRefused> {
        match self.credentials.sign_in(token) {
            Some((actor, credential)) if actor.role == Role::Operator => {
                tracing::info!(actor = %actor.name, "console sign-in");
                Ok(Operator {
                    name: actor.name,
                    credential,
                })
            }
            Some((actor, _)) => Err(SignInRefused::NoAccess(format!(
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
            ))),
            None => Err(SignInRefused::Unknown("Unknown token.".to_owned())),
        }
    }

    fn signed_out(&self, operator: &Operator) {
        tracing::info!(actor = %operator.name, "console sign-out");
    }
}
