//! The recorder task: prices finished requests, writes usage rows in batches and emits the
//! `inference` event, off the request path.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::pricing::{PriceSource, Pricing};
use super::{BillingGroup, Finished};
use crate::conversation::Tracker;
use crate::conversation::tracker::Served;
use crate::events::{Event, EventSink};
use crate::store::{Store, UsageRecord};

/// Cheap handle for sending finished requests to the recorder task.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::UnboundedSender<Finished>,
}

impl Recorder {
    pub fn record(&self, finished: Finished) {
        if self.tx.send(finished).is_err() {
            tracing::error!("usage recorder is gone; a usage row was lost");
        }
    }
}

const BATCH: usize = 512;
/// How long the recorder waits for more finished requests before writing a batch.
const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(25);

/// Starts the recorder. It runs until `stop` is cancelled, then writes what is queued.
pub fn spawn(
    store: Arc<dyn Store>,
    pricing: Arc<Pricing>,
    events: Arc<dyn EventSink>,
    conversations: Arc<Tracker>,
    stop: CancellationToken,
) -> (Recorder, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Finished>();
    let task = tokio::spawn(async move {
        let mut finished = Vec::with_capacity(BATCH);
        let mut stopping = false;
        loop {
            let first = if stopping {
                rx.recv().await
            } else {
                tokio::select! {
                    f = rx.recv() => f,
                    () = stop.cancelled() => { stopping = true; rx.close(); rx.recv().await }
                }
            };
            let Some(first) = first else { break };
            finished.push(first);
            // Gather what arrives within a short window: one transaction and one write of
            // event lines per batch instead of per request. The window is slept out rather
            // than spent receiving, so a finished request wakes this task only when it is
            // the first of a batch (a wake per request costs the request path a futex and a
            // context switch on a busy runtime).
            // Charges wait too: the spend lease a charged request was admitted under
            // covers it in the store until its row lands (see `spend::ledger`).
            if !stopping && rx.len() < BATCH {
                tokio::select! {
                    () = tokio::time::sleep(BATCH_WINDOW) => {}
                    () = stop.cancelled() => { stopping = true; rx.close(); }
                }
            }
            while finished.len() < BATCH {
                match rx.try_recv() {
                    Ok(f) => finished.push(f),
                    Err(_) => break,
                }
            }
            let mut lines = Vec::with_capacity(finished.len());
            let mut charges = Vec::new();
            let rows: Vec<UsageRecord> = finished
                .drain(..)
                .map(|f| {
                    let turn = f.request.conversation;
                    let rec = price(f, &pricing, &mut lines, &mut charges);
                    if let Some(turn) = turn
                        && let Some(e) = cache_health(&conversations, &turn, &rec)
                    {
                        lines.push(e);
                    }
                    rec
                })
                .collect();
            events.emit_batch(&lines);
            let written = write(store.as_ref(), rows, &charges, stopping).await;
            for (charge, cost) in charges {
                if written {
                    charge.landed(cost);
                } else {
                    charge.lost();
                }
            }
        }
    });
    (Recorder { tx }, task)
}

/// How long a batch is retried while the store is down: its rows are the only record of
/// requests an upstream served (and of money, for those that charge spend leases, whose
/// leases stay open until they land), whether or not they charge a cap.
const CHARGE_RETRY: Duration = Duration::from_secs(120);

/// Writes a batch, retrying (for [`CHARGE_RETRY`], or five times once the gateway is
/// stopping); false if it could not be written. The first failure tells the charges'
/// ledger, so no more requests are admitted out of leases meanwhile.
async fn write(
    store: &dyn Store,
    rows: Vec<UsageRecord>,
    charges: &Charges,
    stopping: bool,
) -> bool {
    let rows = Arc::new(rows);
    // Uncapped rows too: a batch without charges given up after five quick attempts lost
    // every client key's row of a store restart (the issue 35 drill).
    let patient = !stopping;
    let deadline = tokio::time::Instant::now() + CHARGE_RETRY;
    let mut delay = Duration::from_millis(50);
    for attempt in 1.. {
        match store.insert_usage(rows.clone()).await {
            Ok(()) => return true,
            Err(e) if attempt < 5 || (patient && tokio::time::Instant::now() < deadline) => {
                if attempt == 1 {
                    for (charge, _) in charges {
                        charge.store_failed();
                    }
                }
                tracing::warn!(attempt, error = %e, "writing usage rows failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
            Err(e) => {
                tracing::error!(rows = rows.len(), error = %e, "usage rows could not be written");
                break;
            }
        }
    }
    false
}

/// The caller's tags on the `inference` event, only those it sent (a plain client's event
/// stays as it was).
fn with_tags(mut event: Event, tags: &crate::store::ClientTags) -> Event {
    let fields = [
        ("session_id", tags.session_id.as_deref()),
        ("agent_id", tags.agent_id.as_deref()),
        ("parent_agent_id", tags.parent_agent_id.as_deref()),
        ("request_class", tags.request_class),
        ("client", tags.client.as_deref()),
    ];
    for (key, value) in fields {
        if let Some(v) = value {
            event = event.with(key, v);
        }
    }
    event
}

/// A conversation's turn answered: remembered, and a `cache.broken` event when its cache
/// reads fell to zero.
fn cache_health(
    conversations: &Tracker,
    turn: &crate::conversation::Turn,
    rec: &UsageRecord,
) -> Option<Event> {
    let (Some(upstream), Some(model)) = (rec.upstream.as_deref(), rec.upstream_model.as_deref())
    else {
        return None;
    };
    if !(200..300).contains(&rec.status) || rec.endpoint == "count_tokens" {
        return None;
    }
    let served = Served {
        upstream,
        model,
        input: rec.input_tokens,
        cache_read: rec.cache_read_tokens,
        cache_write: rec
            .cache_write_5m_tokens
            .saturating_add(rec.cache_write_1h_tokens),
        at: rec.created_at,
    };
    let broke = conversations.observe(turn, &served)?;
    let event = Event::new("cache.broken")
        .with("request_id", rec.request_id.clone())
        .with("principal", rec.principal.clone())
        .with("model", rec.model.clone())
        .with("upstream", upstream)
        .with("upstream_model", model)
        .with("cause", broke.cause.label())
        .with("explanation", broke.cause.explain())
        .with("input_tokens", rec.input_tokens)
        .with(
            "cache_write_tokens",
            rec.cache_write_5m_tokens
                .saturating_add(rec.cache_write_1h_tokens),
        );
    let event = match rec.tags.session_id.as_deref() {
        Some(s) => event.with("session_id", s),
        None => event,
    };
    conversations.remember(crate::conversation::tracker::BreakRecord {
        request_id: rec.request_id.clone(),
        at: rec.created_at,
        session_id: rec.tags.session_id.clone(),
        upstream: upstream.to_owned(),
        model: rec.model.clone(),
        cause: broke.cause.label(),
        explanation: broke.cause.explain(),
    });
    Some(event)
}

type Charges = Vec<(Arc<dyn super::Charge>, u64)>;

fn price(
    f: Finished,
    pricing: &Pricing,
    events: &mut Vec<Event>,
    charges: &mut Charges,
) -> UsageRecord {
    let at = pricing.priced_as(
        &f.request.model,
        f.route.upstream.as_deref(),
        f.route.upstream_model.as_deref(),
    );
    let (cost, source) = if f.request.endpoint == "count_tokens" {
        (0, PriceSource::Builtin)
    } else {
        pricing.cost_with_search_price(&at, &f.usage, f.route.search_price)
    };
    // Flagged once per model: the operator prices it (`pricing.overrides`) or accepts
    // `pricing.default`.
    if source == PriceSource::Default
        && f.usage != Default::default()
        && pricing.first_unpriced(at.model)
    {
        tracing::warn!(model = %at.model, "no price known for this model; charged at pricing.default");
        events.push(
            Event::new("pricing.unknown_model")
                .with("request_id", f.request.request_id.clone())
                .with("model", at.model.to_owned()),
        );
    }
    let rec = UsageRecord {
        request_id: f.request.request_id,
        // Made here, once: every retry of this batch carries the same key.
        row_key: UsageRecord::new_row_key(),
        created_at: f.request.created_at,
        principal: f.request.principal,
        endpoint: f.request.endpoint.to_owned(),
        model: f.request.model,
        upstream: f.route.upstream,
        upstream_model: f.route.upstream_model,
        status: f.route.status,
        route_reason: f.route.route_reason,
        stream: f.request.stream,
        input_tokens: f.usage.input_tokens,
        output_tokens: f.usage.output_tokens,
        cache_read_tokens: f.usage.cache_read_tokens,
        cache_write_5m_tokens: f.usage.cache_write_5m_tokens,
        cache_write_1h_tokens: f.usage.cache_write_1h_tokens,
        web_search_requests: f.usage.web_search_requests,
        cost_micro_usd: cost.saturating_add(f.request.abandoned_micro),
        usage_source: if f.request.abandoned_micro > 0 || f.route.estimated {
            "estimated".to_owned()
        } else {
            f.source.as_str().to_owned()
        },
        latency_ms: f.latency.as_millis() as u64,
        ttfb_ms: f.route.ttfb.map(|d| d.as_millis() as u64),
        client_disconnected: f.client_disconnected,
        reservation_id: f
            .request
            .charge
            .as_ref()
            .map(|c| c.reservation_id().to_owned()),
        tags: f.request.tags.map(|t| *t).unwrap_or_default(),
    };
    if let Some(charge) = f.request.charge {
        charges.push((charge, rec.cost_micro_usd));
    }
    let event = Event::new("inference")
        .with("request_id", rec.request_id.clone())
        .with("principal", rec.principal.clone())
        .with("endpoint", rec.endpoint.clone())
        .with("model", rec.model.clone())
        .with("upstream", rec.upstream.clone())
        .with("upstream_model", rec.upstream_model.clone())
        .with("status", rec.status)
        .with("route_reason", rec.route_reason.clone())
        .with("attempts", f.route.attempts)
        .with("stream", rec.stream)
        .with("input_tokens", rec.input_tokens)
        .with("output_tokens", rec.output_tokens)
        .with("cache_read_tokens", rec.cache_read_tokens)
        .with("cache_write_5m_tokens", rec.cache_write_5m_tokens)
        .with("cache_write_1h_tokens", rec.cache_write_1h_tokens)
        .with("web_search_requests", rec.web_search_requests)
        .with("cost_micro_usd", rec.cost_micro_usd)
        .with("usage_source", rec.usage_source.clone())
        .with("latency_ms", rec.latency_ms)
        .with("ttfb_ms", rec.ttfb_ms)
        .with("client_disconnected", rec.client_disconnected)
        .with("upstream_error", f.upstream_error);
    let event = with_tags(event, &rec.tags);
    events.push(match &f.request.billing_group {
        None => event,
        Some(BillingGroup::Group(g)) => event.with("billing_group", g.clone()),
        Some(BillingGroup::Ignored) => event.with("billing_group_ignored", true),
    });
    rec
}
