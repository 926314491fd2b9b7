//! `load_test_mode`'s upstream: every configured upstream is replaced by [`Canned`], which
//! answers in Anthropic's shape without sending anything (the reference's reply: id
//! `msg_loadtest`, model `load-test`, zero usage, one text block of about three tokens
//! per delta). A streamed reply spreads its events evenly over `reply_seconds`, so a load
//! test holds connections open as long as real replies would; a JSON reply and
//! `count_tokens` (`{"input_tokens":0}`) answer at once.
//!
//! [`Meter`] counts replies and logs a line every ten seconds while the test is busy,
//! and a summary when it goes quiet or the gateway stops.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use http::StatusCode;
use serde_json::json;

use super::{Answer, BodyStream, Call, Operation, SendError, Upstream};
use crate::config::load_test::LoadTestConfig;

/// The first text delta: the reply says what it is.
const NOTICE: &str = "[Gatehouse is in load-test mode: this reply is canned and your request did not \
                      reach a model. If you did not expect this, tell your gateway administrator.] ";
/// Every later delta (about three tokens).
const FILLER: &str = "load test   ";
const TOKENS_PER_DELTA: u32 = 3;
/// How often the meter reports while replies are flowing.
const REPORT_EVERY: Duration = Duration::from_secs(10);
/// The route note every canned answer carries (`route_reason`).
pub const NOTE: &str = "load_test_mode: canned reply, nothing sent upstream";

/// The canned replies, built once.
pub struct Canned {
    frames: Arc<[Bytes]>,
    json: Bytes,
    reply_time: Duration,
    meter: Arc<Meter>,
}

impl Canned {
    pub fn new(cfg: &LoadTestConfig, meter: Arc<Meter>) -> Self {
        let deltas = cfg.reply_tokens.div_ceil(TOKENS_PER_DELTA).max(1) as usize;
        let usage = json!({"input_tokens": 0, "output_tokens": 0});
        let mut events = vec![
            json!({"type": "message_start", "message": {"id": "msg_loadtest", "type": "message",
                "role": "assistant", "model": "load-test", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": usage}}),
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
        ];
        events.extend((0..deltas).map(|i| {
            let text = if i == 0 { NOTICE } else { FILLER };
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}})
        }));
        events.extend([
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                "stop_sequence": null}, "usage": {"output_tokens": 0}}),
            json!({"type": "message_stop"}),
        ]);
        let frames: Arc<[Bytes]> = events
            .iter()
            .map(|e| super::sse::frame(e.to_string().as_bytes()))
            .collect();
        let text = format!("{NOTICE}{}", FILLER.repeat(deltas - 1));
        let json = json!({"id": "msg_loadtest", "type": "message", "role": "assistant",
            "model": "load-test", "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": null, "usage": usage});
        Self {
            frames,
            json: Bytes::from(json.to_string()),
            reply_time: cfg.reply_time,
            meter,
        }
    }

    fn stream(&self) -> Answer {
        let mut answer = Answer::json(StatusCode::OK, Bytes::new());
        answer.headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/event-stream"),
        );
        answer.body = paced(
            self.frames.clone(),
            self.reply_time,
            Reply::open(&self.meter),
        );
        answer
    }
}

#[async_trait]
impl Upstream for Canned {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError> {
        let mut answer = match (call.op, call.stream) {
            (Operation::CountTokens, _) => {
                Answer::json(StatusCode::OK, Bytes::from_static(b"{\"input_tokens\":0}"))
            }
            (Operation::Messages, true) => self.stream(),
            (Operation::Messages, false) => {
                self.meter.finished(Duration::ZERO);
                Answer::json(StatusCode::OK, self.json.clone())
            }
        };
        answer.notes.push(NOTE.to_owned());
        Ok(answer)
    }
}

/// `frames`, the k-th (1-based) due `k/n` of the way through `total` after the start.
fn paced(frames: Arc<[Bytes]>, total: Duration, reply: Reply) -> BodyStream {
    let start = tokio::time::Instant::now();
    let n = frames.len();
    futures_util::stream::unfold((0usize, reply), move |(k, mut reply)| {
        let frames = frames.clone();
        async move {
            if k == n {
                reply.finish(start.elapsed().saturating_sub(total));
                return None;
            }
            let due = start + total.mul_f64((k + 1) as f64 / n as f64);
            tokio::time::sleep_until(due).await;
            Some((Ok(frames[k].clone()), (k + 1, reply)))
        }
    })
    .boxed()
}

/// One streamed reply while it is open; dropped unfinished, the client hung up early.
struct Reply {
    meter: Arc<Meter>,
    done: bool,
}

impl Reply {
    fn open(meter: &Arc<Meter>) -> Self {
        meter.with(|w| {
            w.open += 1;
            w.peak_open = w.peak_open.max(w.open);
        });
        Self {
            meter: meter.clone(),
            done: false,
        }
    }

    fn finish(&mut self, late: Duration) {
        if !self.done {
            self.done = true;
            self.meter.with(|w| w.open = w.open.saturating_sub(1));
            self.meter.finished(late);
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if !self.done {
            self.meter.with(|w| {
                w.open = w.open.saturating_sub(1);
                w.window.hung_up += 1;
            });
        }
    }
}

/// Counts of one reporting window.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    finished: u64,
    hung_up: u64,
    late_total_ms: u64,
    late_worst_ms: u64,
}

#[derive(Debug, Default)]
struct Windows {
    open: u64,
    peak_open: u64,
    window: Counts,
    total: Counts,
    /// Seconds of the windows that saw traffic since the last summary.
    busy_seconds: u64,
}

/// The load test's counters, shared by every canned upstream.
#[derive(Debug, Default)]
pub struct Meter {
    state: Mutex<Windows>,
}

impl Meter {
    /// A meter and its reporter task, which ends once the meter is dropped.
    pub fn start() -> Arc<Self> {
        let meter = Arc::new(Self::default());
        tokio::spawn(report(Arc::downgrade(&meter)));
        meter
    }

    fn with<T>(&self, f: impl FnOnce(&mut Windows) -> T) -> T {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    fn finished(&self, late: Duration) {
        let ms = u64::try_from(late.as_millis()).unwrap_or(u64::MAX);
        self.with(|w| {
            w.window.finished += 1;
            w.window.late_total_ms = w.window.late_total_ms.saturating_add(ms);
            w.window.late_worst_ms = w.window.late_worst_ms.max(ms);
        });
    }

    /// Closes a window: its line (if anything happened), and the summary when it went quiet.
    fn tick(&self, seconds: u64) -> Option<String> {
        self.with(|w| {
            let (c, busy) = w.close_window(seconds);
            if busy {
                return Some(window_line(&c, seconds, w.open));
            }
            (w.busy_seconds > 0).then(|| summary(w))
        })
    }
}

impl Windows {
    /// Adds the current window to the totals; whether it saw traffic.
    fn close_window(&mut self, seconds: u64) -> (Counts, bool) {
        let c = std::mem::take(&mut self.window);
        let busy = c.finished + c.hung_up > 0 || self.open > 0;
        if busy {
            self.busy_seconds += seconds.max(1);
            self.total.finished += c.finished;
            self.total.hung_up += c.hung_up;
            self.total.late_total_ms = self.total.late_total_ms.saturating_add(c.late_total_ms);
            self.total.late_worst_ms = self.total.late_worst_ms.max(c.late_worst_ms);
        }
        (c, busy)
    }
}

impl Drop for Meter {
    /// The gateway stops: the summary of what has not been summarised yet.
    fn drop(&mut self) {
        let w = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        w.close_window(0);
        if w.busy_seconds > 0 {
            tracing::info!("{}", summary(w));
        }
    }
}

fn window_line(c: &Counts, seconds: u64, open: u64) -> String {
    let per_s = c.finished as f64 / seconds.max(1) as f64;
    let mut line = format!(
        "load test, last {seconds} s: {per_s:.1} replies/s finished, {open} open now, {} \
         client(s) hung up early",
        c.hung_up
    );
    if let Some(mean) = c.late_total_ms.checked_div(c.finished) {
        line.push_str(&format!(
            "; replies ended {mean} ms past reply_seconds on average (worst {} ms)",
            c.late_worst_ms
        ));
    }
    line
}

/// The summary of a busy stretch; resets the totals.
fn summary(w: &mut Windows) -> String {
    let t = std::mem::take(&mut w.total);
    let line = format!(
        "load test summary, over {} s: {} replies finished, {} client(s) hung up early; peak \
         {} replies open at once; the worst reply ended {} ms past reply_seconds",
        w.busy_seconds, t.finished, t.hung_up, w.peak_open, t.late_worst_ms
    );
    w.busy_seconds = 0;
    w.peak_open = w.open;
    line
}

async fn report(meter: Weak<Meter>) {
    let mut every = tokio::time::interval(REPORT_EVERY);
    every.tick().await;
    loop {
        every.tick().await;
        let Some(meter) = meter.upgrade() else {
            return;
        };
        if let Some(line) = meter.tick(REPORT_EVERY.as_secs()) {
            tracing::info!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn canned(tokens: u32, ms: u64) -> Canned {
        let cfg = LoadTestConfig {
            reply_tokens: tokens,
            reply_time: Duration::from_millis(ms),
        };
        Canned::new(&cfg, Arc::new(Meter::default()))
    }

    #[test]
    fn the_reply_has_a_delta_per_three_tokens_and_zero_usage() {
        let c = canned(750, 0);
        // start, block start, 250 deltas, block stop, message delta, stop
        assert_eq!(c.frames.len(), 255);
        let v: serde_json::Value = serde_json::from_slice(&c.json).unwrap();
        assert_eq!(v["usage"]["output_tokens"], 0);
        assert_eq!(v["model"], "load-test");
        assert!(
            v["content"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with(NOTICE)
        );
        assert_eq!(canned(1, 0).frames.len(), 6);
    }

    #[tokio::test(start_paused = true)]
    async fn a_streamed_reply_takes_reply_seconds_and_is_counted() {
        let c = canned(30, 1000);
        let started = tokio::time::Instant::now();
        let mut body = c.stream().body;
        let mut frames = 0;
        while let Some(chunk) = body.next().await {
            chunk.unwrap();
            frames += 1;
        }
        assert_eq!(frames, 15);
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        let w = c.meter.with(|w| (w.window.finished, w.open, w.peak_open));
        assert_eq!(w, (1, 0, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_reply_dropped_early_is_a_hang_up() {
        let c = canned(30, 1000);
        let mut body = c.stream().body;
        body.next().await.unwrap().unwrap();
        drop(body);
        let w = c
            .meter
            .with(|w| (w.window.finished, w.window.hung_up, w.open));
        assert_eq!(w, (0, 1, 0));
        let line = c.meter.tick(10).unwrap();
        assert!(line.contains("1 client(s) hung up early"), "{line}");
        let summary = c.meter.tick(10).unwrap();
        assert!(
            summary.starts_with("load test summary, over 10 s"),
            "{summary}"
        );
        assert_eq!(c.meter.tick(10), None);
    }
}
