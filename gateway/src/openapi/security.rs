//! How callers authenticate: API keys (as a bearer token, or as `x-api-key` on the Messages route) and
//! admin JWTs.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::Modify;

pub struct Schemes;

impl Modify for Schemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A tenant's API key, `rk-<public id>-<secret>`, as `Authorization: Bearer <key>`."))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "x_api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "x-api-key",
                "The same API key in Anthropic's header (what Anthropic's SDKs before 1.0 send).",
            ))),
        );
        components.add_security_scheme(
            "admin_jwt",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "An admin JWT (HS256 or RS256, `exp` required) with `roles` from ops, finance, admin; \
                         see `runaii-gateway issue-admin-token`. An API key never opens the admin API.",
                    ))
                    .build(),
            ),
        );
    }
}
