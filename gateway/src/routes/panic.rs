//! A handler that panics answers `500 internal_error` in the API's error shape, with the panic's message
//! in the log, instead of a connection closed without an answer.

use std::any::Any;

use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The answer to a caught panic (`tower_http::catch_panic`).
#[allow(clippy::needless_pass_by_value)] // the layer hands the payload over by value
pub(super) fn respond(payload: Box<dyn Any + Send + 'static>) -> Response {
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message");
    ApiError::Internal(format!("a request handler panicked: {message}")).into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::{to_bytes, Body};
    use axum::http::{Request, StatusCode};
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt as _;
    use tower_http::catch_panic::CatchPanicLayer;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_in_the_error_shape() {
        async fn boom() -> &'static str {
            panic!("index out of bounds")
        }
        let app = Router::new().route("/boom", get(boom)).layer(CatchPanicLayer::custom(super::respond));
        let response = app.oneshot(Request::get("/boom").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body: serde_json::Value = serde_json::from_slice(&to_bytes(response.into_body(), 1 << 16).await.unwrap()).unwrap();
        assert_eq!(body["error"]["code"], "internal_error", "{body}");
        assert_eq!(body["error"]["type"], "server_error", "{body}");
    }
}
