//! The console glue every service shares: the signed-in person as an extractor ([`Signed`]), the
//! page frame drawn for them, and the sign-in, sign-out and CSRF handling of the forms. A service
//! says once, by implementing [`ConsoleApp`] on its state, what its session cookie holds, how a
//! token signs in and who a session names now; the rest is written here.
//!
//! Every request reads the person as they are now ([`ConsoleApp::person`]), so a session ends
//! as soon as the credential that opened it no longer signs in (a token replaced or revoked).

use std::future::Future;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use rakuten_types::Timestamp;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::form::ConsoleForm;
use crate::layout::{self, Chrome, Notice};
use crate::session::{ConsoleKey, Session};

/// What a service's console frame shows and where its pages send a person.
#[derive(Debug, Clone, Copy)]
pub struct Site {
    /// The service's name, shown as the brand.
    pub service: &'static str,
    /// Navigation links `(href, label)`.
    pub nav: &'static [(&'static str, &'static str)],
    /// The label of the sign-in page's token field.
    pub token_label: &'static str,
    /// The link `(href, text)` an error page offers.
    pub back: (&'static str, &'static str),
}

/// Why a sign-in was refused, with the message the sign-in page shows; the page's status follows
/// the kind, so a refusal reads in logs and monitoring as what it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInRefused {
    /// No such token (401).
    Unknown(String),
    /// A token this service knows, of someone without access to the console (403).
    NoAccess(String),
    /// The service could not check it: its storage did not answer (503).
    Unavailable(String),
}

impl SignInRefused {
    /// The status of the sign-in page that says it.
    pub fn status(&self) -> StatusCode {
        match self {
            SignInRefused::Unknown(_) => StatusCode::UNAUTHORIZED,
            SignInRefused::NoAccess(_) => StatusCode::FORBIDDEN,
            SignInRefused::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        match self {
            SignInRefused::Unknown(m)
            | SignInRefused::NoAccess(m)
            | SignInRefused::Unavailable(m) => m,
        }
    }
}

/// A service's console: implemented by the service's shared state.
pub trait ConsoleApp: Clone + Send + Sync + 'static {
    /// What the session cookie holds (signed, not encrypted: never a credential).
    type Who: Serialize + DeserializeOwned + Clone + Send + Sync + std::fmt::Debug + 'static;
    /// The signed-in person as a request reads them.
    type Person: Clone + Send + Sync + std::fmt::Debug + 'static;

    /// The frame and links of this console.
    const SITE: Site;

    /// The key that signs the session cookies.
    fn console_key(&self) -> &ConsoleKey;

    /// Now, by the service's clock.
    fn now(&self) -> Timestamp;

    /// Who a session names now, with the name and role the frame shows; `Ok(None)` when the
    /// session has ended (the person goes to the sign-in page).
    ///
    /// # Errors
    /// The message the sign-in page shows (503) when the person could not be read.
    fn person(
        &self,
        who: &Self::Who,
    ) -> impl Future<Output = Result<Option<Person<Self::Person>>, String>> + Send;

    /// What a session opened with `token` (trimmed) holds.
    ///
    /// # Errors
    /// [`SignInRefused`]: an unknown token, one of a person without access, storage unavailable.
    fn sign_in(&self, token: &str)
    -> impl Future<Output = Result<Self::Who, SignInRefused>> + Send;

    /// Called after a sign-out (the service's log line, if it writes one).
    fn signed_out(&self, _person: &Self::Person) {}
}

/// The person a session names, as [`ConsoleApp::person`] reads them.
#[derive(Debug, Clone)]
pub struct Person<P> {
    /// The service's own view of them (an operator, an account).
    pub person: P,
    /// The name the frame shows.
    pub name: String,
    /// The role the frame shows beside it.
    pub role: String,
}

/// A signed-in person: the extractor of every console page and form. Without a valid session the
/// request is sent to the sign-in page.
#[derive(Debug, Clone)]
pub struct Signed<A: ConsoleApp> {
    session: Session<A::Who>,
    /// The person, as read on this request.
    pub person: A::Person,
    name: String,
    role: String,
}

impl<A: ConsoleApp> Signed<A> {
    /// What the session cookie holds.
    pub fn who(&self) -> &A::Who {
        &self.session.who
    }

    /// The name the frame shows (the name actions are recorded under).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The frame of a page for this person: the service, its navigation, who and in which role,
    /// and the CSRF token of the sign-out form.
    pub fn chrome(&self) -> Chrome<'_> {
        Chrome {
            service: A::SITE.service,
            nav: A::SITE.nav,
            who: Some((&self.name, &self.role)),
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

    /// An error page in the frame, with the console's way back.
    pub fn error(&self, status: StatusCode, message: &str) -> Response {
        layout::error_page(&self.chrome(), status, message, A::SITE.back)
    }

    /// The session's CSRF token.
    pub fn csrf(&self) -> &str {
        &self.session.csrf
    }

    /// Whether a form carried the session's CSRF token (constant time).
    pub fn csrf_ok(&self, presented: Option<&str>) -> bool {
        self.session.csrf_ok(presented)
    }

    /// The answer to a form without the session's CSRF token.
    pub fn csrf_refused(&self) -> Response {
        self.error(StatusCode::FORBIDDEN, layout::CSRF_REFUSED)
    }
}

impl<A: ConsoleApp> FromRequestParts<A> for Signed<A> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, st: &A) -> Result<Self, Response> {
        let to_sign_in = || Redirect::to("/console/sign-in").into_response();
        let session: Session<A::Who> = st
            .console_key()
            .session(&parts.headers, st.now())
            .ok_or_else(to_sign_in)?;
        match st.person(&session.who).await {
            Ok(Some(Person { person, name, role })) => Ok(Signed {
                session,
                person,
                name,
                role,
            }),
            Ok(None) => Err(to_sign_in()),
            Err(message) => Err(layout::sign_in_page(
                A::SITE.service,
                A::SITE.token_label,
                Some((StatusCode::SERVICE_UNAVAILABLE, &message)),
            )),
        }
    }
}

/// `GET /console/sign-in`: the sign-in page.
pub async fn sign_in_form<A: ConsoleApp>() -> Response {
    layout::sign_in_page(A::SITE.service, A::SITE.token_label, None)
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
pub struct SignInForm {
    token: String,
}

/// `POST /console/sign-in`: a token that [`ConsoleApp::sign_in`] accepts opens a session (a
/// signed cookie with a fresh CSRF token) and goes to the overview; any other is the sign-in page
/// again with the service's message, 401, 403 or 503 by [`SignInRefused`].
pub async fn sign_in<A: ConsoleApp>(
    State(st): State<A>,
    headers: HeaderMap,
    ConsoleForm(form): ConsoleForm<SignInForm>,
) -> Response {
    match st.sign_in(form.token.trim()).await {
        Ok(who) => {
            let jar = st.console_key().sign_in(&headers, who, st.now());
            (jar, Redirect::to("/console")).into_response()
        }
        Err(refused) => layout::sign_in_page(
            A::SITE.service,
            A::SITE.token_label,
            Some((refused.status(), refused.message())),
        ),
    }
}

/// A form that carries only the CSRF token.
#[derive(Debug, Deserialize)]
pub struct CsrfForm {
    csrf: Option<String>,
}

/// `POST /console/sign-out`: with the session's CSRF token, removes the session cookie and goes
/// to the sign-in page.
pub async fn sign_out<A: ConsoleApp>(
    State(st): State<A>,
    signed: Signed<A>,
    headers: HeaderMap,
    ConsoleForm(form): ConsoleForm<CsrfForm>,
) -> Response {
    if !signed.csrf_ok(form.csrf.as_deref()) {
        return signed.csrf_refused();
    }
    st.signed_out(&signed.person);
    st.console_key().sign_out(&headers)
}
