//! Prometheus metrics (`GET /metrics`, behind an admin key), built from the events the
//! gateway already emits: every event is counted by name, and each `inference` event (one
//! per usage row) feeds the request, latency, time-to-first-token, token and cost series,
//! so the figures always agree with the usage rows. Upstream health is read at scrape time.
//!
//! Labels are bounded: event names are fixed in the code, upstreams come from the config,
//! and model ids are kept to the first [`MODEL_LABELS`] distinct ones (then `other`), so an
//! authenticated caller inventing model ids cannot grow the series without bound. No
//! principal, key id or email is ever a label.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde_json::Value;

use crate::deps::Deps;
use crate::events::{Event, EventSink};

mod series;

/// Distinct model labels kept before the rest are counted as `other`.
pub const MODEL_LABELS: usize = 200;

/// The `kind` label of [`series::Series::tokens`], in order.
const TOKEN_KINDS: [&str; 4] = ["input", "output", "cache_read", "cache_write"];
/// The `kind` label of [`series::Series::prompt`], in order.
const PROMPT_KINDS: [&str; 3] = ["cache_read", "cache_write", "uncached"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: String,
    status: String,
    upstream: String,
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    model: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PromptLabels {
    upstream: String,
    model: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BreakLabels {
    upstream: String,
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    upstream: String,
    state: String,
}

fn seconds_buckets() -> Histogram {
    // 5 ms to about 164 s.
    Histogram::new(exponential_buckets(0.005, 2.0, 16))
}

fn store_buckets() -> Histogram {
    // 0.1 ms to about 3.3 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

/// The gateway's metric families and their registry.
pub struct Metrics {
    registry: Registry,
    events: Family<EventLabels, Counter>,
    requests: Family<RequestLabels, Counter>,
    duration: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    ttft: Family<UpstreamLabels, Histogram, fn() -> Histogram>,
    tokens: Family<TokenLabels, Counter>,
    prompt: Family<PromptLabels, Counter>,
    cache_breaks: Family<BreakLabels, Counter>,
    cost: Family<ModelLabels, Counter>,
    disconnects: Family<EndpointLabels, Counter>,
    upstream_state: Family<StateLabels, Gauge>,
    rate_limited: Family<KindLabels, Counter>,
    slots_in_use: Gauge,
    open_reservations: Gauge,
    store_ops: Family<OpLabels, Histogram, fn() -> Histogram>,
    models: Mutex<HashSet<String>>,
    /// Handles to the series of each `inference` label combination seen.
    series: series::Cache,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("gatehouse");
        let events = Family::default();
        registry.register("events", "Events emitted, by name", events.clone());
        let requests = Family::default();
        registry.register(
            "requests",
            "Requests that reached routing (one per usage row), by endpoint, status, upstream and requested model",
            requests.clone(),
        );
        let duration = Family::new_with_constructor(seconds_buckets as fn() -> Histogram);
        registry.register(
            "request_duration_seconds",
            "Time from the request to the end of its answer",
            duration.clone(),
        );
        let ttft = Family::new_with_constructor(seconds_buckets as fn() -> Histogram);
        registry.register(
            "time_to_first_byte_seconds",
            "Time to the upstream's first byte (its headers), per upstream that answered",
            ttft.clone(),
        );
        let tokens = Family::default();
        registry.register(
            "tokens",
            "Tokens reported by upstreams, by requested model and kind",
            tokens.clone(),
        );
        let prompt = Family::default();
        registry.register(
            "prompt_tokens",
            "Prompt tokens of answered Messages requests by upstream, requested model and kind (cache_read, cache_write, uncached): the cache-read ratio is cache_read over their sum",
            prompt.clone(),
        );
        let cache_breaks = Family::default();
        registry.register(
            "cache_breaks",
            "Conversation turns whose prompt-cache reads fell to zero after a cached turn, by upstream and likely cause",
            cache_breaks.clone(),
        );
        let cost = Family::default();
        registry.register(
            "cost_micro_usd",
            "What requests cost, in micro-USD, by requested model",
            cost.clone(),
        );
        let disconnects = Family::default();
        registry.register(
            "client_disconnects",
            "Requests whose caller left before the answer ended",
            disconnects.clone(),
        );
        let upstream_state = Family::default();
        registry.register(
            "upstream_state",
            "1 for each upstream's current health state",
            upstream_state.clone(),
        );
        let rate_limited = Family::default();
        registry.register(
            "rate_limit_refusals",
            "Inference refused by a traffic limit, by limit kind (rpm, tpm, daily_tokens, concurrent)",
            rate_limited.clone(),
        );
        // Every kind from zero, so a rate over the first refusal is right.
        for kind in ["rpm", "tpm", "daily_tokens", "concurrent"] {
            drop(rate_limited.get_or_create(&KindLabels { kind }));
        }
        let slots_in_use = Gauge::default();
        registry.register(
            "concurrency_slots_in_use",
            "Concurrency slots this gateway holds (inference answers in flight under a concurrency limit)",
            slots_in_use.clone(),
        );
        let open_reservations = Gauge::default();
        registry.register(
            "open_reservations",
            "Spend reservations open now in the store (every replica's), read at scrape",
            open_reservations.clone(),
        );
        let store_ops = Family::new_with_constructor(store_buckets as fn() -> Histogram);
        registry.register(
            "store_operation_seconds",
            "Duration of store operations, by operation",
            store_ops.clone(),
        );
        Self {
            registry,
            events,
            store_ops,
            rate_limited,
            slots_in_use,
            open_reservations,
            requests,
            duration,
            ttft,
            tokens,
            prompt,
            cache_breaks,
            cost,
            disconnects,
            upstream_state,
            models: Mutex::new(HashSet::new()),
            series: series::Cache::default(),
        }
    }

    /// The model label: the id itself while fewer than [`MODEL_LABELS`] are known.
    fn model_label(&self, model: &str) -> String {
        let Ok(mut known) = self.models.lock() else {
            return "other".into();
        };
        if known.contains(model) || (known.len() < MODEL_LABELS && known.insert(model.to_owned())) {
            model.to_owned()
        } else {
            "other".into()
        }
    }

    /// Counts an event; an `inference` event also feeds the request series.
    pub fn observe(&self, event: &Event) {
        let labels = EventLabels { event: event.evt };
        self.events.get_or_create(&labels).inc();
        if event.evt == "inference" {
            self.inference(&event.fields);
        }
        if event.evt == "cache.broken" {
            self.cache_break(&event.fields);
        }
        if event.evt == "ratelimit.blocked" {
            // Only the known kinds become labels.
            let kind = match event.fields.get("kind").and_then(Value::as_str) {
                Some("rpm") => "rpm",
                Some("tpm") => "tpm",
                Some("daily_tokens") => "daily_tokens",
                Some("concurrent") => "concurrent",
                _ => "other",
            };
            self.rate_limited.get_or_create(&KindLabels { kind }).inc();
        }
    }

    fn inference(&self, f: &crate::events::Fields) {
        let text = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or_default();
        let number = |k: &str| f.get(k).and_then(Value::as_u64).unwrap_or_default();
        let key = series::KeyRef {
            endpoint: text("endpoint"),
            status: number("status"),
            upstream: text("upstream"),
            model: text("model"),
        };
        let s = match self.series.get(key, || self.resolve(key)) {
            Some(s) => s,
            None => Arc::new(self.resolve(key)),
        };
        let ms = |v: u64| v as f64 / 1000.0;
        s.requests.inc();
        s.duration.observe(ms(number("latency_ms")));
        if let (Some(ttfb), false) = (
            f.get("ttfb_ms").and_then(Value::as_u64),
            key.upstream.is_empty(),
        ) {
            let up = || UpstreamLabels {
                upstream: key.upstream.to_owned(),
            };
            let h = s
                .ttft
                .get_or_init(|| self.ttft.get_or_create(&up()).clone());
            h.observe(ms(ttfb));
        }
        for (i, field) in [
            (0, "input_tokens"),
            (1, "output_tokens"),
            (2, "cache_read_tokens"),
            (3, "cache_write_5m_tokens"),
            (3, "cache_write_1h_tokens"),
        ] {
            let n = number(field);
            if n > 0 {
                let labels = || TokenLabels {
                    model: s.model.clone(),
                    kind: TOKEN_KINDS[i].to_owned(),
                };
                s.tokens[i]
                    .get_or_init(|| self.tokens.get_or_create(&labels()).clone())
                    .inc_by(n);
            }
        }
        if !key.upstream.is_empty() && key.endpoint != "count_tokens" {
            let write =
                number("cache_write_5m_tokens").saturating_add(number("cache_write_1h_tokens"));
            let sums = [number("cache_read_tokens"), write, number("input_tokens")];
            for (i, n) in sums.into_iter().enumerate() {
                if n > 0 {
                    let labels = || PromptLabels {
                        upstream: key.upstream.to_owned(),
                        model: s.model.clone(),
                        kind: PROMPT_KINDS[i],
                    };
                    s.prompt[i]
                        .get_or_init(|| self.prompt.get_or_create(&labels()).clone())
                        .inc_by(n);
                }
            }
        }
        let cost = number("cost_micro_usd");
        if cost > 0 {
            let labels = || ModelLabels {
                model: s.model.clone(),
            };
            s.cost
                .get_or_init(|| self.cost.get_or_create(&labels()).clone())
                .inc_by(cost);
        }
        if f.get("client_disconnected").and_then(Value::as_bool) == Some(true) {
            let labels = || EndpointLabels {
                endpoint: key.endpoint.to_owned(),
            };
            s.disconnects
                .get_or_init(|| self.disconnects.get_or_create(&labels()).clone())
                .inc();
        }
    }

    /// The series an `inference` event with these labels feeds (see [`series`]).
    fn resolve(&self, key: series::KeyRef<'_>) -> series::Series {
        let model = self.model_label(key.model);
        let requests = RequestLabels {
            endpoint: key.endpoint.to_owned(),
            status: key.status.to_string(),
            upstream: key.upstream.to_owned(),
            model: model.clone(),
        };
        let endpoint = EndpointLabels {
            endpoint: key.endpoint.to_owned(),
        };
        series::Series::new(
            model,
            self.requests.get_or_create(&requests).clone(),
            self.duration.get_or_create(&endpoint).clone(),
        )
    }

    fn cache_break(&self, f: &crate::events::Fields) {
        // Only the causes the tracker names become labels.
        let cause = match f.get("cause").and_then(Value::as_str) {
            Some("upstream_switch") => "upstream_switch",
            Some("model_switch") => "model_switch",
            Some("system_changed") => "system_changed",
            Some("tools_changed") => "tools_changed",
            Some("expired") => "expired",
            _ => "unknown",
        };
        let upstream = f
            .get("upstream")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        self.cache_breaks
            .get_or_create(&BreakLabels { upstream, cause })
            .inc();
    }

    /// Where a [`crate::store::timed::Timed`] store reports each operation's duration.
    pub fn store_observer(self: &Arc<Self>) -> crate::store::timed::Observe {
        let me = self.clone();
        Arc::new(move |op, took| {
            me.store_ops
                .get_or_create(&OpLabels { op })
                .observe(took.as_secs_f64());
        })
    }

    /// The text exposition of `gw`'s metrics, with the state read now.
    pub async fn scrape(gw: &crate::gateway::Gateway) -> String {
        gw.metrics.slots_in_use.set(gw.limits.slots_in_use());
        // A store that cannot answer keeps the last figure.
        match gw.store.open_reservation_count().await {
            Ok(n) => {
                gw.metrics
                    .open_reservations
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            Err(e) => tracing::warn!(error = %e, "metrics: open reservations unreadable"),
        }
        gw.metrics.render(&gw.upstreams.health.to_json(false))
    }

    /// The text exposition, with the upstreams' states as `health` shows them now.
    pub fn render(&self, upstreams: &[Value]) -> String {
        self.upstream_state.clear();
        for u in upstreams {
            let (Some(name), Some(state)) = (u["name"].as_str(), u["state"].as_str()) else {
                continue;
            };
            let l = StateLabels {
                upstream: name.to_owned(),
                state: state.to_owned(),
            };
            self.upstream_state.get_or_create(&l).set(1);
        }
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// The exposition as an HTTP answer.
pub fn text_response(text: String) -> http::Response<axum::body::Body> {
    let mut resp = http::Response::new(axum::body::Body::from(text));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    );
    resp
}

/// The optional separate listener (`metrics.listen`): `GET /metrics` without a key, nothing
/// else; it stops with `stop`.
pub async fn serve_listener(
    listener: tokio::net::TcpListener,
    gw: Arc<crate::gateway::Gateway>,
    stop: tokio_util::sync::CancellationToken,
) {
    let app =
        axum::Router::new()
            .route(
                "/metrics",
                axum::routing::get(
                    |axum::extract::State(gw): axum::extract::State<
                        Arc<crate::gateway::Gateway>,
                    >| async move { text_response(Metrics::scrape(&gw).await) },
                ),
            )
            .with_state(gw);
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await;
    if let Err(e) = served {
        tracing::warn!(error = %e, "the metrics listener stopped");
    }
}

/// An event sink that counts every event into [`Metrics`] before passing it on.
struct Counting {
    inner: Arc<dyn EventSink>,
    metrics: Arc<Metrics>,
}

impl EventSink for Counting {
    fn emit(&self, event: &Event) {
        self.metrics.observe(event);
        self.inner.emit(event);
    }

    fn emit_batch(&self, events: &[Event]) {
        for e in events {
            self.metrics.observe(e);
        }
        // One write for the batch: the default would hand the sink one event at a time.
        self.inner.emit_batch(events);
    }
}

/// Puts the metrics in the event path of `deps`.
pub fn tap(mut deps: Deps) -> (Deps, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    deps.events = Arc::new(Counting {
        inner: deps.events.clone(),
        metrics: metrics.clone(),
    });
    (deps, metrics)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn inference_events_become_series_and_models_are_bounded() {
        let m = Metrics::new();
        for i in 0..(MODEL_LABELS + 5) {
            m.observe(
                &Event::new("inference")
                    .with("endpoint", "messages")
                    .with("model", format!("claude-sonnet-4-{i}"))
                    .with("upstream", "a")
                    .with("status", 200)
                    .with("input_tokens", 10)
                    .with("output_tokens", 2)
                    .with("cost_micro_usd", 7)
                    .with("latency_ms", 30)
                    .with("ttfb_ms", 5),
            );
        }
        m.observe(&Event::new("access.denied"));
        let text = m.render(&[json!({"name": "a", "state": "healthy"})]);
        assert!(text.contains("gatehouse_events_total{event=\"access.denied\"} 1"));
        assert!(text.contains("model=\"other\""), "past the bound");
        assert!(text.contains("gatehouse_upstream_state{upstream=\"a\",state=\"healthy\"} 1"));
        assert!(text.contains("gatehouse_time_to_first_byte_seconds_count{upstream=\"a\"} 205"));
        let models = text.matches("gatehouse_cost_micro_usd_total{").count();
        assert_eq!(models, MODEL_LABELS + 1);
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn prompt_tokens_by_upstream_and_cache_breaks_by_cause() {
        let m = Metrics::new();
        m.observe(
            &Event::new("inference")
                .with("endpoint", "messages")
                .with("model", "claude-sonnet-4-6")
                .with("upstream", "a")
                .with("status", 200)
                .with("input_tokens", 10)
                .with("cache_read_tokens", 900)
                .with("cache_write_5m_tokens", 90),
        );
        m.observe(
            &Event::new("cache.broken")
                .with("upstream", "b")
                .with("cause", "upstream_switch"),
        );
        m.observe(
            &Event::new("cache.broken")
                .with("upstream", "b")
                .with("cause", "<script>"),
        );
        let text = m.render(&[]);
        for needle in [
            "gatehouse_prompt_tokens_total{upstream=\"a\",model=\"claude-sonnet-4-6\",kind=\"cache_read\"} 900",
            "gatehouse_prompt_tokens_total{upstream=\"a\",model=\"claude-sonnet-4-6\",kind=\"cache_write\"} 90",
            "gatehouse_prompt_tokens_total{upstream=\"a\",model=\"claude-sonnet-4-6\",kind=\"uncached\"} 10",
            "gatehouse_cache_breaks_total{upstream=\"b\",cause=\"upstream_switch\"} 1",
            "gatehouse_cache_breaks_total{upstream=\"b\",cause=\"unknown\"} 1",
        ] {
            assert!(text.contains(needle), "{needle} in {text}");
        }
    }
}
