//! [`ConsoleForm`]: axum's `Form` for console posts, whose refusals are console pages.

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::Response;
use serde::de::DeserializeOwned;

use crate::layout::{Chrome, error_page};

/// A URL-encoded form posted to a console page. A body that is too large (413), not a form (415)
/// or missing a field (422) is answered with a console page in the usual frame that says nothing
/// was done, instead of axum's plain-text rejection (a bare "Failed to buffer the request
/// body: length limit exceeded" gives the operator no way back).
#[derive(Debug, Clone, Copy, Default)]
pub struct ConsoleForm<T>(pub T);

impl<T, S> FromRequest<S> for ConsoleForm<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Form::<T>::from_request(req, state).await {
            Ok(axum::Form(v)) => Ok(ConsoleForm(v)),
            Err(rejection) => Err(refused(rejection.status())),
        }
    }
}

/// The console page for a form axum could not read, by its status.
fn refused(status: StatusCode) -> Response {
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => {
            "The form was too large to read; nothing was done. Shorten the reason and send it again."
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            "The form was not sent as a web form (application/x-www-form-urlencoded); nothing was \
             done."
        }
        _ => {
            "The form was incomplete or malformed; nothing was done. Reload the page and try again."
        }
    };
    // The extractor does not know which service it serves; the brand reads "Operator console".
    let chrome = Chrome {
        service: "Operator",
        nav: &[],
        who: None,
        csrf: None,
    };
    error_page(
        &chrome,
        status,
        message,
        ("/console", "Back to the console"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    #[derive(Debug, serde::Deserialize)]
    struct F {
        #[allow(dead_code)]
        reason: String,
    }

    async fn post(content_type: &str, body: Vec<u8>) -> Result<ConsoleForm<F>, Response> {
        let req = Request::builder()
            .method("POST")
            .uri("/console/x")
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap();
        ConsoleForm::<F>::from_request(req, &()).await
    }

    async fn html(r: Response) -> (StatusCode, String) {
        let status = r.status();
        let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_form_axum_cannot_read_is_a_console_page_that_says_nothing_was_done() {
        assert!(
            post("application/x-www-form-urlencoded", b"reason=ok".to_vec())
                .await
                .is_ok()
        );
        let (status, page) =
            html(post("text/plain", b"reason=ok".to_vec()).await.unwrap_err()).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(
            page.contains("<!DOCTYPE html>") && page.contains("nothing was done"),
            "{page}"
        );
        let (status, page) = html(
            post("application/x-www-form-urlencoded", b"other=1".to_vec())
                .await
                .unwrap_err(),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(page.contains("incomplete or malformed"), "{page}");
        // Past axum's default body limit (2 MiB).
        let mut big = b"reason=".to_vec();
        big.resize(3 << 20, b'x');
        let (status, page) = html(
            post("application/x-www-form-urlencoded", big)
                .await
                .unwrap_err(),
        )
        .await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(page.contains("too large"), "{page}");
        assert!(!page.contains("console console"), "{page}");
    }
}
