//! Every state-changing console request is a form POST that passes two checks before anything else runs:
//! the browser says it came from this origin (`Sec-Fetch-Site`, `Origin`), and it carries the session's
//! CSRF token. The session cookie is `SameSite=Strict` too; each check alone would stop a cross-site form.

use axum::extract::{Form, FromRequest, FromRequestParts, Request};
use axum::http::header::{HOST, ORIGIN};
use axum::http::HeaderMap;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::error::ConsoleError;
use super::signed_in::SignedIn;
use super::Console;

/// A signed-in form submission whose origin and CSRF token were checked.
#[derive(Debug)]
pub(crate) struct Posted<T> {
    pub signed: SignedIn,
    pub form: T,
}

/// The form's fields with the token beside them. Console forms carry text fields only (numbers and
/// decimals are parsed by the page, with its own messages), which is what a flattened form can hold.
#[derive(Debug, Deserialize)]
struct WithCsrf<T> {
    #[serde(default)]
    csrf: String,
    #[serde(flatten)]
    fields: T,
}

impl<T: DeserializeOwned + Send> FromRequest<Console> for Posted<T> {
    type Rejection = ConsoleError;

    async fn from_request(request: Request, console: &Console) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = request.into_parts();
        same_origin(&parts.headers)?;
        let signed = SignedIn::from_request_parts(&mut parts, console).await?;
        let request = Request::from_parts(parts, body);
        let Form(WithCsrf { csrf, fields }) =
            Form::<WithCsrf<T>>::from_request(request, console).await.map_err(|e| ConsoleError::Invalid(e.body_text()))?;
        if !signed.session.csrf_matches(&csrf) {
            return Err(ConsoleError::Csrf);
        }
        Ok(Self { signed, form: fields })
    }
}

/// Refuses a request the browser says came from another site. Browsers send `Sec-Fetch-Site` and, on a
/// POST, `Origin`; a client that sends neither is not a browser a forged form could drive, and still needs
/// the CSRF token.
///
/// # Errors
/// [`ConsoleError::Csrf`] for a cross-site request.
pub(crate) fn same_origin(headers: &HeaderMap) -> Result<(), ConsoleError> {
    let text = |name: axum::http::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text(axum::http::HeaderName::from_static("sec-fetch-site")) {
        if !matches!(site, "same-origin" | "none") {
            return Err(ConsoleError::Csrf);
        }
    }
    if let Some(origin) = text(ORIGIN) {
        let host = origin.strip_prefix("https://").or_else(|| origin.strip_prefix("http://"));
        if host.is_none() || host != text(HOST) {
            return Err(ConsoleError::Csrf);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_same_origin_posts_pass() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:8080")])).is_ok());
        assert!(same_origin(&headers(&[("host", "c.example"), ("origin", "https://c.example"), ("sec-fetch-site", "same-origin")])).is_ok());
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080")])).is_ok());
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080"), ("origin", "http://evil.example")])).is_err());
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080"), ("origin", "null")])).is_err());
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")])).is_err());
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")])).is_err());
    }
}
