//! Slow and silent clients (`edge::listener`): head trickling, silent sockets, idle
//! keep-alive connections, trickled uploads, the connection cap and the TLS handshake are
//! all cut by their configured limits, while a slow upstream answer or a long stream (work
//! the gateway does, not the client) outlives every one of them. Raw TCP plays the slow
//! client; timeouts are 1 s and outcomes are checked with bounds of 10 s or more.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use fake_upstream::FakeConfig;
use gatehouse_engine::config::{Config, LoadContext};
use gatehouse_engine::deps::{MapEnvironment, NoCredentialStore};
use gatehouse_tests::{CLIENT_KEY, TestGateway, base_yaml, sonnet};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Outcomes are awaited this long: ten times the limits under test.
const BOUND: Duration = Duration::from_secs(10);

/// All three client clocks at 1 s, plus `listen_extra` inside `listen: {...}`.
async fn gateway(fake: FakeConfig, listen_extra: &str, timeouts: &str) -> TestGateway {
    let (listen_extra, timeouts) = (listen_extra.to_owned(), timeouts.to_owned());
    TestGateway::start_with(fake, move |f, db| {
        let base = base_yaml(f, db).replace(
            "listen: {host: 127.0.0.1, port: 0}",
            &format!("listen: {{host: 127.0.0.1, port: 0{listen_extra}}}"),
        );
        format!("{base}timeouts: {{{timeouts}}}\n")
    })
    .await
}

const FAST: &str = "header_read_ms: 1000, request_body_idle_ms: 1000, keep_alive_idle_ms: 1000";

async fn connect(gw: &TestGateway) -> (OwnedReadHalf, OwnedWriteHalf) {
    TcpStream::connect(gw.handle.local_addr())
        .await
        .unwrap()
        .into_split()
}

/// Whether the server closes the connection within `limit` (bytes it sends are skipped).
async fn closed_within(read: &mut OwnedReadHalf, limit: Duration) -> bool {
    let mut buf = [0u8; 4096];
    tokio::time::timeout(limit, async {
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// One HTTP/1.1 response with a Content-Length: status and body.
async fn response(read: &mut OwnedReadHalf) -> (u16, String) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let status = head.split(' ').nth(1).unwrap().parse().unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if data.len() >= end + 4 + len {
                let body = String::from_utf8_lossy(&data[end + 4..end + 4 + len]).into_owned();
                return (status, body);
            }
        }
        let n = read.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before a whole response: {data:?}");
        data.extend_from_slice(&buf[..n]);
    }
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {CLIENT_KEY}\r\n\r\n")
}

/// Writes `bytes` one at a time, `every` apart, until done or the server closes.
fn trickle(mut write: OwnedWriteHalf, bytes: Vec<u8>, every: Duration) {
    tokio::spawn(async move {
        for b in bytes {
            if write.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
    });
}

#[tokio::test]
async fn connections_trickling_a_head_are_closed() {
    let gw = gateway(FakeConfig::default(), "", FAST).await;
    let mut readers = Vec::new();
    for _ in 0..20 {
        let (read, mut write) = connect(&gw).await;
        write
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nx-slow: ")
            .await
            .unwrap();
        // 60 bytes, 200 ms apart: 12 s of a head that never ends.
        trickle(write, vec![b'a'; 60], Duration::from_millis(200));
        readers.push(read);
    }
    for (i, read) in readers.iter_mut().enumerate() {
        assert!(
            closed_within(read, BOUND).await,
            "connection {i} still open"
        );
    }
    let r = gw.client.get(gw.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn silent_sockets_are_closed() {
    let gw = gateway(FakeConfig::default(), "", FAST).await;
    let mut open = Vec::new();
    for _ in 0..50 {
        open.push(connect(&gw).await);
    }
    for (i, (read, _write)) in open.iter_mut().enumerate() {
        assert!(
            closed_within(read, BOUND).await,
            "silent socket {i} still open"
        );
    }
}

#[tokio::test]
async fn idle_keep_alive_connections_last_until_their_own_timeout() {
    // The head clock (1 s) does not run between requests: the idle clock (6 s) does.
    let timeouts = "header_read_ms: 1000, keep_alive_idle_ms: 6000";
    let gw = gateway(FakeConfig::default(), "", timeouts).await;
    let (mut read, mut write) = connect(&gw).await;
    write.write_all(get("/healthz").as_bytes()).await.unwrap();
    assert_eq!(response(&mut read).await.0, 200);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    write.write_all(get("/healthz").as_bytes()).await.unwrap();
    assert_eq!(
        response(&mut read).await.0,
        200,
        "reused after the head timeout"
    );
    assert!(closed_within(&mut read, Duration::from_secs(20)).await);
}

#[tokio::test]
async fn a_trickled_upload_gets_408_and_reaches_no_upstream() {
    let gw = gateway(FakeConfig::default(), "", FAST).await;
    let body = serde_json::to_vec(&sonnet(false)).unwrap();
    let (mut read, mut write) = connect(&gw).await;
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {CLIENT_KEY}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    write.write_all(head.as_bytes()).await.unwrap();
    // 5 bytes a second: the body would take far longer than the test.
    trickle(write, body, Duration::from_millis(200));
    let (status, text) = tokio::time::timeout(BOUND, response(&mut read))
        .await
        .expect("an answer while the upload trickles");
    assert_eq!(status, 408, "{text}");
    let err: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "timeout_error");
    assert!(closed_within(&mut read, BOUND).await);
    assert!(
        gw.fake.requests().is_empty(),
        "nothing reached the upstream"
    );
    let rows = gw.handle.store().recent_usage(10).await.unwrap();
    assert!(rows.is_empty(), "nothing was metered: {rows:?}");
}

#[tokio::test]
async fn a_slow_but_steady_upload_is_served() {
    let gw = gateway(FakeConfig::default(), "", FAST).await;
    let mut req = sonnet(false);
    req["messages"][0]["content"] = "x".repeat(8 * 1024).into();
    let body = serde_json::to_vec(&req).unwrap();
    let (mut read, mut write) = connect(&gw).await;
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {CLIENT_KEY}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    write.write_all(head.as_bytes()).await.unwrap();
    // 2 KiB every 600 ms: about 3 s in all, three times the 1 s body clock.
    for chunk in body.chunks(2048) {
        write.write_all(chunk).await.unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    let (status, text) = response(&mut read).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(gw.usage_rows(1).await.len(), 1);
}

#[tokio::test]
async fn the_connection_cap_holds_extra_connections_until_a_slot_frees() {
    let timeouts = "header_read_ms: 5000, keep_alive_idle_ms: 30000";
    let gw = gateway(FakeConfig::default(), ", max_connections: 2", timeouts).await;
    let (mut read_a, mut write_a) = connect(&gw).await;
    let (mut read_b, mut write_b) = connect(&gw).await;
    for (read, write) in [(&mut read_a, &mut write_a), (&mut read_b, &mut write_b)] {
        write.write_all(get("/healthz").as_bytes()).await.unwrap();
        assert_eq!(response(read).await.0, 200);
    }
    // A third connection is queued by the kernel, not served.
    let (mut read_c, mut write_c) = connect(&gw).await;
    write_c.write_all(get("/healthz").as_bytes()).await.unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(1500), read_c.peek(&mut byte)).await;
    assert!(early.is_err(), "served past the cap: {early:?}");
    // Connections already open keep working.
    write_b.write_all(get("/healthz").as_bytes()).await.unwrap();
    assert_eq!(response(&mut read_b).await.0, 200);
    // Closing one frees its slot for the waiting connection.
    drop((read_a, write_a));
    let (status, _) = tokio::time::timeout(BOUND, response(&mut read_c))
        .await
        .expect("served once a slot freed");
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_long_stream_outlives_every_client_timeout() {
    // About 5 s of stream: 2.5 s before the first token, then 8 tokens 300 ms apart.
    let fake = FakeConfig {
        first_token_delay_ms: 2500,
        token_interval_ms: 300,
        output_tokens: 8,
        ..FakeConfig::default()
    };
    let gw = gateway(fake, "", &format!("{FAST}, tls_handshake_ms: 1000")).await;
    let r = gw.messages(sonnet(true)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert_eq!(text.matches("event: content_block_delta").count(), 8);
    assert!(text.contains("event: message_stop"), "{text}");
    assert_eq!(gw.usage_rows(1).await[0].output_tokens, 8);
}

#[tokio::test]
async fn an_http2_stream_outlives_every_client_timeout() {
    let fake = FakeConfig {
        first_token_delay_ms: 2500,
        token_interval_ms: 300,
        output_tokens: 4,
        ..FakeConfig::default()
    };
    let gw = gateway(fake, "", FAST).await;
    let h2 = reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let r = h2
        .post(gw.url("/v1/messages"))
        .header("x-api-key", CLIENT_KEY)
        .json(&sonnet(true))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (r.status().as_u16(), r.version()),
        (200, reqwest::Version::HTTP_2)
    );
    let text = r.text().await.unwrap();
    assert_eq!(text.matches("event: content_block_delta").count(), 4);
    assert!(text.contains("event: message_stop"), "{text}");
}

#[tokio::test]
async fn a_slow_first_byte_outlives_every_client_timeout() {
    let fake = FakeConfig {
        header_delay_ms: 3000,
        ..FakeConfig::default()
    };
    let gw = gateway(fake, "", FAST).await;
    let r = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["type"], "message");
}

#[tokio::test]
async fn two_hosts_are_refused_with_400() {
    let gw = gateway(FakeConfig::default(), "", FAST).await;
    let port = gw.handle.local_addr().port();
    for head in [
        "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n".to_owned(),
        "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n".to_owned(),
        format!("GET http://127.0.0.1:{port}/v1/models HTTP/1.1\r\nHost: localhost:{port}\r\n"),
    ] {
        let (mut read, mut write) = connect(&gw).await;
        let req = format!("{head}x-api-key: {CLIENT_KEY}\r\n\r\n");
        write.write_all(req.as_bytes()).await.unwrap();
        let (status, text) = response(&mut read).await;
        assert_eq!(status, 400, "{head}: {text}");
        let err: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(err["error"]["type"], "invalid_request_error");
        assert!(
            err["error"]["message"].as_str().unwrap().contains("Host"),
            "{text}"
        );
    }
    // One Host, or an absolute target with the same authority, is served.
    for head in [
        "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_owned(),
        format!("GET http://127.0.0.1:{port}/v1/models HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"),
    ] {
        let (mut read, mut write) = connect(&gw).await;
        let req = format!("{head}x-api-key: {CLIENT_KEY}\r\n\r\n");
        write.write_all(req.as_bytes()).await.unwrap();
        assert_eq!(response(&mut read).await.0, 200, "{head}");
    }
    assert!(gw.fake.requests().is_empty());
}

#[tokio::test]
async fn a_stalled_tls_handshake_is_closed_and_https_still_works() {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let (cert_pem, key_pem) = (cert.cert.pem(), cert.signing_key.serialize_pem());
    let fake = fake_upstream::FakeUpstream::start(FakeConfig::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = base_yaml(&fake.url(), &dir.path().join("g.db")).replace(
        "listen: {host: 127.0.0.1, port: 0}",
        "listen: {host: 127.0.0.1, port: 0, tls: {cert: '${file:/c.pem}', key: '${file:/k.pem}'}}",
    ) + &format!("timeouts: {{{FAST}, tls_handshake_ms: 1000}}\n");
    let env = MapEnvironment::default()
        .with_var("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1")
        .with_file("/c.pem", &cert_pem)
        .with_file("/k.pem", &key_pem);
    let ctx = LoadContext {
        env: &env,
        credentials: &NoCredentialStore,
        default_data_dir: dir.path().into(),
    };
    let config = Config::from_yaml(&yaml, &ctx).unwrap();
    let gw = TestGateway::start_config(config, fake, dir).await;
    // Silent, and the first bytes of a ClientHello that never ends.
    let (mut silent, _w1) = connect(&gw).await;
    let (mut partial, mut w2) = connect(&gw).await;
    w2.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).await.unwrap();
    assert!(
        closed_within(&mut silent, BOUND).await,
        "silent handshake still open"
    );
    assert!(
        closed_within(&mut partial, BOUND).await,
        "partial handshake still open"
    );
    let port = gw.handle.local_addr().port();
    // ALPN picks the protocol: HTTP/2 when offered, HTTP/1.1 for a client offering only it.
    let ca = reqwest::Certificate::from_pem(cert_pem.as_bytes()).unwrap();
    for (http1_only, version) in [
        (false, reqwest::Version::HTTP_2),
        (true, reqwest::Version::HTTP_11),
    ] {
        let mut client = reqwest::Client::builder()
            .no_proxy()
            .add_root_certificate(ca.clone());
        if http1_only {
            client = client.http1_only();
        }
        let r = client
            .build()
            .unwrap()
            .get(format!("https://localhost:{port}/healthz"))
            .send()
            .await
            .unwrap();
        assert_eq!((r.status().as_u16(), r.version()), (200, version));
    }
}

#[tokio::test]
async fn an_http2_preface_arriving_in_pieces_is_still_http2() {
    // The peek sees only part of the preface: the connection goes to hyper's automatic
    // builder, which reads the rest and answers with HTTP/2's SETTINGS frame.
    let gw = gateway(FakeConfig::default(), "", FAST).await;
    let (mut read, mut write) = connect(&gw).await;
    write.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    write.write_all(b"\r\nSM\r\n\r\n").await.unwrap();
    // An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
    write.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    let mut head = [0u8; 9];
    tokio::time::timeout(BOUND, read.read_exact(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(head[3], 4, "the first frame is SETTINGS: {head:?}");
}
