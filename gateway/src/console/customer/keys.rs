//! `GET /console/keys`: the tenant's keys; `POST /console/keys`: a new one, whose secret is shown on the
//! answer page once and never again; `POST /console/keys/revoke`: revoke one.
//!
//! A key is its tenant's credential, so whoever signs in with one manages the tenant's keys, as an admin
//! token confined to the tenant may. The changes are `ops::keys`' (validated, audited in their transaction,
//! scoped to the tenant), with the acting key (`key:rk-<public_id>`) as the actor. A key created here is
//! minted from the session's key: it expires no later and is limited no higher, and revoking the session's
//! key with "also the keys created with it" revokes it too. Revoking the key the session uses ends the
//! session at its next page.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use serde::Deserialize;
use uuid::Uuid;

use crate::console::error::ConsoleError;
use crate::console::form::Posted;
use crate::console::signed_in::{Customer, SignedIn};
use crate::console::ui::format::when;
use crate::console::ui::layout::{self, csrf, Section};
use crate::console::Console;
use crate::db::keys::{self, KeyInfo};
use crate::error::ApiError;
use crate::ops::keys::{KeySpec, RevokedKey};
use crate::ops::{self, Actor};

pub(super) async fn list(State(console): State<Console>, signed: SignedIn) -> Response {
    let body = match signed.customer() {
        Ok(customer) => page(&console, &signed, customer, None).await,
        Err(e) => Err(e),
    };
    layout::page_or_error(&signed, Section::Keys, "Keys", body)
}

/// What happened just before the list is drawn.
enum Outcome {
    Created { key: KeyInfo, secret: String },
    Revoked { key: KeyInfo, also: usize },
    Failed(ConsoleError),
}

async fn page(console: &Console, signed: &SignedIn, customer: &Customer, outcome: Option<Outcome>) -> Result<Markup, ConsoleError> {
    let rows = keys::list(&console.app.db, customer.caller.tenant_id).await?;
    let now = chrono::Utc::now();
    Ok(html! {
        @match &outcome {
            Some(Outcome::Created { key, secret }) => {
                div.notice.ok.secret role="status" {
                    p { "Key " strong { (key.name) } " created. Copy its secret now: it is shown this once and never again." }
                    p { code #new-secret { (secret) } " " button.copy type="button" data-copy="#new-secret" { "Copy" } }
                }
            }
            Some(Outcome::Revoked { key, also }) => {
                (layout::ok(&format!("Key rk-{}-… revoked{}: it stops working within seconds on every gateway.", key.public_id,
                    if *also > 0 { format!(", with the {also} key(s) created with it") } else { String::new() })))
            }
            Some(Outcome::Failed(e)) => { (layout::error(e)) }
            None => {}
        }
        div.table-scroll {
            table.responsive #keys {
                thead { tr { th { "Key" } th { "Name" } th { "Created" } th { "Expires" } th { "State" } th {} } }
                tbody {
                    @for k in &rows {
                        @let revoked = k.revoked_at.is_some_and(|t| t <= now);
                        @let expired = k.expires_at.is_some_and(|t| t <= now);
                        tr {
                            td data-label="Key" { code { "rk-" (k.public_id) "-…" } @if k.public_id == customer.key_prefix.trim_start_matches("rk-") { " " span.tag { "this session" } } }
                            td data-label="Name" { (k.name) }
                            td data-label="Created" { (when(k.created_at)) }
                            td data-label="Expires" { (k.expires_at.map_or_else(|| "never".to_owned(), when)) }
                            td data-label="State" { @if revoked { "revoked" } @else if expired { "expired" } @else { "active" } }
                            td data-label="" {
                                @if !revoked {
                                    form.inline method="post" action="/console/keys/revoke"
                                        data-confirm=(format!("Revoke rk-{}-…? Requests with it will be refused.", k.public_id)) {
                                        (csrf(signed))
                                        input type="hidden" name="key_id" value=(k.id);
                                        label { input type="checkbox" name="cascade" value="on" checked; " and the keys created with it" }
                                        button.danger type="submit" { "Revoke" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        form.stack method="post" action="/console/keys" {
            (csrf(signed))
            h2 { "New key" }
            label for="key-name" { "Name" }
            input #key-name type="text" name="name" maxlength="200" placeholder="e.g. production";
            button type="submit" { "Create key" }
        }
    })
}

#[derive(Debug, Deserialize)]
pub(super) struct NewKeyForm {
    #[serde(default)]
    name: String,
}

pub(super) async fn create(State(console): State<Console>, posted: Posted<NewKeyForm>) -> Response {
    let signed = posted.signed;
    let customer = match signed.customer() {
        Ok(c) => c,
        Err(e) => return layout::page_or_error(&signed, Section::Keys, "Keys", Err(e)),
    };
    let (outcome, status) = match create_key(&console, customer, posted.form.name.trim()).await {
        Ok((key, secret)) => (Outcome::Created { key, secret }, StatusCode::OK),
        Err(e) => {
            let status = e.status();
            (Outcome::Failed(e), status)
        }
    };
    let body = page(&console, &signed, customer, Some(outcome)).await;
    layout::respond(&signed, Section::Keys, "Keys", status, body)
}

#[derive(Debug, Deserialize)]
pub(super) struct RevokeForm {
    #[serde(default)]
    key_id: String,
    /// A checkbox: present (`on`) when ticked.
    #[serde(default)]
    cascade: Option<String>,
}

pub(super) async fn revoke(State(console): State<Console>, posted: Posted<RevokeForm>) -> Response {
    let signed = posted.signed;
    let customer = match signed.customer() {
        Ok(c) => c,
        Err(e) => return layout::page_or_error(&signed, Section::Keys, "Keys", Err(e)),
    };
    let cascade = posted.form.cascade.is_some();
    let (outcome, status) = match revoke_key(&console, customer, &posted.form.key_id, cascade).await {
        Ok(revoked) => (Outcome::Revoked { key: revoked.info, also: revoked.also_revoked.len() }, StatusCode::OK),
        Err(e) => {
            let status = e.status();
            (Outcome::Failed(e), status)
        }
    };
    let body = page(&console, &signed, customer, Some(outcome)).await;
    layout::respond(&signed, Section::Keys, "Keys", status, body)
}

/// The audit log's actor for a change a key's holder makes: the key itself.
fn actor(customer: &Customer) -> String {
    format!("key:{}", customer.key_prefix)
}

/// A new key of the customer's tenant, minted from the session's key: its expiry and limits (audited by
/// `ops::keys`); the secret is returned once.
async fn create_key(console: &Console, customer: &Customer, name: &str) -> Result<(KeyInfo, String), ConsoleError> {
    if name.chars().count() > 200 {
        return Err(ConsoleError::Invalid("a key's name is at most 200 characters".into()));
    }
    let spec = KeySpec { name: name.to_owned(), ..KeySpec::default() };
    let created = ops::keys::create_from_key(&console.app.db, Actor(&actor(customer)), customer.caller.key_id, &spec)
        .await
        .map_err(ApiError::from)?;
    Ok((created.info, created.key))
}

/// Revokes one of the customer's tenant's keys (audited by `ops::keys`). Another tenant's key is "not
/// found", exactly like a key that does not exist: the tenant is the operation's scope.
async fn revoke_key(console: &Console, customer: &Customer, key_id: &str, cascade: bool) -> Result<RevokedKey, ConsoleError> {
    let key_id: Uuid = key_id.parse().map_err(|_| ConsoleError::NotFound(format!("key {key_id}")))?;
    let tenant = Some(customer.caller.tenant_id);
    Ok(ops::keys::revoke(&console.app.db, Actor(&actor(customer)), key_id, tenant, cascade).await.map_err(ApiError::from)?)
}
