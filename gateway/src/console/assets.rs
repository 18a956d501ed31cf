//! The stylesheet and the script, built into the binary. Their URLs carry a hash of their content, so
//! browsers may keep them for a year and still never run an old script against a new page.

use std::sync::LazyLock;

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

pub(crate) struct Asset {
    /// `/console/assets/<stem>.<hash>.<ext>`
    pub url: String,
    content_type: &'static str,
    body: &'static str,
}

fn asset(stem: &str, ext: &str, content_type: &'static str, body: &'static str) -> Asset {
    let hash = hex::encode(&Sha256::digest(body.as_bytes())[..6]);
    Asset { url: format!("/console/assets/{stem}.{hash}.{ext}"), content_type, body }
}

pub(crate) static CSS: LazyLock<Asset> =
    LazyLock::new(|| asset("console", "css", "text/css; charset=utf-8", include_str!("static/console.css")));
pub(crate) static JS: LazyLock<Asset> =
    LazyLock::new(|| asset("console", "js", "text/javascript; charset=utf-8", include_str!("static/console.js")));

/// The answer for the asset file `name` (`<stem>.<hash>.<ext>`); `None` for any other name, an old
/// hash included. (The 404 page is the caller's: this module sits below the pages it styles.)
pub(crate) fn answer(name: &str) -> Option<Response> {
    let asset = [&*CSS, &*JS].into_iter().find(|a| a.url.rsplit('/').next() == Some(name))?;
    let headers = [(CONTENT_TYPE, asset.content_type), (CACHE_CONTROL, "public, max-age=31536000, immutable")];
    Some((headers, asset.body).into_response())
}
