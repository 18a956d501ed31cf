//! The page shell: the stylesheet and script, the navigation (only the sections the signed-in person's
//! credential opens), who is signed in, and sign-out. The API decides what is allowed; the navigation
//! only avoids offering what it would refuse.

use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

use crate::auth::staff::Role;
use crate::console::assets::{CSS, JS};
use crate::console::error::ConsoleError;
use crate::console::signed_in::{SignedIn, Who};

/// The console's sections, for the navigation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Account,
    Requests,
    Keys,
    Batches,
    Playground,
    Catalog,
    Workers,
    Audit,
    Costs,
    Totals,
    Tenants,
    None,
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · runaii console" }
            link rel="stylesheet" href=(CSS.url);
            script src=(JS.url) defer {}
        }
    }
}

/// The sections `who` may open, in order: (section, label, URL).
fn sections(who: &Who) -> Vec<(Section, &'static str, &'static str)> {
    match who {
        Who::Customer(_) => vec![
            (Section::Account, "Overview", "/console/account"),
            (Section::Requests, "Requests", "/console/requests"),
            (Section::Keys, "Keys", "/console/keys"),
            (Section::Batches, "Batches", "/console/batches"),
            (Section::Playground, "Playground", "/console/playground"),
        ],
        Who::Staff(staff) => {
            let mut items = Vec::new();
            if staff.has_unconfined(Role::Ops) {
                items.push((Section::Catalog, "Catalog", "/console/ops/models"));
                items.push((Section::Workers, "Workers", "/console/ops/workers"));
            }
            if staff.has(Role::Finance) {
                items.push((Section::Costs, "Cost records", "/console/finance/costs"));
                items.push((Section::Totals, "Monthly totals", "/console/finance/totals"));
            }
            if staff.has(Role::Finance) || staff.has(Role::Admin) {
                items.push((Section::Tenants, "Tenants & credit", "/console/finance/tenants"));
            }
            if staff.has_unconfined(Role::Admin) {
                items.push((Section::Audit, "Audit log", "/console/ops/audit"));
            }
            items
        }
    }
}

/// Where a person lands after sign-in: their first section.
pub(crate) fn landing(who: &Who) -> &'static str {
    sections(who).first().map_or("/console/nothing", |s| s.2)
}

fn who_line(signed: &SignedIn) -> Markup {
    match &signed.who {
        Who::Customer(c) => html! { span { "API key " code { (c.key_prefix) "-…" } } },
        Who::Staff(s) => html! {
            span {
                (s.claims.sub) " · " (s.claims.roles.join(", "))
                @if let Some(tenant) = s.claims.tenant_id { " · tenant " code { (tenant) } }
            }
        },
    }
}

/// A signed-in page.
pub(crate) fn page(signed: &SignedIn, current: Section, title: &str, body: Markup) -> Html<String> {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                header.top {
                    a.brand href="/console" { "runaii" }
                    nav.sections aria-label="sections" {
                        @for (section, label, url) in sections(&signed.who) {
                            @if section == current {
                                a href=(url) aria-current="page" { (label) }
                            } @else {
                                a href=(url) { (label) }
                            }
                        }
                    }
                    div.who {
                        (who_line(signed))
                        form method="post" action="/console/sign-out" {
                            (csrf(signed))
                            button.link type="submit" { "Sign out" }
                        }
                    }
                }
                main #main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    Html(markup.into_string())
}

/// A signed-in page whose content may have failed: the error is shown in the page, with its status.
pub(crate) fn page_or_error(signed: &SignedIn, current: Section, title: &str, body: Result<Markup, ConsoleError>) -> Response {
    respond(signed, current, title, StatusCode::OK, body)
}

/// As [`page_or_error`], with `status` for a page drawn (an action's failure shown beside the form).
pub(crate) fn respond(
    signed: &SignedIn,
    current: Section,
    title: &str,
    status: StatusCode,
    body: Result<Markup, ConsoleError>,
) -> Response {
    match body {
        Ok(body) => (status, page(signed, current, title, body)).into_response(),
        Err(ConsoleError::SignedOut(ended)) => ConsoleError::SignedOut(ended).into_response(),
        Err(e) => {
            let status = e.status();
            (status, page(signed, current, title, error(&e))).into_response()
        }
    }
}

/// The error box every failed action shows.
pub(crate) fn error(e: &ConsoleError) -> Markup {
    html! { div.notice.error role="alert" { strong { (status_word(e.status())) } " " (e.message()) } }
}

fn status_word(status: StatusCode) -> String {
    format!("{} {}:", status.as_u16(), status.canonical_reason().unwrap_or("Error"))
}

/// A success note.
pub(crate) fn ok(text: &str) -> Markup {
    html! { div.notice.ok role="status" { (text) } }
}

/// The hidden field every form of the session carries.
pub(crate) fn csrf(signed: &SignedIn) -> Markup {
    html! { input type="hidden" name="csrf" value=(signed.session.csrf_token()); }
}

/// A page outside a session (sign-in, errors).
pub(crate) fn bare(title: &str, body: Markup) -> Html<String> {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body.bare {
                header.top { a.brand href="/console" { "runaii" } }
                main #main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    Html(markup.into_string())
}

/// A console error as an answer of its own: to the sign-in page for a session that ended, else a bare page
/// with the message and the error's status.
impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        if let Self::SignedOut(ended) = self {
            let to = format!("/console/sign-in?ended={}", ended.word());
            return (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
        }
        let status = self.status();
        let page = bare(
            "Error",
            html! {
                div.notice.error role="alert" { (self.message()) }
                p { a href="/console" { "Back to the console" } }
            },
        );
        (status, page).into_response()
    }
}
