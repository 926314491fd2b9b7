//! End-to-end tests of the fake upstream over real loopback sockets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use fake_upstream::{FakeConfig, FakeUpstream, Fault};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

async fn send(
    c: &HttpClient,
    method: Method,
    url: String,
    body: &str,
) -> Result<Response<Incoming>, hyper_util::client::legacy::Error> {
    let req = Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    c.request(req).await
}

async fn post_messages(fake: &FakeUpstream, body: Value) -> Response<Incoming> {
    send(
        &client(),
        Method::POST,
        format!("{}/v1/messages", fake.url()),
        &body.to_string(),
    )
    .await
    .unwrap()
}

async fn text(resp: Response<Incoming>) -> String {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Parses `event: X\ndata: Y\n\n` blocks into (name, data) pairs.
fn parse_sse(s: &str) -> Vec<(String, Value)> {
    s.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|b| {
            let mut lines = b.lines();
            let name = lines
                .next()
                .unwrap()
                .strip_prefix("event: ")
                .unwrap()
                .to_owned();
            let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
            (name, serde_json::from_str(data).unwrap())
        })
        .collect()
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(n, _)| n.as_str()).collect()
}

fn stream_req() -> Value {
    json!({"model": "claude-test", "max_tokens": 100, "stream": true,
           "messages": [{"role": "user", "content": "hi"}]})
}

fn status_fault(status: u16, retry_after: Option<u32>) -> Fault {
    Fault::Status {
        status,
        retry_after,
        error_type: None,
        message: None,
    }
}

#[tokio::test]
async fn sse_event_order_and_usage() {
    let cfg = FakeConfig {
        output_tokens: 5,
        input_tokens: 11,
        cache_read_input_tokens: 7,
        cache_creation_5m_tokens: 3,
        cache_creation_1h_tokens: 4,
        web_search_requests: 2,
        ..FakeConfig::default()
    };
    let fake = FakeUpstream::start(cfg.clone()).await.unwrap();
    let resp = post_messages(&fake, stream_req()).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let h = resp.headers();
    assert_eq!(h["content-type"], "text/event-stream");
    assert_eq!(h["cache-control"], "no-cache");
    assert!(h["request-id"].to_str().unwrap().starts_with("req_fake_"));
    assert_eq!(h["anthropic-organization-id"], "org-fake");
    assert_eq!(h["via"], "1.1 fake");
    let events = parse_sse(&text(resp).await);
    let mut expected = vec!["message_start", "content_block_start", "ping"];
    expected.extend(["content_block_delta"; 5]);
    expected.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names(&events), expected);

    let msg = &events[0].1["message"];
    assert!(msg["id"].as_str().unwrap().starts_with("msg_fake_"));
    assert_eq!(msg["model"], "claude-test");
    assert_eq!(msg["content"], json!([]));
    let start_usage = &msg["usage"];
    assert_eq!(start_usage["input_tokens"], 11);
    assert_eq!(start_usage["cache_read_input_tokens"], 7);
    assert_eq!(start_usage["cache_creation_input_tokens"], 7);
    assert_eq!(
        start_usage["cache_creation"]["ephemeral_5m_input_tokens"],
        3
    );
    assert_eq!(
        start_usage["cache_creation"]["ephemeral_1h_input_tokens"],
        4
    );
    assert_eq!(start_usage["output_tokens"], 1);

    let streamed: String = events[3..8]
        .iter()
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, cfg.reply_text);

    let delta = &events[9].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    let usage = &delta["usage"];
    assert_eq!(usage["output_tokens"], 5);
    assert_eq!(usage["input_tokens"], 11);
    assert_eq!(usage["server_tool_use"]["web_search_requests"], 2);

    let streams = fake.streams();
    assert_eq!(streams.len(), 1);
    assert!(streams[0].completed);
    assert!(streams[0].last_event_sent_at.is_some());
    assert_eq!(&streams[0].usage, usage);
    assert_eq!(streams[0].request_index, 0);
    assert_eq!(fake.requests()[0].body["model"], "claude-test");
    fake.shutdown().await;
}

#[tokio::test]
async fn json_response_and_model_override() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let mut req = stream_req();
    req["stream"] = json!(false);
    let resp = post_messages(&fake, req.clone()).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "application/json");
    assert_eq!(resp.headers()["cf-ray"], "fake");
    let v: Value = serde_json::from_str(&text(resp).await).unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert_eq!(v["model"], "claude-test");
    assert_eq!(v["content"][0]["text"], "Hello from the fake upstream.");
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["usage"]["output_tokens"], 8);
    assert_eq!(v["usage"]["input_tokens"], 25);
    assert!(v["usage"].get("server_tool_use").is_none());
    assert_eq!(fake.streams()[0].usage, v["usage"]);

    fake.set_config(FakeConfig {
        model_override: Some("other-model".into()),
        ..fake.config()
    });
    let v: Value = serde_json::from_str(&text(post_messages(&fake, req).await).await).unwrap();
    assert_eq!(v["model"], "other-model");
}

#[tokio::test]
async fn status_fault_with_retry_after_is_consumed_once() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    fake.push_fault(status_fault(429, Some(3)));
    let resp = post_messages(&fake, stream_req()).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()["retry-after"], "3");
    assert!(resp.headers().contains_key("request-id"));
    let v: Value = serde_json::from_str(&text(resp).await).unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "rate_limit_error");

    fake.push_fault(Fault::Status {
        status: 529,
        retry_after: None,
        error_type: None,
        message: Some("busy".into()),
    });
    let resp = post_messages(&fake, stream_req()).await;
    assert_eq!(resp.status().as_u16(), 529);
    assert!(!resp.headers().contains_key("retry-after"));
    let v: Value = serde_json::from_str(&text(resp).await).unwrap();
    assert_eq!(
        v["error"],
        json!({"type": "overloaded_error", "message": "busy"})
    );

    let resp = post_messages(&fake, stream_req()).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(fake.requests().len(), 3);
    assert_eq!(fake.streams().len(), 1);
    assert_eq!(fake.streams()[0].request_index, 2);
}

#[tokio::test]
async fn mid_stream_error_event_ends_stream() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    fake.push_fault(Fault::MidStreamError { after_deltas: 2 });
    let events = parse_sse(&text(post_messages(&fake, stream_req()).await).await);
    assert_eq!(
        names(&events),
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "error"
        ]
    );
    assert_eq!(
        events[5].1,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    let s = &fake.streams()[0];
    assert!(s.completed && s.last_event_sent_at.is_some());
}

#[tokio::test]
async fn reset_before_headers_is_a_client_error() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    fake.push_fault(Fault::ResetBeforeHeaders);
    let url = format!("{}/v1/messages", fake.url());
    let err = send(&client(), Method::POST, url, &stream_req().to_string()).await;
    assert!(err.is_err());
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(fake.requests()[0].body["model"], "claude-test");
    assert!(fake.streams().is_empty());
}

#[tokio::test]
async fn reset_mid_stream_aborts_body() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    fake.push_fault(Fault::ResetMidStream { after_deltas: 1 });
    let resp = post_messages(&fake, stream_req()).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body();
    let mut received = Vec::new();
    let err = loop {
        match body.frame().await {
            Some(Ok(f)) => received.extend_from_slice(f.data_ref().map_or(&[][..], |d| &d[..])),
            Some(Err(e)) => break Some(e),
            None => break None,
        }
    };
    assert!(err.is_some(), "body must end with an error");
    let got = String::from_utf8(received).unwrap();
    assert!(got.contains("event: message_start"));
    assert!(!got.contains("message_stop"));
    assert!(!fake.streams()[0].completed);
}

#[tokio::test]
async fn pacing_really_streams() {
    let cfg = FakeConfig {
        output_tokens: 5,
        token_interval_ms: 50,
        ..FakeConfig::default()
    };
    let fake = FakeUpstream::start(cfg).await.unwrap();
    let resp = post_messages(&fake, stream_req()).await;
    let mut body = resp.into_body();
    let mut all = String::new();
    let mut first_delta_at = None;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            all.push_str(std::str::from_utf8(&data).unwrap());
            if first_delta_at.is_none() && all.contains("content_block_delta") {
                first_delta_at = Some(Instant::now());
            }
        }
    }
    assert_eq!(parse_sse(&all).len(), 11);
    let s = &fake.streams()[0];
    assert!(s.completed);
    assert!(first_delta_at.unwrap() < s.last_event_sent_at.unwrap());
}

/// Raw HTTP/1.1 exchange with `Connection: close`; returns the whole response.
async fn raw(fake: &FakeUpstream, request: &str) -> String {
    let mut s = TcpStream::connect(fake.addr()).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    String::from_utf8(out).unwrap()
}

#[tokio::test]
async fn headers_recorded_lower_case_and_query_ignored() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let body = r#"{"model":"m","max_tokens":5,"messages":[]}"#;
    let req = format!(
        "POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nX-Api-Key: sk-Test\r\nAnthropic-Version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let resp = raw(&fake, &req).await;
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    let r = &fake.requests()[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.query.as_deref(), Some("beta=true"));
    assert_eq!(r.body_bytes, body.len());
    let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "host",
            "x-api-key",
            "anthropic-version",
            "content-type",
            "content-length",
            "connection"
        ]
    );
    assert_eq!(r.headers[1].1, "sk-Test");
}

#[tokio::test]
async fn count_tokens_models_unknown_and_invalid_json() {
    let fake = FakeUpstream::start(FakeConfig {
        input_tokens: 42,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let c = client();
    let url = format!("{}/v1/messages/count_tokens", fake.url());
    let resp = send(
        &c,
        Method::POST,
        url.clone(),
        r#"{"model":"m","messages":[]}"#,
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(text(resp).await, r#"{"input_tokens":42}"#);

    fake.push_fault(status_fault(401, None));
    let resp = send(&c, Method::POST, url, "{}").await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert!(text(resp).await.contains("authentication_error"));

    let resp = send(&c, Method::GET, format!("{}/v1/models", fake.url()), "")
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&text(resp).await).unwrap();
    assert_eq!(v["data"][0]["id"], "claude-sonnet-4-5");
    assert_eq!(v["has_more"], false);

    let resp = send(&c, Method::HEAD, format!("{}/api/hello", fake.url()), "")
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let resp = send(&c, Method::GET, format!("{}/nope", fake.url()), "")
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let v: Value = serde_json::from_str(&text(resp).await).unwrap();
    assert_eq!(v["error"]["type"], "not_found_error");

    let resp = send(
        &c,
        Method::POST,
        format!("{}/v1/messages", fake.url()),
        "{not json",
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert!(text(resp).await.contains("invalid_request_error"));

    let paths: Vec<String> = fake.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            "/v1/messages/count_tokens",
            "/v1/messages/count_tokens",
            "/v1/models",
            "/api/hello",
            "/nope",
            "/v1/messages"
        ]
    );
    assert!(fake.streams().is_empty());
}

#[tokio::test]
async fn client_disconnect_stops_stream() {
    let cfg = FakeConfig {
        output_tokens: 20,
        token_interval_ms: 50,
        ..FakeConfig::default()
    };
    let fake = FakeUpstream::start(cfg).await.unwrap();
    let body = stream_req().to_string();
    let req = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(fake.addr()).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("content_block_delta") {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0);
        seen.extend_from_slice(&buf[..n]);
    }
    drop(s);
    // The full stream would take ~1s; give it well over that.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let st = &fake.streams()[0];
    assert!(!st.completed);
    assert!(st.last_event_sent_at.is_none());
}

#[tokio::test]
async fn recording_off_keeps_metadata_only() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    fake.set_recording(false);
    let resp = post_messages(&fake, stream_req()).await;
    let events = parse_sse(&text(resp).await);
    assert_eq!(events.len(), 14);
    // Default: 8 tokens for a 5-word reply; deltas still spell the reply exactly.
    let streamed: String = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, FakeConfig::default().reply_text);
    let r = &fake.requests()[0];
    assert_eq!(r.body, Value::Null);
    assert!(r.body_bytes > 0);
    fake.clear_records();
    assert!(fake.requests().is_empty() && fake.streams().is_empty());
}

#[tokio::test]
async fn control_api_round_trip() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let c = client();
    let ctl = |p: &str| format!("{}/_fake/{p}", fake.url());
    let resp = send(
        &c,
        Method::POST,
        ctl("config"),
        r#"{"reply_text":"abc def","output_tokens":2}"#,
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(fake.config().reply_text, "abc def");
    let fault = r#"{"kind":"status","status":503,"retry_after":7}"#;
    let resp = send(&c, Method::POST, ctl("faults"), fault).await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = send(&c, Method::POST, ctl("faults"), r#"{"kind":"bogus"}"#)
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);

    let mut req = stream_req();
    req["stream"] = json!(false);
    let resp = post_messages(&fake, req.clone()).await;
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers()["retry-after"], "7");
    let v: Value =
        serde_json::from_str(&text(post_messages(&fake, req.clone()).await).await).unwrap();
    assert_eq!(v["content"][0]["text"], "abc def");
    assert_eq!(v["usage"]["output_tokens"], 2);

    let resp = send(&c, Method::GET, ctl("requests"), "").await.unwrap();
    let reqs: Vec<Value> = serde_json::from_str(&text(resp).await).unwrap();
    assert_eq!(reqs.len(), 2, "control requests are not recorded");
    assert_eq!(reqs[1]["body"]["model"], "claude-test");
    let resp = send(&c, Method::GET, ctl("streams"), "").await.unwrap();
    let streams: Vec<Value> = serde_json::from_str(&text(resp).await).unwrap();
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0]["request_index"], 1);
    assert_eq!(streams[0]["completed"], true);
    assert_eq!(streams[0]["usage"]["output_tokens"], 2);
    assert!(streams[0]["last_event_ms_after_start"].as_f64().unwrap() >= 0.0);

    let resp = send(&c, Method::POST, ctl("recording"), r#"{"on":false}"#)
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    post_messages(&fake, req).await;
    assert_eq!(fake.requests()[2].body, Value::Null);
    let resp = send(&c, Method::POST, ctl("clear"), "").await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn binary_prints_address_and_refuses_non_loopback() {
    use std::process::Stdio;
    use tokio::io::AsyncBufReadExt;
    use tokio::process::Command;

    let exe = env!("CARGO_BIN_EXE_fake-upstream");
    let status = Command::new(exe)
        .args(["--listen", "0.0.0.0:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(!status.success());

    let mut child = Command::new(exe)
        .args([
            "--exit-on-stdin-eof",
            "--config-json",
            r#"{"input_tokens":9}"#,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next_line().await.unwrap().unwrap();
    let url = line
        .strip_prefix("fake-upstream listening on ")
        .unwrap()
        .to_owned();
    assert!(url.starts_with("http://127.0.0.1:"));
    let resp = send(
        &client(),
        Method::POST,
        format!("{url}/v1/messages/count_tokens"),
        "{}",
    )
    .await
    .unwrap();
    assert_eq!(text(resp).await, r#"{"input_tokens":9}"#);
    drop(child.stdin.take());
    let status = child.wait().await.unwrap();
    assert!(status.success());
}
