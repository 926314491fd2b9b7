//! The shared state of a running gateway: what every request handler reads. Built once by
//! `server::start_on`; handlers take `&Gateway` and import nothing above them.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio_util::task::TaskTracker;

use crate::auth::ClientKeys;
use crate::config::Config;
use crate::deps::Deps;
use crate::events::live::Live;
use crate::inference::blocks::Refusals;
use crate::memo::Memo;
use crate::metering::Recorder;
use crate::metering::pricing::Pricing;
use crate::models::Catalog;
use crate::store::Store;
use crate::upstream::Upstreams;

/// Shared state of a running gateway.
pub struct Gateway {
    pub config: Config,
    pub deps: Deps,
    pub store: Arc<dyn Store>,
    pub keys: ClientKeys,
    pub catalog: Catalog,
    pub upstreams: Upstreams,
    pub recorder: Recorder,
    /// Sign-in and sessions, when `oidc` is configured.
    pub identity: Option<crate::identity::Identity>,
    /// Workload-token admission, when `cri.enabled`.
    pub workload: Option<Arc<crate::workload::WorkloadVerifier>>,
    /// Managed policies (empty when `managed` is not configured).
    pub policies: crate::policy::Policies,
    /// Where clients send OTLP (the public URL), when telemetry forwarding is on.
    pub otlp_endpoint: Option<String>,
    /// The policy webhook, when configured.
    pub webhook: Option<crate::policy::webhook::Webhook>,
    /// The OTLP relay (discards when no destination is configured).
    pub relay: crate::telemetry::Relay,
    /// Prices usage (recorder) and worst cases (spend admission).
    pub pricing: Arc<Pricing>,
    /// Who signed in, for admin views.
    pub directory: crate::identity::directory::Directory,
    /// Background work that shutdown waits for (disconnect drains, lease releases).
    pub tracker: TaskTracker,
    /// Spend admission out of per-person leases (used only with spend caps).
    pub ledger: Arc<crate::spend::ledger::Ledger>,
    pub started_at: DateTime<Utc>,
    /// Pause, cached central allowlist and the app API (the desktop app sets them).
    pub local: crate::local_control::LocalControls,
    /// Every event, broadcast to live subscribers (the desktop, dashboard streams).
    pub live: Live,
    /// Prometheus series counted from the events (`/metrics`).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Inference traffic limits (`rate_limits.inference`).
    pub limits: Arc<crate::limits::Limiter>,
    /// The last refusals, for the Policy blocks view.
    pub refusals: Refusals,
    /// What each upstream's models can take (the capability table, remembered).
    pub model_caps: crate::upstream::model_caps::Memo,
    /// The conversations this replica has seen: affinity's memory, cache health.
    pub conversations: Arc<crate::conversation::Tracker>,
    /// `/readyz`'s answer (ready, reason): one probe at a time, shared by its waiters.
    pub readiness: Memo<(bool, &'static str)>,
    /// `store.readiness_grace_seconds`: how long a failing store still reads as ready.
    pub ready_grace: crate::readiness::Readiness,
    /// The status snapshots without detail (reused for a second) and with detail (one
    /// at a time, shared by its waiters), so no traffic can queue store reads.
    pub snapshots: [Memo<serde_json::Value>; 2],
    /// The admin API's overview, shared by every caller for a few seconds.
    pub admin_overview: crate::admin::Overview,
    /// The admin API's usage reports, shared per parameters for a few seconds.
    pub admin_reports: crate::admin::Reports,
}

impl Gateway {
    /// What a request for `requested` costs as when upstream `upstream` (by index) serves it
    /// as `upstream_model` (see [`Pricing::priced_as`]).
    pub fn priced_as<'a>(
        &'a self,
        requested: &'a str,
        upstream: usize,
        upstream_model: &'a str,
    ) -> crate::metering::pricing::PricedAs<'a> {
        let name = self.upstreams.list.get(upstream).map(|u| u.name.as_str());
        self.pricing
            .priced_as(requested, name, Some(upstream_model))
    }
}
