//! The "Peers" section of BENCHMARKS.md: one row per path with what it adds over
//! direct at c=1, its c=16 throughput and the ratios to nginx and to Gatehouse with a
//! client key, its idle RSS and version; the targets against the peers; and
//! every skipped peer with the reason, in place of a figure.

use std::fmt::Write as _;

use super::{Kind, PeerRow, Peers};
use crate::report::mib;

fn dash() -> String {
    "—".to_owned()
}

impl Peers {
    fn row(&self, kind: Kind) -> Option<&PeerRow> {
        self.rows
            .iter()
            .find(|r| r.kind == kind && r.failed.is_empty())
    }

    /// Throughput of `kind`, when it was measured.
    fn rps(&self, kind: Kind) -> Option<f64> {
        self.row(kind).map(|r| r.rps).filter(|v| *v > 0.0)
    }

    /// The table alone (also printed at the end of a run).
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| path | c=1 JSON p50 added (µs) | c=1 JSON p99 added (µs) | stream TTFT p50 added (µs) | c=16 JSON (req/s) | ÷ nginx | ÷ Gatehouse (client key) | idle RSS (MiB) | errors |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let direct = self.rows.iter().find(|r| r.kind == Kind::Direct);
        let (nginx, gatehouse) = (self.rps(Kind::Nginx), self.rps(Kind::Gatehouse));
        for r in &self.rows {
            if !r.failed.is_empty() {
                let _ = writeln!(
                    out,
                    "| {} | not measured: {} | | | | | | | |",
                    r.kind.label(),
                    r.failed.join("; ")
                );
                continue;
            }
            let added = |pick: fn(&PeerRow) -> f64| match (r.kind, direct) {
                (Kind::Direct, _) => format!("{:.1} (absolute)", pick(r)),
                (_, Some(d)) => format!("{:+.1}", pick(r) - pick(d)),
                (_, None) => dash(),
            };
            let ratio = |base: Option<f64>| match base {
                Some(b) if r.rps > 0.0 => format!("{:.2}×", r.rps / b),
                _ => dash(),
            };
            let errors = r.latency.errors + r.ttft.errors + r.tput_errors;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.0} | {} | {} | {} | {errors} |",
                r.kind.label(),
                added(|r| r.latency.total.p50),
                added(|r| r.latency.total.p99),
                added(|r| r.ttft.first_delta.p50),
                r.rps,
                ratio(nginx),
                ratio(gatehouse),
                r.idle_kib.map_or_else(dash, mib),
            );
        }
        out
    }

    /// The targets against the peers (issue 36), one verdict line each.
    fn targets(&self) -> Vec<String> {
        let mut out = Vec::new();
        let nginx = self.rps(Kind::Nginx);
        for (kind, who) in [
            (
                Kind::GatehouseCapped,
                "Gatehouse with a binding cap (SQLite)",
            ),
            (Kind::Gatehouse, "Gatehouse with a client key"),
        ] {
            out.push(match (self.rps(kind), nginx) {
                (Some(g), Some(n)) => format!(
                    "{who}, c=16 throughput ≥ 0.8× nginx: {:.2}× ({})",
                    g / n,
                    verdict(g >= 0.8 * n)
                ),
                _ => format!("{who}, c=16 throughput ≥ 0.8× nginx: not measured"),
            });
        }
        let direct = self.row(Kind::Direct);
        let added =
            |kind: Kind, pick: fn(&PeerRow) -> f64| Some(pick(self.row(kind)?) - pick(direct?));
        let p50 = |r: &PeerRow| r.latency.total.p50;
        let p99 = |r: &PeerRow| r.latency.total.p99;
        for (kind, who) in [
            (Kind::Gatehouse, "client key"),
            (Kind::GatehouseCapped, "binding cap"),
        ] {
            out.push(match (added(kind, p50), added(Kind::Nginx, p50)) {
                (Some(g), Some(n)) => format!(
                    "Gatehouse ({who}), added c=1 p50 ≤ nginx's + 30 µs: {g:+.1} µs vs nginx {n:+.1} µs ({})",
                    verdict(g <= n + 30.0)
                ),
                _ => format!("Gatehouse ({who}), added c=1 p50 ≤ nginx's + 30 µs: not measured"),
            });
            out.push(match added(kind, p99) {
                Some(g) => format!(
                    "Gatehouse ({who}), added c=1 p99 ≤ 500 µs: {g:+.1} µs ({})",
                    verdict(g <= 500.0)
                ),
                None => format!("Gatehouse ({who}), added c=1 p99 ≤ 500 µs: not measured"),
            });
        }
        out.push(
            match (self.rps(Kind::GatehouseCapped), self.rps(Kind::ReferenceCapped)) {
                (Some(g), Some(r)) => format!(
                    "Gatehouse with caps on, c=16 throughput ≥ 15× the reference's (capped): {:.1}× ({})",
                    g / r.max(1.0),
                    verdict(g >= 15.0 * r)
                ),
                _ => "Gatehouse with caps on, c=16 throughput ≥ 15× the reference's: not measured"
                    .to_owned(),
            },
        );
        out.push(
            match (added(Kind::GatehouseCapped, p50), added(Kind::ReferenceCapped, p50)) {
                (Some(ga), Some(ra)) => format!(
                    "Gatehouse with caps on, added c=1 p50 ≥ 10× lower than the reference's (capped): \
                     {ga:+.1} µs vs {ra:+.1} µs ({})",
                    verdict(ga * 10.0 <= ra)
                ),
                _ => "Gatehouse with caps on, added c=1 p50 ≥ 10× lower than the reference's: not measured (no reference figure)"
                    .to_owned(),
            },
        );
        out
    }

    /// The BENCHMARKS.md section.
    pub fn markdown(&self) -> String {
        let mut out = String::from("\n## Peers\n\n");
        out.push_str(
            "The same fake upstream and load generator through other gateways, measured in the same \
             run (`gatehouse-bench --peers`). \"Added\" is the path's figure minus direct's, both \
             measured in this phase.\n\n",
        );
        out.push_str(&self.table());
        if !self.notes.is_empty() {
            out.push_str("\nNotes:\n\n");
            for n in &self.notes {
                let _ = writeln!(out, "- {n}.");
            }
        }
        out.push_str("\nTargets (issue 36):\n\n");
        for t in self.targets() {
            let _ = writeln!(out, "- {t}.");
        }
        out.push_str("\nVersions:\n\n");
        let mut seen = Vec::new();
        for r in &self.rows {
            if !seen.contains(&r.version) {
                let _ = writeln!(out, "- {}: {}", r.kind.label(), r.version);
                seen.push(r.version.clone());
            }
        }
        if !self.skipped.is_empty() {
            out.push_str("\nSkipped (no figure is shown for these):\n\n");
            for (name, why) in &self.skipped {
                let _ = writeln!(out, "- {name}: {}", why.replace('\n', " "));
            }
        }
        if let Some(pr) = &self.params {
            let _ = writeln!(
                out,
                "\n- How measured: c=1 JSON, one keep-alive connection per path, {} warm-up then {} \
                 sequential requests, and stream TTFT, 50 warm-up then {} streams of {} deltas (time to \
                 the first `content_block_delta`), each taken in 5 rounds that visit every path in turn \
                 (a different one first each round, after the processes went quiet) and pooled per path, \
                 so drift on the machine falls on every path alike; c={}, {} keep-alive connections back \
                 to back per path in turn, {:?} warm-up then answers counted over {:?}. Idle RSS is the process with its children (nginx: master \
                 and worker) after start-up, before any request. Gatehouse runs two fresh `gatehouse \
                 serve` processes on SQLite (one with a client key; one with spend caps, where a daily \
                 cap that is never reached binds the session caller). The reference gateway runs on a \
                 fresh PostgreSQL database of the server given by `--postgres-url`, with \
                 `CLAUDE_GATEWAY_ALLOW_LOOPBACK=1`; its two callers signed in through its own device \
                 flow (tests/e2e/reference_session.mjs in headless Chromium against the test IdP \
                 tests/e2e/idp.mjs), and the capped one got a daily cap through its admin API \
                 (`POST /v1/organizations/spend_limits`); it checks caps by reading spend before the \
                 request and records spend after it, without a reservation. nginx runs one worker with `proxy_pass` to a \
                 keep-alive upstream pool and buffering off. LiteLLM's proxy runs from its venv with a \
                 master key and the fake as an `anthropic/` model.",
                pr.latency_warmup,
                pr.latency_n,
                pr.ttft_n,
                pr.ttft_events,
                pr.workers,
                pr.workers,
                pr.tput_warmup,
                pr.tput_measure,
            );
        }
        out
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "pass" } else { "**miss**" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{Percentiles, Sequential};

    fn row(kind: Kind, p50: f64, rps: f64) -> PeerRow {
        let p = Percentiles {
            n: 10,
            p50,
            p90: p50,
            p99: p50 * 2.0,
        };
        PeerRow {
            kind,
            version: format!("{kind:?} 1.0"),
            idle_kib: Some(4096),
            latency: Sequential {
                total: p,
                ..Sequential::default()
            },
            ttft: Sequential {
                first_delta: p,
                ..Sequential::default()
            },
            rps,
            tput_errors: 0,
            failed: Vec::new(),
        }
    }

    #[test]
    fn table_shows_added_latency_ratios_and_skips() {
        let peers = Peers {
            rows: vec![
                row(Kind::Direct, 100.0, 8000.0),
                row(Kind::Nginx, 190.0, 6000.0),
                row(Kind::Gatehouse, 300.0, 3000.0),
                row(Kind::GatehouseCapped, 350.0, 2400.0),
                row(Kind::ReferenceCapped, 1600.0, 1500.0),
            ],
            skipped: vec![("LiteLLM".to_owned(), "not installed at /x".to_owned())],
            notes: vec!["c=1 JSON (all paths): other processes used 40%".to_owned()],
            params: None,
        };
        let md = peers.markdown();
        // nginx: +90 µs p50, +180 µs p99 over direct; 1.00× nginx, 2.00× Gatehouse.
        assert!(md.contains("| nginx (one worker, proxy_pass, keep-alive upstream) | +90.0 | +180.0 | +90.0 | 6000 | 1.00× | 2.00× | 4.0 | 0 |"), "{md}");
        assert!(
            md.contains("| direct (client → fake upstream) | 100.0 (absolute) |"),
            "{md}"
        );
        // Capped: 2400 / 6000 = 0.40× nginx: a miss; +250 µs vs +1500 µs: not 10× lower.
        assert!(
            md.contains("binding cap (SQLite), c=16 throughput ≥ 0.8× nginx: 0.40× (**miss**)"),
            "{md}"
        );
        // Client key: +200 µs against nginx's +90 µs: a miss; 1.6× the reference: a miss.
        assert!(
            md.contains("≤ nginx's + 30 µs: +200.0 µs vs nginx +90.0 µs (**miss**)"),
            "{md}"
        );
        assert!(
            md.contains("≥ 15× the reference's (capped): 1.6× (**miss**)"),
            "{md}"
        );
        assert!(md.contains("+250.0 µs vs +1500.0 µs (**miss**)"), "{md}");
        assert!(md.contains("- LiteLLM: not installed at /x"), "{md}");
        assert!(
            md.contains("- c=1 JSON (all paths): other processes used 40%."),
            "{md}"
        );
        assert!(
            !md.contains("LiteLLM proxy (`/v1/messages`"),
            "a skipped peer has no row: {md}"
        );
    }

    #[test]
    fn failed_rows_show_no_figures_and_targets_say_not_measured() {
        let mut nginx = row(Kind::Nginx, 190.0, 6000.0);
        nginx.failed.push("c=16: connection refused".to_owned());
        let peers = Peers {
            rows: vec![
                row(Kind::Direct, 100.0, 8000.0),
                nginx,
                row(Kind::GatehouseCapped, 120.0, 5000.0),
            ],
            skipped: vec![],
            notes: vec![],
            params: None,
        };
        let md = peers.markdown();
        assert!(md.contains("| nginx (one worker, proxy_pass, keep-alive upstream) | not measured: c=16: connection refused |"), "{md}");
        assert!(md.contains("≥ 0.8× nginx: not measured"), "{md}");
        assert!(md.contains("reference's: not measured"), "{md}");
        // Ratio columns have no base without nginx and Gatehouse.
        assert!(md.contains("| 5000 | — | — |"), "{md}");
    }
}
