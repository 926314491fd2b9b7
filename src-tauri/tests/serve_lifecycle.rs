//! `gatehouse serve` as a container or systemd runs it: `gatehouse healthcheck` (the image's
//! HEALTHCHECK) against `/readyz`, and SIGTERM letting an in-flight streamed answer finish
//! before the process exits 0 with its usage recorded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

struct Served {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

async fn serve(fake: &FakeUpstream) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n  - {{name: primary, provider: anthropic, base_url: \"{}\", auth: {{api_key: \"${{OPERATOR_KEY}}\"}}}}\nclient_keys: [{{id: dev, key: \"${{CLIENT_KEY}}\"}}]\n",
            dir.path().join("g.db").display(),
            fake.url()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["serve", "--config", config.to_str().unwrap()])
        .env_clear()
        // The fake upstream is on loopback: the reference's switch allows it.
        .env("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1")
        .env("PATH", "/usr/bin:/bin")
        .env("OPERATOR_KEY", OPERATOR_KEY)
        .env("CLIENT_KEY", CLIENT_KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let base = line
        .strip_prefix("gatehouse: listening on ")
        .expect("listening line")
        .to_owned();
    Served {
        child,
        base,
        _dir: dir,
    }
}

async fn healthcheck(url: &str) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["healthcheck", url, "--timeout", "5"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        // A proxy in the environment must not be used for the local check.
        .env("http_proxy", "http://127.0.0.1:9")
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A one-request HTTP server answering `status`, for the failing side of the check.
async fn answer_once(status: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let _ = socket.read(&mut buf).await;
        let reply = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        socket.write_all(reply.as_bytes()).await.unwrap();
    });
    format!("http://{addr}/readyz")
}

#[tokio::test]
async fn healthcheck_exits_0_only_on_a_2xx_answer() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let mut served = serve(&fake).await;
    let (code, out, err) = healthcheck(&format!("{}/readyz", served.base)).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("/readyz: 200 OK"), "{out}");

    let (code, _, err) = healthcheck(&answer_once("503 Service Unavailable").await).await;
    assert_eq!(code, Some(1));
    assert!(err.starts_with("gatehouse: http://127.0.0.1:"), "{err}");
    assert!(err.contains("503 Service Unavailable"), "{err}");

    // Nobody listening: a connection error, not a hang.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (code, _, err) = healthcheck(&format!("http://{closed}/readyz")).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("cannot connect"), "{err}");

    let (code, _, err) = healthcheck("ftp://127.0.0.1/readyz").await;
    assert_eq!(code, Some(1));
    assert!(err.contains("scheme must be http or https"), "{err}");
    served.child.kill().await.unwrap();
}

#[tokio::test]
async fn sigterm_lets_the_in_flight_stream_finish_then_exits_0() {
    // 20 deltas 150 ms apart: the answer is still streaming when SIGTERM arrives.
    let fake = FakeUpstream::start(FakeConfig {
        reply_text: "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty".into(),
        output_tokens: 20,
        token_interval_ms: 150,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let mut served = serve(&fake).await;
    let mut response = reqwest::Client::new()
        .post(format!("{}/v1/messages", served.base))
        .bearer_auth(CLIENT_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&serde_json::json!({
            "model": "claude-sonnet-4-6",
            "max_tokens": 64,
            "stream": true,
            "messages": [{"role": "user", "content": "count"}]
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let first = response.chunk().await.unwrap().expect("a first chunk");
    let mut body = String::from_utf8_lossy(&first).into_owned();

    let pid = served.child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let terminated_at = Instant::now();

    // New connections are refused while the stream goes on.
    let addr = served.base.trim_start_matches("http://").to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if tokio::net::TcpStream::connect(&addr).await.is_err() {
            break;
        }
        assert!(Instant::now() < deadline, "still accepting after SIGTERM");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    while let Some(chunk) = response.chunk().await.unwrap() {
        body.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(
        terminated_at.elapsed() > Duration::from_millis(500),
        "the stream should have outlived the signal"
    );
    assert!(body.contains("event: message_stop"), "{body}");
    assert!(body.contains("twenty"), "{body}");

    let status = tokio::time::timeout(Duration::from_secs(30), served.child.wait())
        .await
        .expect("gatehouse exits after the drain")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let mut err = String::new();
    served
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .await
        .unwrap();
    assert!(err.contains("letting in-flight requests finish"), "{err}");
    let inference = err
        .lines()
        .find(|l| l.contains("\"evt\":\"inference\""))
        .unwrap_or_else(|| panic!("the drained request is recorded: {err}"));
    assert!(inference.contains("\"output_tokens\":20"), "{inference}");
    assert!(!err.contains(OPERATOR_KEY) && !err.contains(CLIENT_KEY));
}
