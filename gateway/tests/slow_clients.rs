//! A client cannot hold a connection by sending slowly: a request head that has not arrived within
//! `RUNAII_HEADER_READ_TIMEOUT_MS` ends the connection, on the public listener and the private metrics
//! listener alike; and the console's sign-in form, which anyone may post, is read only up to 16 KiB.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::spawn_app_with;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends a request line one byte every 200 ms and reports how long the server kept the connection open;
/// the whole line would take 10 s.
async fn dripped_until_closed(base: &str) -> Duration {
    let addr = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    let line = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaa\r\n\r\n";
    for byte in line {
        if stream.write_all(&[*byte]).await.is_err() {
            return started.elapsed();
        }
        let mut buf = [0u8; 256];
        // A closed connection reads as end of file (or an error); a live one has nothing to say yet.
        match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => panic!("the server answered a request whose head never finished"),
            Err(_) => {}
        }
    }
    panic!("the whole head was sent slowly and the connection stayed open ({:?})", started.elapsed());
}

#[tokio::test]
async fn a_request_head_that_trickles_in_is_cut_on_both_listeners() {
    let app = spawn_app_with(|s| {
        s.header_read_timeout_ms = 1_000;
        s.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    // A prompt request is still served.
    assert_eq!(common::client().get(format!("{}/health", app.base)).send().await.unwrap().status(), 200);
    for base in [app.base.clone(), app.metrics_base.clone().unwrap()] {
        let held = dripped_until_closed(&base).await;
        assert!(held >= Duration::from_millis(900) && held < Duration::from_secs(4), "{base}: the connection was held {held:?}");
    }
}

#[tokio::test]
async fn a_large_sign_in_form_is_refused_without_being_read() {
    let app = spawn_app_with(|_| {}).await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let size = 1024 * 1024;
    let head = format!(
        "POST /console/sign-in HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {size}\r\n\r\n"
    );
    let started = Instant::now();
    stream.write_all(head.as_bytes()).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    // The body is offered slowly, 64 KiB a second: read whole, it would take 16 s.
    let sender = tokio::spawn(async move {
        let chunk = format!("credential={}", "a".repeat(64 * 1024 - 11));
        for _ in 0..16 {
            if writer.write_all(chunk.as_bytes()).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), reader.read(&mut buf)).await.expect("no answer in 10 s").unwrap();
        assert!(n > 0, "closed without an answer");
        answer.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(3), "answered after {:?}", started.elapsed());
    sender.abort();
}
