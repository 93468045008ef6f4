//! The server's connections over real sockets: the cap on connections served at once, idle
//! connections closed, a slow request head cut off, a body that stops half way answered 408, and an
//! early answer that reaches the client.

use crate::serve_support;

use std::time::Duration;

use dexaflow_admission::metrics::SERVER_CONNECTIONS_WAITED_TOTAL;
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serve_support::{eventually, recorder, sample, start_with};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most any wait for an event in these tests lasts.
const BOUND: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_past_the_cap_is_served_only_once_another_closes() {
    let recorder = recorder();
    let running = start_with(
        |settings, _| settings.max_connections = 2,
        |registry| registry,
        Some(&recorder),
    )
    .await;
    let first = running.client.connect().await;
    let _second = running.client.connect().await;
    let client = running.client.clone();
    let mut third = tokio::spawn(async move { client.post("/nowhere", "{}").await });

    let waited = eventually("the third connection to be counted as waiting", || {
        let scrape = recorder.handle().render();
        async move { sample(&scrape, SERVER_CONNECTIONS_WAITED_TOTAL).filter(|n| *n >= 1.0) }
    })
    .await;
    assert_eq!(waited, 1.0);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut third)
            .await
            .is_err(),
        "the third connection was answered while two were open"
    );

    drop(first);
    let answer = tokio::time::timeout(BOUND, third)
        .await
        .expect("the third connection answered once one closed")
        .expect("the client task");
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_kept_alive_connection_is_closed_after_the_idle_timeout() {
    let running = start_with(
        |settings, _| settings.idle_timeout = Duration::from_millis(200),
        |registry| registry,
        None,
    )
    .await;
    let tls = running.client.connect().await;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("an HTTP/1.1 handshake");
    let mut connection = tokio::spawn(connection);
    let request = Request::get("/nowhere")
        .header(http::header::HOST, "localhost")
        .body(Empty::<Bytes>::new())
        .expect("a request");
    let response = sender.send_request(request).await.expect("an answer");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert!(
        !connection.is_finished(),
        "the connection is kept alive after an answer"
    );

    // Ended, with or without TLS's close_notify: hyper drops the connection on its timeout.
    let _ended = tokio::time::timeout(BOUND, &mut connection)
        .await
        .expect("the server closed the idle connection")
        .expect("the connection task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sending_its_head_a_byte_at_a_time_is_disconnected() {
    let running = start_with(
        |settings, _| settings.idle_timeout = Duration::from_millis(200),
        |registry| registry,
        None,
    )
    .await;
    let (mut reader, mut writer) = tokio::io::split(running.client.connect().await);
    let head = b"POST /tasks/admit HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
    let deadline = tokio::time::Instant::now() + BOUND;
    let mut sent = 0usize;
    let mut read = Vec::new();
    let closed = loop {
        if tokio::time::Instant::now() > deadline {
            break false;
        }
        let byte = head.get(sent).copied().unwrap_or(b'a');
        if writer.write_all(&[byte]).await.is_err() {
            break true;
        }
        sent += 1;
        // The pace of a slow client, not a synchronisation: the server's answer is an EOF.
        let mut buffer = [0u8; 1024];
        match tokio::time::timeout(Duration::from_millis(20), reader.read(&mut buffer)).await {
            Ok(Ok(0) | Err(_)) => break true,
            Ok(Ok(n)) => read.extend_from_slice(&buffer[..n]),
            Err(_) => {}
        }
    };
    assert!(
        closed,
        "still connected after sending {sent} bytes of a head"
    );
    assert!(
        !String::from_utf8_lossy(&read).contains(" 200 "),
        "an unfinished head was answered: {read:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_sending_half_its_body_gets_408_and_loses_its_connection() {
    let running = start_with(|_, _| {}, |registry| registry, None).await;
    let mut tls = running.client.connect().await;
    // 400 bytes promised, 200 sent, then silence; the deadline is 90% of 200ms.
    let head = "POST /pods/validate?timeout=200ms HTTP/1.1\r\nHost: localhost\r\n\
                Content-Type: application/json\r\nContent-Length: 400\r\n\r\n";
    tls.write_all(head.as_bytes())
        .await
        .expect("the head is sent");
    tls.write_all(&[b' '; 200])
        .await
        .expect("half the body is sent");
    tls.flush().await.expect("flushed");

    let mut answer = Vec::new();
    let _ = tokio::time::timeout(BOUND, tls.read_to_end(&mut answer))
        .await
        .expect("the server answers and closes the connection");
    let text = String::from_utf8_lossy(&answer).to_lowercase();
    assert!(text.starts_with("http/1.1 408"), "no 408: {text:?}");
    assert!(text.contains("connection: close"), "{text:?}");
    assert!(
        !text.contains("\"response\""),
        "a half body was judged: {text:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_declared_over_the_cap_gets_its_413_not_a_reset_every_time() {
    let body = vec![b' '; 70 * 1024];
    let head = format!("Content-Length: {}\r\n", body.len());
    let pieces: Vec<Vec<u8>> = body.chunks(1024).map(<[u8]>::to_vec).collect();
    over_the_cap_answered_413(&head, &pieces).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_far_over_the_cap_gets_its_413_not_a_reset_every_time() {
    let mut pieces: Vec<Vec<u8>> = (0..512)
        .map(|_| [b"400\r\n".as_slice(), &[b' '; 1024], b"\r\n"].concat())
        .collect();
    pieces.push(b"0\r\n\r\n".to_vec());
    over_the_cap_answered_413("Transfer-Encoding: chunked\r\n", &pieces).await;
}

/// POSTs a body (framed by `framing`, sent as `pieces`) over a 64 KiB cap, 20 times on new
/// connections, as a simple client does: the head, the body in pieces, then the answer. Each
/// time the whole request is sent and the answer read is the 413: a client whose write fails
/// (the server closed and reset) never reads the answer.
async fn over_the_cap_answered_413(framing: &str, pieces: &[Vec<u8>]) {
    let running = start_with(
        |settings, _| settings.max_body_bytes = 64 * 1024,
        |registry| registry,
        None,
    )
    .await;
    for attempt in 1..=20 {
        let mut tls = running.client.connect().await;
        let head = format!(
            "POST /pods/validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             {framing}Connection: close\r\n\r\n"
        );
        let mut written = tls.write_all(head.as_bytes()).await;
        for piece in pieces {
            written = written.and(tls.write_all(piece).await);
            written = written.and(tls.flush().await);
        }
        assert!(
            written.is_ok(),
            "attempt {attempt}: the request could not be sent whole: {written:?}"
        );
        let mut answer = Vec::new();
        let outcome = tokio::time::timeout(BOUND, tls.read_to_end(&mut answer))
            .await
            .expect("the server ends the connection");
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.starts_with("HTTP/1.1 413"),
            "attempt {attempt}: no 413 ({outcome:?}): {text:?}"
        );
        assert!(
            text.contains("the body is larger than 65536 bytes"),
            "attempt {attempt}: {text:?}"
        );
    }
}
