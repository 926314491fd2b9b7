#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;

use super::*;
use crate::config::shaping::ServerTool;

fn asked(allowed: &[&str]) -> Asked {
    Asked {
        tool: ServerTool::WebFetch,
        name: "web_fetch".into(),
        max_uses: 5,
        allowed: allowed.iter().map(|s| s.to_string()).collect(),
        blocked: Vec::new(),
    }
}

fn config(allow_private_networks: bool) -> WebFetchConfig {
    WebFetchConfig {
        max_bytes: 1000,
        timeout: Duration::from_secs(5),
        allow_private_networks,
    }
}

const STRICT: Reach = Reach {
    allow_loopback: false,
    allow_private: false,
};

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

#[test]
fn literal_addresses_are_judged_before_any_request() {
    let a = asked(&[]);
    for blocked in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://127.0.0.1:8080/",
        "http://[::1]/",
        "http://0.0.0.0/",
        "http://10.1.2.3/admin",
        "http://192.168.1.1/",
        "http://172.20.0.1/",
        "http://100.64.0.1/",
        "http://[fd12::1]/",
        "http://[::ffff:10.0.0.1]/",
        "http://[::ffff:169.254.169.254]/",
        "file:///etc/passwd",
        "https://user:pw@example.com/",
    ] {
        assert_eq!(
            check(&url(blocked), &a, STRICT),
            Err("url_not_allowed"),
            "{blocked}"
        );
    }
    assert_eq!(check(&url("https://example.com/"), &a, STRICT), Ok(()));
    assert_eq!(check(&url("http://93.184.215.14/"), &a, STRICT), Ok(()));
    let open = Reach {
        allow_loopback: true,
        allow_private: true,
    };
    assert_eq!(check(&url("http://10.1.2.3/"), &a, open), Ok(()));
    assert_eq!(check(&url("http://127.0.0.1/"), &a, open), Ok(()));
    // The metadata address stays refused whatever is allowed.
    assert_eq!(
        check(&url("http://169.254.169.254/"), &a, open),
        Err("url_not_allowed")
    );
    let long = format!("https://example.com/{}", "a".repeat(2100));
    assert_eq!(check(&url(&long), &a, open), Err("url_too_long"));
    let only = asked(&["docs.rs"]);
    assert_eq!(check(&url("https://docs.rs/x"), &only, STRICT), Ok(()));
    assert_eq!(
        check(&url("https://example.com/"), &only, STRICT),
        Err("url_not_allowed")
    );
}

async fn server() -> SocketAddr {
    let app = Router::new()
        .route(
            "/page",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    "<html><head><title>Fake page</title></head><body><p>Hello &amp; welcome.</p></body></html>",
                )
            }),
        )
        .route(
            "/big",
            get(|| async { ([(header::CONTENT_TYPE, "text/plain")], "x".repeat(5000)) }),
        )
        .route(
            "/pdf",
            get(|| async { ([(header::CONTENT_TYPE, "application/pdf")], "%PDF-1.7") }),
        )
        .route("/hop", get(|| async { Redirect::to("/page").into_response() }))
        .route(
            "/to-metadata",
            get(|| async { Redirect::to("http://169.254.169.254/latest/meta-data/").into_response() }),
        )
        .route("/missing", get(|| async { axum::http::StatusCode::NOT_FOUND }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

#[tokio::test]
async fn loopback_pages_only_when_allowed_and_names_are_checked_too() {
    let addr = server().await;
    let now = Utc::now();
    let a = asked(&[]);
    let page = format!("http://{addr}/page");
    let strict = fetch(&config(false), false, &a, &page, now).await;
    assert_eq!(strict, Err("url_not_allowed"));
    // A name that resolves to loopback is refused by the resolver.
    let by_name = format!("http://localhost:{}/page", addr.port());
    assert_eq!(
        fetch(&config(false), false, &a, &by_name, now).await,
        Err("url_not_allowed")
    );
    let p = fetch(&config(false), true, &a, &page, now).await.unwrap();
    assert_eq!(p.title.as_deref(), Some("Fake page"));
    assert_eq!(p.text, "Hello & welcome.");
    assert_eq!(
        p.retrieved_at,
        now.to_rfc3339_opts(SecondsFormat::Secs, true)
    );
}

#[tokio::test]
async fn redirects_are_checked_types_and_sizes_bounded() {
    let addr = server().await;
    let now = Utc::now();
    let a = asked(&[]);
    let at = |p: &str| format!("http://{addr}{p}");
    let p = fetch(&config(false), true, &a, &at("/hop"), now)
        .await
        .unwrap();
    assert_eq!(p.url, at("/page"));
    assert_eq!(
        fetch(&config(false), true, &a, &at("/to-metadata"), now).await,
        Err("url_not_allowed")
    );
    assert_eq!(
        fetch(&config(false), true, &a, &at("/pdf"), now).await,
        Err("unsupported_content_type")
    );
    assert_eq!(
        fetch(&config(false), true, &a, &at("/missing"), now).await,
        Err("url_not_accessible")
    );
    let big = fetch(&config(false), true, &a, &at("/big"), now)
        .await
        .unwrap();
    assert!(big.text.starts_with(&"x".repeat(1000)));
    assert!(big.text.ends_with("[cut at 1000 bytes by the gateway]"));
    assert_eq!(
        fetch(&config(false), true, &a, "not a url", now).await,
        Err("invalid_tool_input")
    );
}
