//! Who a console request acts for. Every request re-checks the session's credential with the API's own
//! code — the `Caller` extractor for an API key, the `Claims` extractor for an admin JWT — on a request
//! built to carry it, so the console accepts exactly what the API accepts, when the API accepts it: a
//! revoked key stops working as soon as the key cache hears of it, an expired token at once, and the
//! session ends with them.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header::{AUTHORIZATION, COOKIE};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, Request};

use super::error::{ConsoleError, Ended};
use super::session::{Credential, Lookup, SessionId, COOKIE as SESSION_COOKIE};
use super::Console;
use crate::auth::staff::{Claims, Role};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// A signed-in request: its session and who it acts for.
#[derive(Debug, Clone)]
pub(crate) struct SignedIn {
    pub session: SessionId,
    pub who: Who,
}

#[derive(Debug, Clone)]
pub(crate) enum Who {
    /// An API key's holder: one tenant, its own data only.
    Customer(Customer),
    /// Someone with an admin JWT: what its roles allow, in one tenant when it is confined to one.
    Staff(Staff),
}

#[derive(Debug, Clone)]
pub(crate) struct Customer {
    pub caller: Caller,
    /// The key's public part (`rk-<public_id>`), to show which key is signed in.
    pub key_prefix: String,
}

#[derive(Clone)]
pub(crate) struct Staff {
    pub claims: Claims,
    token: String,
}

impl std::fmt::Debug for Staff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staff").field("claims", &self.claims).finish_non_exhaustive()
    }
}

impl Staff {
    /// The bearer token for the in-process admin API calls made on this person's behalf.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Whether the token carries `role` (what the navigation shows; the API decides what is allowed).
    pub(crate) fn has(&self, role: Role) -> bool {
        self.claims.require(role).is_ok()
    }

    /// Whether the token carries `role` and is not confined to a tenant.
    pub(crate) fn has_unconfined(&self, role: Role) -> bool {
        self.claims.require_unconfined(role).is_ok()
    }
}

impl SignedIn {
    /// The customer, or a 403 for staff on a customer page.
    ///
    /// # Errors
    /// [`ConsoleError::Forbidden`] for a staff session.
    pub(crate) fn customer(&self) -> Result<&Customer, ConsoleError> {
        match &self.who {
            Who::Customer(c) => Ok(c),
            Who::Staff(_) => Err(ConsoleError::Forbidden("this page is for customers: sign in with an API key".into())),
        }
    }

    /// The staff member, or a 403 for a customer on a staff page.
    ///
    /// # Errors
    /// [`ConsoleError::Forbidden`] for a customer session.
    pub(crate) fn staff(&self) -> Result<&Staff, ConsoleError> {
        match &self.who {
            Who::Staff(s) => Ok(s),
            Who::Customer(_) => Err(ConsoleError::Forbidden("this page is for staff: sign in with an admin token".into())),
        }
    }
}

/// The session id from the request's cookies.
pub(crate) fn session_cookie(headers: &HeaderMap) -> Option<SessionId> {
    cookie(headers, SESSION_COOKIE).and_then(SessionId::parse)
}

/// The value of cookie `name`.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(k, v)| (k == name).then_some(v))
}

/// Checks a credential as the API does. `Ok(None)` when the API refuses it (unknown, revoked, expired,
/// badly signed, or staff sign-in not configured); errors are the API's other failures (the database down).
///
/// # Errors
/// The API's errors other than a refused credential.
/// `from` is the browser's request: its peer address counts the API key's failures as the API would.
pub(crate) async fn check(state: &AppState, credential: &Credential, from: &Extensions) -> Result<Option<Who>, ConsoleError> {
    match credential {
        Credential::ApiKey(key) => {
            let mut parts = bearer_parts(key)?;
            if let Some(peer) = from.get::<ConnectInfo<SocketAddr>>() {
                parts.extensions.insert(*peer);
            }
            match Caller::from_request_parts(&mut parts, state).await {
                Ok(caller) => {
                    let key_prefix = crate::auth::parse(key).map(|k| format!("rk-{}", k.public_id)).unwrap_or_default();
                    Ok(Some(Who::Customer(Customer { caller, key_prefix })))
                }
                Err(ApiError::InvalidApiKey) => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
        Credential::AdminToken(token) => {
            let mut parts = bearer_parts(token)?;
            match Claims::from_request_parts(&mut parts, state).await {
                Ok(claims) => Ok(Some(Who::Staff(Staff { claims, token: token.clone() }))),
                Err(ApiError::AdminUnauthorized(_) | ApiError::AdminDisabled) => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// A request's parts carrying `Authorization: Bearer <secret>`, as a client would send it.
fn bearer_parts(secret: &str) -> Result<Parts, ConsoleError> {
    let request = Request::builder()
        .header(AUTHORIZATION, format!("Bearer {secret}"))
        .body(())
        .map_err(|_| ConsoleError::SignedOut(Ended::CredentialRefused))?;
    Ok(request.into_parts().0)
}

impl FromRequestParts<Console> for SignedIn {
    type Rejection = ConsoleError;

    async fn from_request_parts(parts: &mut Parts, console: &Console) -> Result<Self, Self::Rejection> {
        let session = session_cookie(&parts.headers).ok_or(ConsoleError::SignedOut(Ended::NoSession))?;
        let credential = match console.sessions.load(&session).await? {
            Lookup::Found(credential) => credential,
            Lookup::Missing => return Err(ConsoleError::SignedOut(Ended::NoSession)),
            Lookup::Expired => return Err(ConsoleError::SignedOut(Ended::Expired)),
        };
        match check(&console.app, &credential, &parts.extensions).await? {
            Some(who) => Ok(Self { session, who }),
            None => {
                // The API no longer accepts it: the session is over for good, not just for this page.
                console.sessions.close(&session).await;
                Err(ConsoleError::SignedOut(Ended::CredentialRefused))
            }
        }
    }
}
