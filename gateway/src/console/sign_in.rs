//! Signing in and out. The sign-in form posts the credential (never in a URL); the gateway checks it
//! exactly as the API would, opens a session and sets its cookie. The form itself is protected from
//! login CSRF by a double-submitted token: a random value in a short-lived cookie and in the form, which
//! a page on another site can neither read nor set.

use axum::extract::{Form, Query, State};
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{Extensions, HeaderMap, StatusCode};
use axum::response::{AppendHeaders, IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::html;
use rand::RngCore;
use serde::Deserialize;
use subtle::ConstantTimeEq;

use super::error::ConsoleError;
use super::form::{same_origin, Posted};
use super::session::{Credential, COOKIE as SESSION_COOKIE, MAX_SECONDS};
use super::signed_in::{check, cookie, SignedIn, Who};
use super::ui::layout;
use super::Console;

/// The largest sign-in form read: a credential (an admin JWT is well under 4 KiB) and a token.
pub(crate) const FORM_MAX_BYTES: usize = 16 * 1024;

/// The sign-in form's double-submit cookie.
const LOGIN_COOKIE: &str = "runaii_console_login";

/// `Set-Cookie` for a console cookie: never readable by scripts, never sent from another site, never
/// sent to the API; `Secure` when the request came over HTTPS (a TLS-terminating proxy says so in
/// `X-Forwarded-Proto`).
fn set_cookie(headers: &HeaderMap, name: &str, value: &str, max_age: i64) -> String {
    let https = headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let secure = if https { "; Secure" } else { "" };
    format!("{name}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

#[derive(Debug, Deserialize)]
pub(crate) struct Ended {
    ended: Option<String>,
}

/// `GET /console`: the person's first section, or the sign-in page.
pub(crate) async fn home(signed: Result<SignedIn, ConsoleError>) -> Response {
    match signed {
        Ok(signed) => (StatusCode::SEE_OTHER, [(LOCATION, layout::landing(&signed.who))]).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /console/sign-in`.
pub(crate) async fn form(headers: HeaderMap, Query(q): Query<Ended>) -> Response {
    let note = match q.ended.as_deref() {
        Some("refused") => Some("The API no longer accepts the key or token this session used (revoked or expired). Sign in again."),
        Some("expired") => Some("The session reached its end (its admin token expired, or 12 hours passed). Sign in again."),
        Some(_) => Some("Sign in to continue."),
        None => None,
    };
    sign_in_page(&headers, StatusCode::OK, note, None)
}

fn sign_in_page(headers: &HeaderMap, status: StatusCode, note: Option<&str>, error: Option<&ConsoleError>) -> Response {
    let mut token = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut token);
    let token = hex::encode(token);
    let body = html! {
        @if let Some(note) = note { div.notice role="status" { (note) } }
        @if let Some(e) = error { (layout::error(e)) }
        form.sign-in method="post" action="/console/sign-in" {
            input type="hidden" name="login_csrf" value=(token);
            label for="credential" { "API key or admin token" }
            input #credential type="password" name="credential" autocomplete="off" required spellcheck="false"
                placeholder="rk-… or an admin JWT";
            p.hint {
                "Customers: an API key (" code { "rk-…" } ") shows its tenant's balance, usage, requests and keys. "
                "Staff: an admin JWT shows what its roles (ops, finance, admin) open. "
                "The credential is checked exactly as the API checks it, and is kept only server-side for this session."
            }
            button type="submit" { "Sign in" }
        }
    };
    let cookie = set_cookie(headers, LOGIN_COOKIE, &token, 3600);
    (status, [(SET_COOKIE, cookie)], layout::bare("Sign in", body)).into_response()
}

#[derive(Debug, Deserialize)]
pub(crate) struct SignInForm {
    #[serde(default)]
    credential: String,
    #[serde(default)]
    login_csrf: String,
}

/// `POST /console/sign-in`.
pub(crate) async fn submit(State(console): State<Console>, headers: HeaderMap, from: Extensions, Form(form): Form<SignInForm>) -> Response {
    let expected = cookie(&headers, LOGIN_COOKIE).unwrap_or("");
    let forged =
        same_origin(&headers).is_err() || expected.is_empty() || !bool::from(expected.as_bytes().ct_eq(form.login_csrf.as_bytes()));
    if forged {
        return sign_in_page(&headers, StatusCode::FORBIDDEN, None, Some(&ConsoleError::Csrf));
    }
    let text = form.credential.trim();
    if text.is_empty() {
        return sign_in_page(
            &headers,
            StatusCode::BAD_REQUEST,
            None,
            Some(&ConsoleError::Invalid("paste an API key or an admin token".into())),
        );
    }
    let credential = if text.starts_with("rk-") { Credential::ApiKey(text.to_owned()) } else { Credential::AdminToken(text.to_owned()) };
    let who = match check(&console.app, &credential, &from).await {
        Ok(Some(who)) => who,
        Ok(None) => return sign_in_page(&headers, StatusCode::UNAUTHORIZED, None, Some(&refused(&console, &credential))),
        Err(e) => return sign_in_page(&headers, e.status(), None, Some(&e)),
    };
    let ends = match &who {
        // A token's session ends with the token; a key's with the session's own limit (a revoked or
        // expired key ends it sooner, at the next page).
        Who::Staff(staff) => i64::try_from(staff.claims.exp).ok().and_then(|exp| DateTime::from_timestamp(exp, 0)),
        Who::Customer(_) => None,
    }
    .unwrap_or_else(|| Utc::now() + chrono::Duration::seconds(MAX_SECONDS));
    // A session this browser had before is over: a new sign-in never reuses an id (no fixation).
    if let Some(previous) = super::signed_in::session_cookie(&headers) {
        console.sessions.close(&previous).await;
    }
    let session = match console.sessions.open(&credential, ends).await {
        Ok(session) => session,
        Err(e) => {
            let e = ConsoleError::from(e);
            return sign_in_page(&headers, e.status(), None, Some(&e));
        }
    };
    // The browser keeps the cookie as long as the session could last; Redis ends it sooner when idle.
    let cookies = AppendHeaders([
        (SET_COOKIE, set_cookie(&headers, SESSION_COOKIE, &session.cookie_value(), MAX_SECONDS)),
        (SET_COOKIE, set_cookie(&headers, LOGIN_COOKIE, "", 0)),
    ]);
    (StatusCode::SEE_OTHER, cookies, [(LOCATION, layout::landing(&who))]).into_response()
}

/// Why the API refused the credential, in its terms.
fn refused(console: &Console, credential: &Credential) -> ConsoleError {
    let message = match credential {
        Credential::ApiKey(_) => "the API refuses this key: it is unknown, revoked or expired",
        Credential::AdminToken(_) if console.app.admin.is_none() => {
            "staff sign-in is not configured on this gateway (set RUNAII_ADMIN_JWT_SECRET or RUNAII_ADMIN_JWT_PUBLIC_KEY)"
        }
        Credential::AdminToken(_) => "the API refuses this token: it is malformed, badly signed or expired (API keys start with rk-)",
    };
    ConsoleError::Api { status: StatusCode::UNAUTHORIZED, message: message.into() }
}

/// Nothing but the CSRF token.
#[derive(Debug, Deserialize)]
pub(crate) struct Nothing {}

/// `POST /console/sign-out`: the session's record is deleted, so the cookie opens nothing anywhere.
pub(crate) async fn sign_out(State(console): State<Console>, headers: HeaderMap, posted: Posted<Nothing>) -> Response {
    console.sessions.close(&posted.signed.session).await;
    let cookie = set_cookie(&headers, SESSION_COOKIE, "", 0);
    (StatusCode::SEE_OTHER, [(SET_COOKIE, cookie)], [(LOCATION, "/console/sign-in")]).into_response()
}
