//! Results of one benchmark run and the comparison table (direct | proxy |
//! gatehouse | added cost) with the SPEC §5 targets and a pass/miss verdict.
//! The surrounding document is rendered by `markdown`.

use std::fmt::Write as _;
use std::time::Duration;

use crate::load::{OpenStreams, Sequential, Throughput};

/// Everything measured on one path (direct, proxy or gatehouse).
#[derive(Debug, Default)]
pub struct PathResults {
    /// Non-streaming JSON at concurrency 1.
    pub latency: Sequential,
    /// Non-streaming JSON at concurrency 16.
    pub throughput: Throughput,
    /// Short streams (time to first token).
    pub ttft: Sequential,
    /// Long streams (per-event cost).
    pub long: Sequential,
    /// CPU time of the answering process (fake, proxy or gatehouse) per
    /// request during the c=1 and c=16 JSON phases, in µs.
    pub cpu_c1_us: f64,
    pub cpu_c16_us: f64,
    /// CPU time of the answering process per long stream, in µs.
    pub cpu_long_us: f64,
}

/// Memory of a relaying process (proxy or gatehouse).
#[derive(Debug, Default)]
pub struct Memory {
    pub idle_kib: u64,
    pub peak_c16_kib: u64,
    pub streams: OpenStreams,
}

impl Memory {
    /// (RSS with the streams open − `baseline`) / streams, in KiB.
    pub(crate) fn per_stream_kib(&self, baseline: u64) -> Option<f64> {
        (self.streams.opened > 0).then(|| {
            (self.streams.with_streams_kib as f64 - baseline as f64) / self.streams.opened as f64
        })
    }
}

/// Sizes and durations of the run.
#[derive(Debug, Clone)]
pub struct Params {
    pub quick: bool,
    pub latency_warmup: usize,
    pub latency_n: usize,
    pub workers: usize,
    pub tput_warmup: Duration,
    pub tput_measure: Duration,
    pub ttft_n: usize,
    pub ttft_events: u32,
    pub long_n: usize,
    pub long_events: u32,
    pub open_streams: usize,
}

/// Where and how the run happened.
#[derive(Debug, Default)]
pub struct Meta {
    pub date_utc: String,
    pub commit: String,
    pub nproc: usize,
    pub cpu: String,
    pub kernel: String,
    pub profile: String,
    pub elapsed: Duration,
    /// Share of the machine's CPU used by other processes during the run.
    pub foreign_cpu: f64,
    /// Remarks collected during the run (e.g. long waits for idle processes).
    pub notes: Vec<String>,
}

/// The whole run.
#[derive(Debug)]
pub struct Results {
    pub meta: Meta,
    pub params: Params,
    pub direct: PathResults,
    pub proxy: PathResults,
    pub gatehouse: PathResults,
    pub proxy_mem: Memory,
    pub gatehouse_mem: Memory,
    /// What spend caps add to a signed-in person's request, per store.
    pub reservations: crate::reservation::Reservations,
    pub faults: crate::faults::Faults,
    /// `--peers`: nginx, the reference gateway and LiteLLM beside Gatehouse.
    pub peers: Option<crate::peers::Peers>,
    /// `--tray`: the desktop tray's memory with its window open and closed.
    pub tray: Option<crate::tray::TrayMemory>,
    /// `--insight`: the desktop's insight views and the status line over a seeded
    /// database, or why they were not measured.
    pub insight: Option<Result<crate::insight::Insight, String>>,
    /// `--affinity`: prompt caching with one upstream and with two, conversation affinity
    /// off and on, or why it was not measured.
    pub affinity: Option<Result<crate::affinity::Affinity, String>>,
    /// `--soak`: mixed traffic for minutes, growth per million requests and the end
    /// checks, or why it was not measured.
    pub soak: Option<Result<crate::soak::Soak, String>>,
    /// `--console`: the team console's admin API calls over a seeded company and inference
    /// with console pollers, or why it was not measured.
    pub console: Option<Result<crate::console::Console, String>>,
}

pub(crate) const MIB: f64 = 1024.0;

fn us(v: f64) -> String {
    format!("{v:.1}")
}

fn added(v: f64) -> String {
    format!("{v:+.1}")
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / MIB)
}

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "pass",
        Some(false) => "**miss**",
        None => "n/a",
    }
}

/// One table row.
struct Row {
    cells: [String; 8],
}

fn row(metric: &str, values: [String; 5], target: &str, ok: Option<bool>) -> Row {
    let [d, p, g, vd, vp] = values;
    Row {
        cells: [
            metric.to_owned(),
            d,
            p,
            g,
            vd,
            vp,
            target.to_owned(),
            verdict(ok).to_owned(),
        ],
    }
}

fn dash() -> String {
    "—".to_owned()
}

/// Latency-style row: three values in µs plus the added µs vs direct and proxy.
fn latency_row(metric: &str, d: f64, p: f64, g: f64, target: &str, limit: Option<f64>) -> Row {
    let ok = limit.map(|l| g - d <= l);
    let values = [us(d), us(p), us(g), added(g - d), added(g - p)];
    row(metric, values, target, ok)
}

impl Results {
    fn rows(&self) -> Vec<Row> {
        let (d, p, g) = (&self.direct, &self.proxy, &self.gatehouse);
        let pr = &self.params;
        let mut rows = vec![
            latency_row(
                "c=1 JSON latency p50 (µs)",
                d.latency.total.p50,
                p.latency.total.p50,
                g.latency.total.p50,
                "added ≤ 100 µs vs direct",
                Some(100.0),
            ),
            latency_row(
                "c=1 JSON latency p90 (µs)",
                d.latency.total.p90,
                p.latency.total.p90,
                g.latency.total.p90,
                "—",
                None,
            ),
            latency_row(
                "c=1 JSON latency p99 (µs)",
                d.latency.total.p99,
                p.latency.total.p99,
                g.latency.total.p99,
                "added ≤ 300 µs vs direct",
                Some(300.0),
            ),
        ];
        let (td, tp, tg) = (
            d.throughput.requests_per_sec,
            p.throughput.requests_per_sec,
            g.throughput.requests_per_sec,
        );
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                format!("{:.3}×", a / b)
            } else {
                dash()
            }
        };
        rows.push(row(
            &format!("c={} JSON throughput (req/s)", pr.workers),
            [
                format!("{td:.0}"),
                format!("{tp:.0}"),
                format!("{tg:.0}"),
                ratio(tg, td),
                ratio(tg, tp),
            ],
            "≥ 0.5× proxy",
            (tp > 0.0).then_some(tg >= 0.5 * tp),
        ));
        rows.extend(self.capped_rows());
        rows.push(row(
            &format!("c={} errors (non-200 or transport)", pr.workers),
            [
                d.throughput.errors.to_string(),
                p.throughput.errors.to_string(),
                g.throughput.errors.to_string(),
                dash(),
                dash(),
            ],
            "0 (sanity)",
            Some(g.throughput.errors == 0),
        ));
        for (metric, d, p, g) in [
            (
                "CPU per request at c=1 (µs of the answering process: fake, proxy, gatehouse)",
                d.cpu_c1_us,
                p.cpu_c1_us,
                g.cpu_c1_us,
            ),
            (
                &*format!("CPU per request at c={} (µs, same processes)", pr.workers),
                d.cpu_c16_us,
                p.cpu_c16_us,
                g.cpu_c16_us,
            ),
        ] {
            rows.push(row(
                metric,
                [us(d), us(p), us(g), dash(), added(g - p)],
                "—",
                None,
            ));
        }
        let ev = pr.ttft_events;
        rows.push(latency_row(
            &format!("stream TTFT p50 (µs), {ev} events"),
            d.ttft.first_delta.p50,
            p.ttft.first_delta.p50,
            g.ttft.first_delta.p50,
            "added ≤ 150 µs vs direct",
            Some(150.0),
        ));
        rows.push(latency_row(
            &format!("stream TTFT p99 (µs), {ev} events"),
            d.ttft.first_delta.p99,
            p.ttft.first_delta.p99,
            g.ttft.first_delta.p99,
            "—",
            None,
        ));
        rows.push(latency_row(
            &format!("stream total p50 (µs), {ev} events"),
            d.ttft.total.p50,
            p.ttft.total.p50,
            g.ttft.total.p50,
            "—",
            None,
        ));
        let lev = pr.long_events;
        rows.push(latency_row(
            &format!("stream total p50 (µs), {lev} events"),
            d.long.total.p50,
            p.long.total.p50,
            g.long.total.p50,
            "—",
            None,
        ));
        rows.push(row(
            &format!("CPU per stream, {lev} events (µs of the answering process)"),
            [
                us(d.cpu_long_us),
                us(p.cpu_long_us),
                us(g.cpu_long_us),
                dash(),
                added(g.cpu_long_us - p.cpu_long_us),
            ],
            "—",
            None,
        ));
        let per_event = |a: f64, b: f64| (a - b) / f64::from(lev.max(1));
        let (ped, pep) = (
            per_event(g.long.total.p50, d.long.total.p50),
            per_event(g.long.total.p50, p.long.total.p50),
        );
        rows.push(row(
            "added cost per SSE event (µs/event)",
            [
                dash(),
                dash(),
                dash(),
                format!("{ped:+.2}"),
                format!("{pep:+.2}"),
            ],
            "≤ 5 µs/event (vs direct)",
            (d.long.total.n > 0 && g.long.total.n > 0).then_some(ped <= 5.0),
        ));
        let (pm, gm) = (&self.proxy_mem, &self.gatehouse_mem);
        let mem_diff = |a: u64, b: u64| format!("{:+.1}", (a as f64 - b as f64) / MIB);
        rows.push(row(
            "idle RSS (MiB)",
            [
                dash(),
                mib(pm.idle_kib),
                mib(gm.idle_kib),
                dash(),
                mem_diff(gm.idle_kib, pm.idle_kib),
            ],
            "gatehouse ≤ 20 MiB (issue 36)",
            (gm.idle_kib > 0).then_some(gm.idle_kib as f64 <= 20.0 * MIB),
        ));
        rows.push(row(
            &format!("peak RSS during c={} (MiB)", pr.workers),
            [
                dash(),
                mib(pm.peak_c16_kib),
                mib(gm.peak_c16_kib),
                dash(),
                mem_diff(gm.peak_c16_kib, pm.peak_c16_kib),
            ],
            "—",
            None,
        ));
        rows.push(row(
            &format!(
                "RSS with {} open streams (MiB, fresh process)",
                pr.open_streams
            ),
            [
                dash(),
                mib(pm.streams.with_streams_kib),
                mib(gm.streams.with_streams_kib),
                dash(),
                mem_diff(gm.streams.with_streams_kib, pm.streams.with_streams_kib),
            ],
            "—",
            None,
        ));
        let ps = pm.per_stream_kib(pm.streams.before_kib);
        let gs = gm.per_stream_kib(gm.streams.before_kib);
        let kib = |v: Option<f64>| v.map_or_else(dash, |v| format!("{v:.1}"));
        let diff = match (gs, ps) {
            (Some(g), Some(p)) => format!("{:+.1}", g - p),
            _ => dash(),
        };
        rows.push(row(
            "memory per open stream (KiB, vs the fresh process after two streams)",
            [dash(), kib(ps), kib(gs), dash(), diff],
            "≤ 40 KiB",
            gs.map(|v| v <= 40.0),
        ));
        rows
    }

    /// The capped path (a signed-in person with a binding daily cap), from the reservation
    /// phase of the same run: c=1 added vs direct, and c=16 against the same store with caps
    /// off.
    fn capped_rows(&self) -> Vec<Row> {
        let (d, p) = (&self.direct, &self.proxy);
        let mut rows = Vec::new();
        for r in &self.reservations.rows {
            let store = r.store;
            let capped = r.capped.total.p50;
            let (target, ok) = if store == "sqlite" {
                (
                    "added ≤ 150 µs vs direct",
                    Some(capped - d.latency.total.p50 <= 150.0),
                )
            } else {
                (
                    "≤ +300 µs over caps off",
                    Some(capped - r.off.total.p50 <= 300.0),
                )
            };
            let mut cells = latency_row(
                &format!("caps on ({store}): c=1 JSON latency p50 (µs)"),
                d.latency.total.p50,
                p.latency.total.p50,
                capped,
                target,
                None,
            );
            cells.cells[7] = verdict(ok).to_owned();
            rows.push(cells);
            let ratio = r.capped_rps / r.off_rps.max(1.0);
            rows.push(row(
                &format!("caps on ({store}): c=16 JSON throughput (req/s), ÷ caps off"),
                [
                    dash(),
                    dash(),
                    format!("{:.0}", r.capped_rps),
                    dash(),
                    format!("{ratio:.3}× caps off"),
                ],
                "≥ 0.8× caps off",
                (r.off_rps > 0.0).then_some(ratio >= 0.8),
            ));
        }
        rows
    }

    /// The comparison table as Markdown.
    pub fn table(&self) -> String {
        let header = [
            "metric",
            "direct",
            "proxy",
            "gatehouse",
            "gatehouse − direct",
            "gatehouse − proxy",
            "SPEC §5 target",
            "verdict",
        ];
        let mut out = format!("| {} |\n", header.join(" | "));
        out.push_str("|---|---:|---:|---:|---:|---:|---|---|\n");
        for r in self.rows() {
            let _ = writeln!(out, "| {} |", r.cells.join(" | "));
        }
        out.push_str("\nThroughput columns \"gatehouse − direct/proxy\" are ratios (gatehouse ÷ direct, gatehouse ÷ proxy).\n");
        out
    }
}
