//! `oidc.use_proxy`: the gateway's IdP traffic (discovery, JWKS, token) goes through the
//! environment's `HTTP_PROXY` (an in-test forward proxy on loopback that records each
//! request it relays), and hosts in `NO_PROXY` go direct. The test IdP speaks plain http,
//! so the proxy sees absolute-form requests (an https IdP would be reached by CONNECT).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use gatehouse_engine::deps::MapEnvironment;
use gatehouse_tests::{SESSION_SECRET_A, SignInOptions, device_sign_in, sign_in_gateway_opts};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A forward proxy for absolute-form http requests: one request per connection
/// (`Connection: close` toward the origin), each recorded as `METHOD path`.
async fn start_proxy() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let (mut client, _) = listener.accept().await.unwrap();
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let mut lines = text.split("\r\n");
                let request_line = lines.next().unwrap().to_owned();
                let mut parts = request_line.split(' ');
                let (method, target) = (parts.next().unwrap(), parts.next().unwrap());
                let target = url::Url::parse(target).expect("absolute-form");
                log.lock()
                    .unwrap()
                    .push(format!("{method} {}", target.path()));
                let addr = format!(
                    "{}:{}",
                    target.host_str().unwrap(),
                    target.port_or_known_default().unwrap()
                );
                let mut origin = tokio::net::TcpStream::connect(addr).await.unwrap();
                let path = match target.query() {
                    Some(q) => format!("{}?{q}", target.path()),
                    None => target.path().to_owned(),
                };
                let mut out = format!("{method} {path} HTTP/1.1\r\n");
                for line in lines.filter(|l| !l.is_empty()) {
                    let name = line
                        .split(':')
                        .next()
                        .unwrap_or_default()
                        .to_ascii_lowercase();
                    if name != "connection" && name != "proxy-connection" {
                        out.push_str(line);
                        out.push_str("\r\n");
                    }
                }
                out.push_str("Connection: close\r\n\r\n");
                origin.write_all(out.as_bytes()).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut origin).await;
            });
        }
    });
    (url, seen)
}

async fn signed_in_through(no_proxy: Option<&str>) -> Vec<String> {
    let (proxy, seen) = start_proxy().await;
    let mut env = MapEnvironment::default().with_var("HTTP_PROXY", &proxy);
    if let Some(n) = no_proxy {
        env = env.with_var("NO_PROXY", n);
    }
    let opts = SignInOptions {
        gateway_env: Some(env),
        ..Default::default()
    };
    let s = sign_in_gateway_opts(&[SESSION_SECRET_A], "  use_proxy: true\n", &opts).await;
    let (status, body) = device_sign_in(&s, "alice").await;
    assert_eq!(status, 200, "{body}");
    let relayed = seen.lock().unwrap().clone();
    drop(s);
    relayed
}

#[tokio::test]
async fn idp_traffic_goes_through_the_proxy() {
    let seen = signed_in_through(None).await;
    assert!(
        seen.iter()
            .any(|r| r == "GET /.well-known/openid-configuration"),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|r| r.starts_with("POST ") && r.contains("token")),
        "{seen:?}"
    );
    assert!(seen.iter().any(|r| r.contains("jwks")), "{seen:?}");
}

#[tokio::test]
async fn no_proxy_hosts_go_direct() {
    let seen = signed_in_through(Some("127.0.0.1")).await;
    assert!(seen.is_empty(), "{seen:?}");
}
