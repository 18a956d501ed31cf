//! Serving a router on a listener: axum's router on hyper's HTTP/1 connections, with what `axum::serve`
//! leaves unset. Each request's head must arrive within `header_read_timeout` (without a deadline a
//! client sending a byte every few seconds holds a connection and its task for ever, and a few thousand
//! such clients hold them all); the deadline also ends a keep-alive connection left idle that long. The
//! peer's address rides on every request as `ConnectInfo`, which counts failed authentications per
//! source (`auth::attempts`).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

/// Serves `router` until `shutdown` completes, then stops accepting, lets each connection finish the
/// request it is serving, and returns when all have closed.
pub async fn serve(listener: TcpListener, router: Router, header_read_timeout: Duration, shutdown: impl Future<Output = ()>) {
    let connections = TaskTracker::new();
    let closing = CancellationToken::new();
    tokio::pin!(shutdown);
    loop {
        let (mut stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was accepted: pause and go on.
                    tracing::debug!(error = %e, "connection not accepted");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        no_delay(&mut stream);
        let service = router.clone().map_request(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
            request
        });
        let closed = closing.clone();
        connections.spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
            let connection = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
            tokio::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                () = closed.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = result {
                // A client that left, sent a malformed request or missed the header deadline.
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    closing.cancel();
    connections.close();
    connections.wait().await;
}

/// Streams send small chunks: without TCP_NODELAY each waits on the client's delayed ACK (~40 ms).
/// (The private listener's connections get it too: harmless, and one accept loop for both.)
fn no_delay(stream: &mut tokio::net::TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY not set");
    }
}
