//! Long lists are paged on the server by cursor (keyset pagination): a page costs the same however deep
//! it is, and the link to the next one carries the cursor and the filters, never a secret.

use maud::{html, Markup};

/// Rows per page on every console list.
pub(crate) const PAGE: i64 = 50;

/// "Next page" (when there is one) and "first page" (when this is not it) links, keeping `filters`.
pub(crate) fn pager(base: &str, filters: &[(&str, Option<&str>)], next_cursor: Option<&str>, is_first: bool) -> Markup {
    let link = |cursor: Option<&str>| {
        let mut pairs: Vec<(&str, Option<&str>)> = filters.to_vec();
        pairs.push(("cursor", cursor));
        format!("{base}{}", super::super::admin_api::query(&pairs))
    };
    html! {
        nav.pager aria-label="pages" {
            @if !is_first { a href=(link(None)) { "← First page" } }
            @if let Some(cursor) = next_cursor { a.next href=(link(Some(cursor))) rel="next" { "Next page →" } }
        }
    }
}
