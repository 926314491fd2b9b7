//! `GET /metrics`: Prometheus text behind an admin key, parsed with a Prometheus
//! text-format parser after real traffic, its figures checked against the usage rows.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use fake_upstream::{FakeConfig, Fault};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, sonnet};

const READ_KEY: &str = "metrics-read-key-0123456789abcdef0123";

async fn gateway() -> TestGateway {
    TestGateway::start_with(FakeConfig::default(), |url: &str, db: &Path| {
        format!(
            r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: primary, provider: anthropic, base_url: "{url}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
admin: {{read_keys: [{{id: prom, key: "{READ_KEY}"}}]}}
"#,
            db = db.display()
        )
    })
    .await
}

fn sum(scrape: &prometheus_parse::Scrape, name: &str, filter: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| filter.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

#[tokio::test]
async fn metrics_agree_with_the_usage_rows_and_need_an_admin_key() {
    let gw = gateway().await;
    gw.fake.push_fault(Fault::Status {
        status: 503,
        retry_after: None,
        error_type: None,
        message: None,
    });
    for stream in [false, false, true, true, false] {
        let r = gw.messages(sonnet(stream)).send().await.unwrap();
        r.bytes().await.unwrap();
    }
    let rows = gw.usage_rows(5).await;

    // No key, a client key, a wrong key: refused.
    let url = gw.url("/metrics");
    let get = |key: Option<(&str, &str)>| {
        let mut r = gw.client.get(&url);
        if let Some((k, v)) = key {
            r = r.header(k, v);
        }
        r.send()
    };
    assert_eq!(get(None).await.unwrap().status(), 401);
    let bearer = format!("Bearer {CLIENT_KEY}");
    assert_eq!(
        get(Some(("authorization", &bearer)))
            .await
            .unwrap()
            .status(),
        401,
        "a client key is no admin credential (the reference's 401 for every such caller)"
    );
    assert_eq!(
        get(Some(("x-api-key", "wrong-key-wrong-key-wrong-key-00")))
            .await
            .unwrap()
            .status(),
        401
    );
    let r = get(Some(("x-api-key", READ_KEY))).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = r.text().await.unwrap();
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();

    let requests = sum(&scrape, "gatehouse_requests_total", &[]);
    assert_eq!(requests as usize, rows.len());
    // The one upstream answered 503 once: that request failed as 502.
    let failed = rows.iter().filter(|r| r.status == 502).count();
    assert_eq!(failed, 1);
    assert_eq!(
        sum(&scrape, "gatehouse_requests_total", &[("status", "502")]) as usize,
        failed
    );
    let input: u64 = rows.iter().map(|r| r.input_tokens).sum();
    let output: u64 = rows.iter().map(|r| r.output_tokens).sum();
    let cost: u64 = rows.iter().map(|r| r.cost_micro_usd).sum();
    assert_eq!(
        sum(&scrape, "gatehouse_tokens_total", &[("kind", "input")]) as u64,
        input
    );
    assert_eq!(
        sum(&scrape, "gatehouse_tokens_total", &[("kind", "output")]) as u64,
        output
    );
    assert_eq!(
        sum(&scrape, "gatehouse_cost_micro_usd_total", &[]) as u64,
        cost
    );
    assert_eq!(
        sum(&scrape, "gatehouse_events_total", &[("event", "inference")]) as usize,
        rows.len()
    );
    assert_eq!(
        sum(
            &scrape,
            "gatehouse_upstream_state",
            &[("upstream", "primary"), ("state", "healthy")]
        ),
        1.0
    );
    // Every series the Grafana dashboard in the repo queries exists.
    let dashboard = include_str!("../../../examples/grafana/gatehouse-dashboard.json");
    let mut queried = 0;
    for part in dashboard.split("gatehouse_").skip(1) {
        let name: String = part
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if name.is_empty() || name == "dashboard" {
            continue;
        }
        queried += 1;
        assert!(
            text.contains(&format!("gatehouse_{name}")),
            "the dashboard queries gatehouse_{name}, which /metrics does not serve"
        );
    }
    assert!(queried >= 8);
    // No principal or key id is a label.
    assert!(!text.contains("tester") && !text.contains(CLIENT_KEY));
}
