//! What the store did during a measured run, from Gatehouse's own `/metrics`: the
//! `gatehouse_store_operation_seconds` histogram (each operation timed by the caller, so
//! the time spent queued for the store's thread or pool is included) is read before and
//! after the run, and the difference gives each operation's count and its p50/p99 as the
//! upper bound of the histogram bucket they fall in. A p99 that the store explains shows
//! here; one it does not is elsewhere (scheduling, the upstream client).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;

use anyhow::bail;
use http::StatusCode;

use crate::client::{Auth, Conn};

const METRIC: &str = "gatehouse_store_operation_seconds_bucket";

/// Cumulative bucket counts per operation: `op -> [(upper bound in seconds, count)]`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Histograms(BTreeMap<String, Vec<(f64, u64)>>);

/// One operation's share of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct OpStats {
    pub op: String,
    pub count: u64,
    /// Upper bounds (µs) of the buckets holding the median and the 99th percentile.
    pub p50_le_us: f64,
    pub p99_le_us: f64,
}

/// Reads `/metrics` of the gateway at `addr` with an admin key.
pub async fn scrape(addr: SocketAddr, admin_key: &str) -> anyhow::Result<Histograms> {
    let mut conn = Conn::connect_as(addr, Auth::ApiKey(admin_key.to_owned())).await?;
    let (status, text) = conn.get_collect("/metrics").await?;
    if status != StatusCode::OK {
        bail!("/metrics answered {status}");
    }
    Ok(parse(&text))
}

/// The store histogram's buckets in a Prometheus text exposition.
pub fn parse(text: &str) -> Histograms {
    let mut out: BTreeMap<String, Vec<(f64, u64)>> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(METRIC).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        let label = |name: &str| {
            labels.split(',').find_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                (k.trim() == name).then(|| v.trim().trim_matches('"').to_owned())
            })
        };
        let (Some(op), Some(le)) = (label("op"), label("le")) else {
            continue;
        };
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            match le.parse() {
                Ok(v) => v,
                Err(_) => continue,
            }
        };
        let Ok(count) = value.trim().parse::<f64>() else {
            continue;
        };
        out.entry(op).or_default().push((le, count as u64));
    }
    for buckets in out.values_mut() {
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Histograms(out)
}

/// The operations between two scrapes, most frequent first.
pub fn between(before: &Histograms, after: &Histograms) -> Vec<OpStats> {
    let mut ops: Vec<OpStats> = after
        .0
        .iter()
        .filter_map(|(op, buckets)| {
            let old = before.0.get(op);
            let diff: Vec<(f64, u64)> = buckets
                .iter()
                .map(|&(le, n)| {
                    let was = old
                        .and_then(|o| o.iter().find(|(l, _)| *l == le))
                        .map_or(0, |&(_, c)| c);
                    (le, n.saturating_sub(was))
                })
                .collect();
            let count = diff.last().map_or(0, |&(_, n)| n);
            (count > 0).then(|| OpStats {
                op: op.clone(),
                count,
                p50_le_us: quantile(&diff, count, 0.50),
                p99_le_us: quantile(&diff, count, 0.99),
            })
        })
        .collect();
    ops.sort_by(|a, b| b.count.cmp(&a.count).then(a.op.cmp(&b.op)));
    ops
}

fn quantile(cumulative: &[(f64, u64)], count: u64, q: f64) -> f64 {
    let rank = (q * count as f64).ceil() as u64;
    cumulative
        .iter()
        .find(|&&(_, n)| n >= rank.max(1))
        .map_or(f64::INFINITY, |&(le, _)| le * 1e6)
}

/// Markdown rows: `| store | op | count | per request | p50 ≤ | p99 ≤ |`.
pub fn rows(store: &str, ops: &[OpStats], requests: usize) -> String {
    let mut out = String::new();
    let bound = |us: f64| {
        if us.is_finite() {
            format!("{us:.0}")
        } else {
            "> last bucket".to_owned()
        }
    };
    for o in ops {
        let _ = writeln!(
            out,
            "| {store} | {} | {} | {:.2} | {} | {} |",
            o.op,
            o.count,
            o.count as f64 / requests.max(1) as f64,
            bound(o.p50_le_us),
            bound(o.p99_le_us)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const BEFORE: &str = "# TYPE gatehouse_store_operation_seconds histogram\n\
        gatehouse_store_operation_seconds_bucket{le=\"0.0001\",op=\"reserve\"} 1\n\
        gatehouse_store_operation_seconds_bucket{le=\"0.0002\",op=\"reserve\"} 2\n\
        gatehouse_store_operation_seconds_bucket{le=\"+Inf\",op=\"reserve\"} 2\n";
    const AFTER: &str = "gatehouse_store_operation_seconds_bucket{le=\"0.0001\",op=\"reserve\"} 90\n\
        gatehouse_store_operation_seconds_bucket{le=\"0.0002\",op=\"reserve\"} 100\n\
        gatehouse_store_operation_seconds_bucket{le=\"+Inf\",op=\"reserve\"} 102\n\
        gatehouse_store_operation_seconds_bucket{op=\"insert_usage\",le=\"0.0001\"} 0\n\
        gatehouse_store_operation_seconds_bucket{op=\"insert_usage\",le=\"0.0002\"} 5\n\
        gatehouse_store_operation_seconds_bucket{op=\"insert_usage\",le=\"+Inf\"} 5\n\
        gatehouse_requests_total{endpoint=\"messages\"} 7\n";

    #[test]
    fn a_run_is_the_difference_of_two_scrapes() {
        let ops = between(&parse(BEFORE), &parse(AFTER));
        assert_eq!(ops.len(), 2);
        assert_eq!(
            ops[0],
            OpStats {
                op: "reserve".into(),
                count: 100,
                p50_le_us: 100.0,
                p99_le_us: f64::INFINITY,
            }
        );
        assert_eq!(ops[1].op, "insert_usage");
        assert_eq!((ops[1].count, ops[1].p50_le_us), (5, 200.0));
        assert!(
            rows("sqlite", &ops, 50)
                .contains("| sqlite | reserve | 100 | 2.00 | 100 | > last bucket |")
        );
    }

    #[test]
    fn nothing_between_equal_scrapes() {
        assert!(between(&parse(AFTER), &parse(AFTER)).is_empty());
    }
}
