//! Load phases run against one path (a base address): sequential latency and
//! streaming runs at concurrency 1, a fixed-duration throughput run with RSS
//! sampling, and holding many streams open at once. Every loop is bounded by
//! a request count and a wall-clock deadline.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use futures_util::future::join_all;
use http::StatusCode;

use crate::client::{Auth, CLIENT_KEY, Conn, Exchange};
use crate::procs::rss_kib;

/// Timeout of one non-streaming request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Timeout of one streaming request (a 2000-event stream included).
const STREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// Streams opened at once while building up the open streams.
const OPEN_WAVE: usize = 50;
/// RSS sampling period during the throughput phase.
const RSS_PERIOD: Duration = Duration::from_millis(100);

/// Nearest-rank percentiles of a sample, in microseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Percentiles {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Percentiles {
    /// Percentiles of `samples` (sorted in place); all zero when empty.
    pub fn of(samples: &mut [Duration]) -> Percentiles {
        samples.sort_unstable();
        let n = samples.len();
        let at = |q: f64| -> f64 {
            if n == 0 {
                return 0.0;
            }
            let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
            samples[rank - 1].as_secs_f64() * 1e6
        };
        Percentiles {
            n,
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
        }
    }
}

/// Samples of a sequential (concurrency 1) run.
#[derive(Debug, Default)]
pub struct Sequential {
    /// Whole-exchange times of the measured 200 answers.
    pub total: Percentiles,
    /// Times to the first delta (streaming runs only).
    pub first_delta: Percentiles,
    /// Non-200 answers, transport errors and streams without a delta.
    pub errors: u64,
    /// True when the deadline cut the run short.
    pub truncated: bool,
}

/// `warmup` then `n` sequential requests with `body` on one keep-alive
/// connection (re-opened after a transport error), within `max_time`.
pub async fn sequential(
    addr: SocketAddr,
    body: &Bytes,
    streaming: bool,
    warmup: usize,
    n: usize,
    max_time: Duration,
) -> anyhow::Result<Sequential> {
    let auth = Auth::ApiKey(crate::client::CLIENT_KEY.to_owned());
    sequential_as(addr, auth, body, streaming, warmup, n, max_time).await
}

/// [`sequential`] with the given credentials.
pub async fn sequential_as(
    addr: SocketAddr,
    auth: Auth,
    body: &Bytes,
    streaming: bool,
    warmup: usize,
    n: usize,
    max_time: Duration,
) -> anyhow::Result<Sequential> {
    let deadline = Instant::now() + max_time;
    let timeout = if streaming {
        STREAM_TIMEOUT
    } else {
        REQUEST_TIMEOUT
    };
    let mut conn = Conn::connect_as(addr, auth.clone()).await?;
    let mut totals = Vec::with_capacity(n);
    let mut firsts = Vec::with_capacity(if streaming { n } else { 0 });
    let mut out = Sequential::default();
    for i in 0..warmup + n {
        if Instant::now() >= deadline {
            out.truncated = true;
            break;
        }
        let measured = i >= warmup;
        match conn
            .exchange("/v1/messages", body.clone(), streaming, timeout)
            .await
        {
            Ok(x) if x.status == StatusCode::OK && (!streaming || x.first_delta.is_some()) => {
                if measured {
                    totals.push(x.total);
                    firsts.extend(x.first_delta);
                }
            }
            Ok(_) => out.errors += u64::from(measured),
            Err(_) => {
                out.errors += u64::from(measured);
                conn = Conn::connect_as(addr, auth.clone()).await?;
            }
        }
        if out.errors > (n as u64 / 10).max(10) {
            bail!("too many failed requests to {addr} ({} so far)", out.errors);
        }
    }
    out.total = Percentiles::of(&mut totals);
    out.first_delta = Percentiles::of(&mut firsts);
    Ok(out)
}

/// `gatehouse-bench load`: [`throughput`] against `addr`, printed, as the benchmark's
/// client key or (`session`) a signed-in person of the reservation phase's issuer.
/// At concurrency 1 the latency percentiles of sequential requests are printed instead.
pub async fn report(
    addr: SocketAddr,
    workers: usize,
    seconds: u64,
    session: Option<&str>,
) -> anyhow::Result<()> {
    let body = crate::client::messages_body(false);
    let measure = Duration::from_secs(seconds);
    let auth = match session {
        Some(sub) => Auth::Bearer(crate::reservation::token(sub)?),
        None => Auth::ApiKey(CLIENT_KEY.to_owned()),
    };
    if workers == 1 {
        let n = usize::try_from(seconds.saturating_mul(5_000)).unwrap_or(usize::MAX);
        let run = sequential_as(addr, auth, &body, false, 200, n, measure).await?;
        let p = run.total;
        println!(
            "c=1: {} requests, p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, {} errors",
            p.n, p.p50, p.p90, p.p99, run.errors
        );
        return Ok(());
    }
    let warmup = Duration::from_secs(1);
    let run = throughput_as(addr, auth, &body, workers, warmup, measure, &[]).await?;
    println!(
        "{:.0} req/s over {seconds} s ({} ok, {} errors, {} answers with warm-up)",
        run.requests_per_sec, run.ok, run.errors, run.completed
    );
    Ok(())
}

/// Result of a fixed-duration concurrent run.
#[derive(Debug, Default)]
pub struct Throughput {
    pub requests_per_sec: f64,
    pub ok: u64,
    pub errors: u64,
    /// Every answer, warm-up included (for CPU per request).
    pub completed: u64,
    /// Peak RSS (KiB) of each sampled process, in the order given.
    pub peak_rss_kib: Vec<u64>,
}

/// `workers` connections each sending `body` back to back for
/// `warmup + measure`; only answers completed in the measured window count.
/// Samples the RSS of `pids` every [`RSS_PERIOD`] over the whole run.
pub async fn throughput(
    addr: SocketAddr,
    body: &Bytes,
    workers: usize,
    warmup: Duration,
    measure: Duration,
    pids: &[u32],
) -> anyhow::Result<Throughput> {
    let auth = Auth::ApiKey(CLIENT_KEY.to_owned());
    throughput_as(addr, auth, body, workers, warmup, measure, pids).await
}

/// [`throughput`] with requests carrying `auth`.
pub async fn throughput_as(
    addr: SocketAddr,
    auth: Auth,
    body: &Bytes,
    workers: usize,
    warmup: Duration,
    measure: Duration,
    pids: &[u32],
) -> anyhow::Result<Throughput> {
    let start = Instant::now();
    let window = (start + warmup, start + warmup + measure);
    let runs = join_all((0..workers).map(|_| worker(addr, auth.clone(), body.clone(), window)));
    let sampler = async {
        let mut peaks = vec![0u64; pids.len()];
        while Instant::now() < window.1 {
            for (peak, pid) in peaks.iter_mut().zip(pids) {
                *peak = (*peak).max(rss_kib(*pid).unwrap_or(0));
            }
            tokio::time::sleep(RSS_PERIOD).await;
        }
        peaks
    };
    let (results, peak_rss_kib) = tokio::join!(runs, sampler);
    let mut out = Throughput {
        peak_rss_kib,
        ..Throughput::default()
    };
    for r in results {
        let (ok, errors, completed) = r?;
        out.ok += ok;
        out.errors += errors;
        out.completed += completed;
    }
    out.requests_per_sec = out.ok as f64 / measure.as_secs_f64();
    Ok(out)
}

/// One throughput worker: returns (ok, errors) counted in `window`, and
/// every answer received.
async fn worker(
    addr: SocketAddr,
    auth: Auth,
    body: Bytes,
    window: (Instant, Instant),
) -> anyhow::Result<(u64, u64, u64)> {
    let (from, to) = window;
    let mut conn = Some(Conn::connect_as(addr, auth.clone()).await?);
    let (mut ok, mut errors, mut completed) = (0u64, 0u64, 0u64);
    // Far above what 16 workers can do in the window; only a safety bound.
    for _ in 0..50_000_000u64 {
        if Instant::now() >= to {
            break;
        }
        let Some(c) = conn.as_mut() else {
            conn = Conn::connect_as(addr, auth.clone()).await.ok();
            if conn.is_none() {
                errors += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            continue;
        };
        let result = c
            .exchange("/v1/messages", body.clone(), false, REQUEST_TIMEOUT)
            .await;
        let now = Instant::now();
        let counted = now >= from && now < to;
        completed += u64::from(result.is_ok());
        match result {
            Ok(Exchange { status, .. }) if status == StatusCode::OK => ok += u64::from(counted),
            Ok(_) => errors += u64::from(counted),
            Err(_) => {
                errors += u64::from(counted);
                conn = None;
            }
        }
    }
    Ok((ok, errors, completed))
}

/// Streams opened and left before the baseline is read (see [`open_streams`]).
const WARM_STREAMS: usize = 2;

/// RSS of a process while it relays `count` open streams.
#[derive(Debug, Default)]
pub struct OpenStreams {
    /// RSS (KiB) just before the streams were opened, after [`WARM_STREAMS`] streams were
    /// opened and left (their code paged in).
    pub before_kib: u64,
    /// Peak of three RSS samples (KiB) taken while all streams were open.
    pub with_streams_kib: u64,
    /// Streams that reached their first delta.
    pub opened: usize,
    /// Time to open them all.
    pub open_time: Duration,
}

/// Opens `count` streaming requests at once (one connection each), reads the
/// first delta of each, samples the RSS of `pid`, then drops them all.
pub async fn open_streams(addr: SocketAddr, count: usize, pid: u32) -> anyhow::Result<OpenStreams> {
    // A stream per connection thread first, left after its first delta: the code its path
    // runs is paged in once, not per stream, so it belongs in the baseline.
    for _ in 0..WARM_STREAMS {
        let mut conn = Conn::connect(addr).await?;
        drop(conn.open_stream(STREAM_TIMEOUT).await?);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before_kib = rss_kib(pid)?;
    let start = Instant::now();
    let mut opened = Vec::with_capacity(count);
    // Waves, so the listen queues (tokio's default backlog is 128) of the
    // relay and the fake do not overflow and stall connects for a 1 s SYN
    // retransmit; every stream of every wave stays open.
    for wave in 0..count.div_ceil(OPEN_WAVE) {
        let n = OPEN_WAVE.min(count - wave * OPEN_WAVE);
        opened.extend(
            join_all((0..n).map(|_| async move {
                let mut conn = Conn::connect(addr).await?;
                let body = conn.open_stream(STREAM_TIMEOUT).await?;
                anyhow::Ok((conn, body))
            }))
            .await,
        );
    }
    let open_time = start.elapsed();
    let mut held = Vec::with_capacity(count);
    let mut first_error = None;
    for r in opened {
        match r {
            Ok(s) => held.push(s),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if held.is_empty() {
        let e = first_error.context("no stream requested")?;
        return Err(e.context(format!("no stream to {addr} could be opened")));
    }
    let mut with_streams_kib = 0;
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        with_streams_kib = with_streams_kib.max(rss_kib(pid)?);
    }
    let result = OpenStreams {
        before_kib,
        with_streams_kib,
        opened: held.len(),
        open_time,
    };
    drop(held);
    if let Some(e) = first_error {
        eprintln!(
            "  warning: {} of {count} streams failed to open: {e:#}",
            count - result.opened
        );
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<Duration> = (1..=100).rev().map(Duration::from_micros).collect();
        let p = Percentiles::of(&mut v);
        assert_eq!(p.n, 100);
        assert!((p.p50 - 50.0).abs() < 1e-9);
        assert!((p.p90 - 90.0).abs() < 1e-9);
        assert!((p.p99 - 99.0).abs() < 1e-9);
        assert_eq!(Percentiles::of(&mut []).n, 0);
    }
}
