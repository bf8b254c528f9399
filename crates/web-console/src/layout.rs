//! The page frame and small rendering helpers, shared by both services' consoles.
//!
//! Every page goes through [`page`], which adds the security headers: a Content-Security-Policy
//! allowing only this origin (`'self'`, no inline script or style), `no-store` caching (pages hold
//! live operational data), no referrer, no framing. The stylesheet and script are embedded with
//! `include_str!` and served by [`static_router`] under `/console/static/`.

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use maud::{DOCTYPE, Markup, html};
use rakuten_types::Timestamp;

use crate::session::CSRF_FIELD;

/// The embedded stylesheet.
pub const CSS: &str = include_str!("../assets/console.css");
/// The embedded script (confirmation before an action).
pub const JS: &str = include_str!("../assets/console.js");

/// The Content-Security-Policy of every console page: nothing outside this origin.
pub const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; \
    form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What the frame around a page shows.
#[derive(Debug, Clone, Copy)]
pub struct Chrome<'a> {
    /// The service's name, shown as the brand.
    pub service: &'a str,
    /// Navigation links `(href, label)`.
    pub nav: &'a [(&'a str, &'a str)],
    /// The signed-in actor: `(name, role)`.
    pub who: Option<(&'a str, &'a str)>,
    /// The session's CSRF token (for the sign-out form).
    pub csrf: Option<&'a str>,
}

/// A one-line message above a page's content (after an action).
#[derive(Debug, Clone)]
pub enum Notice {
    /// It worked.
    Ok(String),
    /// It was refused, and why.
    Err(String),
}

/// The `/console/static/console.css` and `/console/static/console.js` routes.
pub fn static_router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/console/static/console.css",
            get(|| async { asset("text/css; charset=utf-8", CSS) }),
        )
        .route(
            "/console/static/console.js",
            get(|| async { asset("text/javascript; charset=utf-8", JS) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

/// A whole page: the frame, the title, an optional notice, the body; with the security headers.
/// `active` is the href of the navigation entry to highlight.
pub fn page(
    chrome: &Chrome<'_>,
    active: &str,
    title: &str,
    notice: Option<&Notice>,
    body: Markup,
) -> Response {
    page_with_status(StatusCode::OK, chrome, active, title, notice, body)
}

/// [`page`] with another status (an error page keeps the frame).
pub fn page_with_status(
    status: StatusCode,
    chrome: &Chrome<'_>,
    active: &str,
    title: &str,
    notice: Option<&Notice>,
    body: Markup,
) -> Response {
    let doc = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · " (chrome.service) }
                link rel="stylesheet" href="/console/static/console.css";
                script src="/console/static/console.js" defer {}
            }
            body {
                header.top {
                    span.brand { (chrome.service) " console" }
                    nav {
                        @for (href, label) in chrome.nav {
                            a href=(href) class=[(*href == active).then_some("active")] { (label) }
                        }
                    }
                    @if let Some((name, role)) = chrome.who {
                        div.who {
                            span { "Signed in as " strong #who { (name) } " (" (role) ")" }
                            form method="post" action="/console/sign-out" {
                                (csrf_input(chrome.csrf.unwrap_or_default()))
                                button.secondary type="submit" #sign-out { "Sign out" }
                            }
                        }
                    }
                }
                main {
                    @match notice {
                        Some(Notice::Ok(m)) => div.notice.ok role="status" { (m) },
                        Some(Notice::Err(m)) => div.notice.err role="alert" { (m) },
                        None => {},
                    }
                    (body)
                }
            }
        }
    };
    (status, secure_headers(), doc).into_response()
}

/// The refusal of a form without the session's CSRF token.
pub const CSRF_REFUSED: &str = "Refused: this form did not carry the console's security token \
    (CSRF). Reload the page and send it again.";

/// An error page in the frame: the message and a link back to `back` (`(href, label)`).
pub fn error_page(
    chrome: &Chrome<'_>,
    status: StatusCode,
    message: &str,
    back: (&str, &str),
) -> Response {
    refused_form_page(chrome, status, message, back, "")
}

/// A refused action form: the message, a link back to the page the form was on, and what the
/// person typed as their reason in a read-only box, so a long reason refused for one character is
/// copied back instead of typed again. `typed` is shown only when it holds more than whitespace.
pub fn refused_form_page(
    chrome: &Chrome<'_>,
    status: StatusCode,
    message: &str,
    back: (&str, &str),
    typed: &str,
) -> Response {
    let notice = Notice::Err(message.to_owned());
    page_with_status(
        status,
        chrome,
        "",
        "Refused",
        Some(&notice),
        html! {
            p { a href=(back.0) { (back.1) } }
            @if !typed.trim().is_empty() {
                section {
                    h2 { "Your reason, not recorded" }
                    p.muted { "Copy it, go back, and send it again once the form is right." }
                    textarea readonly rows="4" aria-label="Your reason, not recorded" { (shown_as_typed(typed)) }
                }
            }
        },
    )
}

/// A refused reason as it is shown back to copy: a bidirectional control, which the reason rule
/// refuses because it reorders what follows it on screen, is written as its code point
/// (`<U+202E>`), so the person sees what was refused and the text reads in the order typed.
fn shown_as_typed(typed: &str) -> String {
    typed
        .chars()
        .map(|c| {
            if rakuten_types::text::is_bidi_control(c) {
                format!("<U+{:04X}>", u32::from(c))
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The security headers of every console response.
pub fn secure_headers() -> [(header::HeaderName, HeaderValue); 5] {
    [
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
    ]
}

/// The sign-in page: one token field posted to `/console/sign-in`; `error` is the status and
/// message of a refused sign-in (200 without one).
pub fn sign_in_page(
    service: &str,
    token_label: &str,
    error: Option<(StatusCode, &str)>,
) -> Response {
    let chrome = Chrome {
        service,
        nav: &[],
        who: None,
        csrf: None,
    };
    let status = error.map_or(StatusCode::OK, |(status, _)| status);
    let notice = error.map(|(_, e)| Notice::Err(e.to_owned()));
    page_with_status(
        status,
        &chrome,
        "",
        "Sign in",
        notice.as_ref(),
        html! {
            section.card.signin {
                h1 { "Sign in" }
                form method="post" action="/console/sign-in" {
                    label for="token" { (token_label) }
                    input #token type="password" name="token" autocomplete="current-password"
                        required autofocus;
                    button type="submit" #sign-in { "Sign in" }
                }
            }
        },
    )
}

/// The hidden CSRF field of a state-changing form.
pub fn csrf_input(csrf: &str) -> Markup {
    html! { input type="hidden" name=(CSRF_FIELD) value=(csrf); }
}

/// An action form: posts to `action` with the CSRF token, the `extra` fields, a required reason,
/// and asks `confirm` before sending.
pub fn action_form(
    action: &str,
    csrf: &str,
    title: &str,
    confirm: &str,
    extra: Markup,
    danger: bool,
) -> Markup {
    let id = action.rsplit('/').next().unwrap_or("action");
    html! {
        form.action method="post" action=(action) data-confirm=(confirm) id={ "form-" (id) } {
            strong { (title) }
            (csrf_input(csrf))
            (extra)
            label { "Reason (required, recorded with your name)"
                textarea name="reason" required maxlength="1000" {}
            }
            div.row {
                button type="submit" class=[danger.then_some("danger")] { (title) }
            }
        }
    }
}

/// A timestamp as `2026-11-30 10:00:00Z`, the full RFC 3339 value in its tooltip.
pub fn ts(t: Timestamp) -> Markup {
    let full = t.to_rfc3339();
    let short = format!("{} {}Z", &full[..10], &full[11..19]);
    html! { time datetime=(full) title=(full) { (short) } }
}

/// An optional timestamp; `—` when absent.
pub fn ts_opt(t: Option<Timestamp>) -> Markup {
    match t {
        Some(t) => ts(t),
        None => html! { span.muted { "—" } },
    }
}

/// How long ago `then` was at `now`, coarse (`45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`).
pub fn age(now: Timestamp, then: Timestamp) -> String {
    let s = now.seconds_since(then).max(0.0) as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A status badge, coloured by what the status asks of an operator.
pub fn badge(status: &str) -> Markup {
    let class = match status {
        "succeeded" | "completed" | "ok" | "cleared" => "badge ok",
        "stale" | "needs_human" | "failed" | "expired" | "open" | "raised" => "badge bad",
        "queued" | "pending" | "leased" | "running" => "badge info",
        "closed" | "retired" => "badge",
        _ => "badge warn",
    };
    html! { span class=(class) { (status) } }
}

/// `—` for a missing value.
pub fn opt<T: std::fmt::Display>(v: Option<T>) -> Markup {
    match v {
        Some(v) => html! { (shown(&v.to_string())) },
        None => html! { span.muted { "—" } },
    }
}

/// Previous/next links of an offset-paged list. `base` is the page's path and query without
/// `offset` (ending in `?` or `&`).
pub fn pager(base: &str, offset: i64, limit: i64, total: i64) -> Markup {
    let last = (offset + limit).min(total);
    html! {
        div.pager {
            span { @if total == 0 { "nothing" } @else { (offset + 1) "–" (last) " of " (total) } }
            @if offset > 0 {
                a href={ (base) "offset=" ((offset - limit).max(0)) } { "← previous" }
            }
            @if last < total {
                a href={ (base) "offset=" (last) } #next { "next →" }
            }
        }
    }
}

/// A list's row count for its pager: "10,000+" once the count passed `cap` (the count stopped
/// there), else the number with thousands separators.
pub fn capped_count(n: i64, cap: i64) -> String {
    let digits = n.min(cap).to_string();
    let mut out = String::with_capacity(digits.len() + 4);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n > cap {
        out.push('+');
    }
    out
}

/// Oldest/older/newer/newest links of a keyset-paged list, oldest first. `base` is the page's
/// path and query without the position (ending in `?` or `&`); `older` and `newer` are the
/// cursors of the page's first and last rows when rows precede / follow them; `total` is the
/// count capped at `cap` (see [`capped_count`]).
pub fn seek_pager(
    base: &str,
    shown: usize,
    total: i64,
    cap: i64,
    older: Option<&str>,
    newer: Option<&str>,
) -> Markup {
    html! {
        div.pager {
            span { @if total == 0 { "nothing" } @else { (shown) " shown of " (capped_count(total, cap)) } }
            @if let Some(c) = older {
                a href=(base) #oldest { "« oldest" }
                a href={ (base) "before=" (enc(c)) } #older { "← older" }
            }
            @if let Some(c) = newer {
                a href={ (base) "after=" (enc(c)) } #newer { "newer →" }
                a href={ (base) "before=newest" } #newest { "newest »" }
            }
        }
    }
}

/// Stored text as a page shows it: control characters (a NUL, an escape) and bidirectional
/// controls written out as `\u{…}` ([`rakuten_types::text::printable`]), so text stored before
/// the input checks, or in fields passed through unchecked, reads as it is and cannot reorder
/// the page around it. HTML escaping is the template's.
pub fn shown(s: &str) -> String {
    rakuten_types::text::printable(s)
}

/// Pretty-printed JSON in a collapsed block, with what JSON leaves raw (C1 controls, bidi
/// controls) written as `\uXXXX` ([`rakuten_types::text::json_printable`]): an intent's
/// unchecked fields are stored as sent (a U+202E would reverse the line on the page).
pub fn raw_json(summary: &str, value: &serde_json::Value) -> Markup {
    let text = rakuten_types::text::json_printable(
        &serde_json::to_string_pretty(value).unwrap_or_default(),
    );
    html! { details { summary { (summary) } pre { (text) } } }
}

/// A query-string value, percent-encoded (for links that carry filters).
pub fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{capped_count, shown_as_typed};

    /// A refused reason shown back to copy names its bidirectional control instead of letting it
    /// reorder the text on the refusal page.
    #[test]
    fn a_refused_reason_is_shown_with_its_bidi_control_named() {
        assert_eq!(shown_as_typed("ok\u{202e}gnp.exe"), "ok<U+202E>gnp.exe");
        assert_eq!(shown_as_typed("確認済み\nline 2"), "確認済み\nline 2");
    }

    #[test]
    fn a_capped_count_groups_thousands_and_says_plus_past_the_cap() {
        assert_eq!(capped_count(0, 10_000), "0");
        assert_eq!(capped_count(999, 10_000), "999");
        assert_eq!(capped_count(1_000, 10_000), "1,000");
        assert_eq!(capped_count(10_000, 10_000), "10,000");
        assert_eq!(capped_count(10_001, 10_000), "10,000+");
        assert_eq!(capped_count(25_000, 10_000), "10,000+");
    }
}
