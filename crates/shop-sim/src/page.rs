//! HTML pages with an embedded JSON state, the way real shop pages carry `__INITIAL_STATE__`.
//! The worker stores the HTML as evidence and reads the state from the script element.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde_json::{Value, json};

/// The `id` of the `<script type="application/json">` element holding the page state.
pub const STATE_SCRIPT_ID: &str = "__INITIAL_STATE__";

/// A rendered page: HTTP status, title and state.
#[derive(Debug)]
pub struct Page {
    /// HTTP status.
    pub status: StatusCode,
    /// Title (shown in `<title>` and `<h1>`).
    pub title: String,
    /// The state embedded as JSON.
    pub state: Value,
}

impl Page {
    /// A 200 page.
    pub fn ok(title: &str, state: Value) -> Self {
        Page {
            status: StatusCode::OK,
            title: title.into(),
            state,
        }
    }

    /// An error page (`{"page":"error","logged_in":true,"error":{"message":…}}`).
    pub fn error(status: StatusCode, message: &str) -> Self {
        Page {
            status,
            title: "エラー".into(),
            state: json!({"page": "error", "logged_in": true, "error": {"message": message}}),
        }
    }

    /// The login page every account page answers with when the session is missing or lost.
    pub fn login() -> Self {
        Page::ok(
            "ログイン",
            json!({"page": "login", "logged_in": false, "message": "ログインしてください"}),
        )
    }
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders a page: the visible shop page ([`crate::html`]) and the state. `</` inside the JSON
/// is written `<\/` (a valid JSON escape) so that the state cannot close its script element.
pub fn render(title: &str, state: &Value) -> String {
    let compact = serde_json::to_string(state)
        .unwrap_or_default()
        .replace("</", "<\\/");
    let body = crate::html::layout(title, &crate::html::body(state));
    let title = escape_html(title);
    format!(
        "<!doctype html>\n<html lang=\"ja\"><head><meta charset=\"utf-8\"><title>{title}</title><style>{}</style></head>\n<body>\n{body}\n<script id=\"{STATE_SCRIPT_ID}\" type=\"application/json\">{compact}</script>\n</body></html>\n",
        crate::html::CSS
    )
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        (self.status, Html(render(&self.title, &self.state))).into_response()
    }
}

/// Reads the embedded state back from a page (used by tests; the worker has its own reader).
pub fn extract_state(html: &str) -> Option<Value> {
    let marker = format!("<script id=\"{STATE_SCRIPT_ID}\" type=\"application/json\">");
    let start = html.find(&marker)? + marker.len();
    let end = start + html[start..].find("</script>")?;
    serde_json::from_str(&html[start..end]).ok()
}
