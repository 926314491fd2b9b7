//! Inference: `POST /v1/messages`, `/v1/messages/count_tokens` and the OpenAI front door
//! `/v1/chat/completions`, as named steps in the order they run ([`handle`]):
//!
//! ```text
//! not paused -> read body (bounded) -> [chat: OpenAI body -> Messages body]
//!  -> billing tags (signed-in callers: `tags`, request-tags beta out) -> JSON head
//!  -> policy webhook -> model allowed -> routing rule -> legs (operator catalog)
//!  -> routing plan -> traffic limits -> spend reservation
//!  -> route (strategy, health, failover) -> relay (metered) -> [chat: answer -> OpenAI shape]
//! ```
//!
//! Every refusal goes through [`refusal::refuse`] (event, Policy blocks entry, error); the
//! answer is relayed by [`relay`], which meters it on the side and settles the reservation.

mod affinity;
pub mod billing;
pub mod blocks;
pub mod body;
pub mod chat;
pub mod explain;
pub mod idempotency;
pub mod load_test;
mod plan;
pub mod probe;
pub mod refusal;
mod relay;
pub mod rules;
pub mod server_tools;
mod shape;

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Limited};
use serde_json::Value;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::events::Event;
use crate::gateway::Gateway;
use crate::identity::UserIdentity;
use crate::metering::RequestFacts;
use crate::metering::tags::ClientTags;
use crate::spend::admission::{Admitted, Held};
use crate::upstream::router::{self, Leg, Routed};
use crate::upstream::{Caller, Operation};
use refusal::{Layer, refuse};

/// Which inference endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Messages,
    CountTokens,
    /// The OpenAI front door: a Messages call once its body is translated.
    ChatCompletions,
}

impl Endpoint {
    fn operation(self) -> Operation {
        match self {
            Endpoint::Messages | Endpoint::ChatCompletions => Operation::Messages,
            Endpoint::CountTokens => Operation::CountTokens,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Endpoint::Messages => "messages",
            Endpoint::CountTokens => "count_tokens",
            Endpoint::ChatCompletions => "chat_completions",
        }
    }
}

/// Whether the caller asks for the 1M-token context window (`anthropic-beta:
/// context-1m-…`), which raises the input bound of the spend worst case.
fn long_context(headers: &http::HeaderMap) -> bool {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|b| b.trim().starts_with("context-1m"))
}

/// The worst case of the attempts given up at the first-byte timeout (legs by index). The
/// cost drivers are read here if admission did not need them (a rare path).
fn abandoned_cost(
    gw: &Gateway,
    head: &body::Head,
    bytes: &[u8],
    headers: &http::HeaderMap,
    abandoned: &[usize],
    upstream_models: &[(usize, String)],
) -> u64 {
    let drivers = head.drivers.unwrap_or_else(|| {
        let mut d = body::parse_head(bytes, true)
            .ok()
            .and_then(|h| h.drivers)
            .unwrap_or_default();
        d.long_context = long_context(headers);
        d
    });
    abandoned
        .iter()
        .map(|leg| {
            let (upstream, model) = &upstream_models[*leg];
            crate::spend::worst_case_micro(
                &gw.pricing,
                &gw.priced_as(&head.model, *upstream, model),
                bytes.len(),
                head.max_tokens,
                &drivers,
            )
        })
        .fold(0u64, u64::saturating_add)
}

/// One inference request on its way through the steps.
struct Call<'a> {
    gw: &'a Arc<Gateway>,
    request_id: &'a str,
    principal: &'a Principal,
    endpoint: Endpoint,
}

pub async fn handle(
    gw: &Arc<Gateway>,
    request_id: &str,
    principal: &Principal,
    endpoint: Endpoint,
    req: Request<Body>,
) -> Result<Response<Body>, ApiError> {
    let started = Instant::now();
    let call = Call {
        gw,
        request_id,
        principal,
        endpoint,
    };
    call.not_paused()?;
    let (parts, bytes) = call.read_body(req).await?;
    let held = match endpoint {
        Endpoint::CountTokens => None,
        _ => match idempotency::claim(gw, principal, endpoint.name(), &parts.headers, &bytes)
            .await?
        {
            idempotency::Claim::Replay(answer) => return Ok(answer),
            idempotency::Claim::Run(held) => held,
        },
    };
    let answered = answer(&call, parts, bytes, started).await;
    idempotency::finish(held, answered).await
}

/// Everything after the body read (and the `Idempotency-Key` claim).
async fn answer(
    call: &Call<'_>,
    mut parts: http::request::Parts,
    bytes: Bytes,
    started: Instant,
) -> Result<Response<Body>, ApiError> {
    let (gw, request_id, principal, endpoint) =
        (call.gw, call.request_id, call.principal, call.endpoint);
    let (bytes, chat) = call.openai_in(&mut parts.headers, bytes)?;
    let (bytes, billing_group) = call.billing_tags(&mut parts.headers, bytes);
    // What can raise the cost is read only when caps will price it.
    let mut head = body::parse_head(&bytes, gw.config.spend.is_some())?;
    if let Some(d) = head.drivers.as_mut() {
        d.long_context = long_context(&parts.headers);
    }
    call.webhook(&parts, &bytes, &head.model).await?;
    call.model_allowed(&head.model, &bytes)?;
    let rule = call.rule(&head.model, &bytes, &parts.headers)?;
    let target = rule.and_then(|r| r.model.as_deref()).unwrap_or(&head.model);
    let (legs, not_configured) = call.legs(target, &head.model, &bytes)?;
    let (legs, not_configured) = call.only_rule_upstreams(rule, target, legs, not_configured)?;
    let shaped = call.shape(&head.model, &bytes, legs, not_configured)?;
    let (legs, not_configured) = (shaped.legs, shaped.not_configured);
    let tags = ClientTags::from_headers(&parts.headers);
    let turn = call.turn(&head, tags.as_deref());
    let mut plan = call.plan(&parts.headers, &head.model, rule)?;
    plan.affinity = call.affine(&head.model, turn.as_ref(), legs.len());
    plan.shaped = shaped.note.as_deref();
    let upstream_models: Vec<(usize, String)> = legs
        .iter()
        .map(|l| (l.upstream, l.upstream_model.clone()))
        .collect();
    let ticket = call.limit(&head, bytes.len()).await?;
    let held = call.reserve(&head, &upstream_models, bytes.len()).await?;
    let mut facts = RequestFacts {
        request_id: request_id.to_owned(),
        created_at: gw.deps.clock.now(),
        started,
        principal: principal.label(),
        endpoint: endpoint.name(),
        model: head.model.clone(),
        stream: head.stream,
        charge: None,
        abandoned_micro: 0,
        billing_group,
        tags,
        conversation: turn,
    };
    let caller = match principal {
        Principal::Session { user, .. } => Some(Caller {
            request_id,
            sub: &user.sub,
            email: user.email.as_deref(),
        }),
        _ => None,
    };
    let request = router::Request {
        op: endpoint.operation(),
        query: parts.uri.query(),
        headers: &parts.headers,
        stream: head.stream,
        caller,
        affinity: plan.affinity.map(|a| a.key),
    };
    let mut abandoned = Vec::new();
    // Server tools no candidate runs (shaping let them through: `server_tools` configures
    // them): the gateway runs them, routing each step itself.
    let routed = if server_tools::needed(gw, &bytes, &legs) {
        server_tools::run(gw, &request, &plan, legs, &not_configured, &mut abandoned).await
    } else {
        router::route_with(
            &gw.upstreams,
            &request,
            &plan,
            legs,
            &not_configured,
            &mut abandoned,
        )
        .await
    };
    // Attempts given up at the first-byte timeout may still have been served (and billed)
    // upstream: each is charged its worst case, flagged estimated.
    if !abandoned.is_empty() {
        facts.abandoned_micro = abandoned_cost(
            gw,
            &head,
            &bytes,
            &parts.headers,
            &abandoned,
            &upstream_models,
        );
    }
    // An answer under another id (a model map, a cloud id, a fallback model) names the
    // requested one, so a client resuming from it asks for a model the gateway serves;
    // a built-in model's own dated first-party id is one, and stays (as the reference's).
    let mut routed = routed;
    if let Routed::Answer { response, leg, .. } = &mut routed
        && upstream_models.get(*leg).is_some_and(|(_, m)| {
            *m != head.model && !crate::models::provider_ids::same_first_party(&head.model, m)
        })
    {
        crate::upstream::echo::requested_model(response, &head.model);
    }
    // From here every path records usage, which settles the reservation.
    let response = relay::respond(call, routed, facts, held, ticket.charge, &upstream_models).await;
    let response = match chat {
        Some(ctx) => chat::respond(response, ctx).await,
        None => response,
    };
    // The concurrency slot is held until the answer's body is gone.
    Ok(crate::limits::hold(response, ticket.slot))
}

impl Call<'_> {
    /// An event with this request's id and principal.
    fn event(&self, name: &'static str) -> Event {
        Event::new(name)
            .with("request_id", self.request_id)
            .with("principal", self.principal.label())
    }

    /// `access.denied` for `layer`, with the reason and (when known) the model.
    fn denied(&self, reason: &'static str, layer: &'static str, model: Option<&str>) -> Event {
        let e = self
            .event("access.denied")
            .with("reason", reason)
            .with("layer", layer);
        match model {
            Some(m) => e.with("model", m),
            None => e,
        }
    }

    /// The desktop can pause the gateway.
    fn not_paused(&self) -> Result<(), ApiError> {
        if !self.gw.local.paused() {
            return Ok(());
        }
        let error = ApiError::UpstreamUnavailable(
            "Gatehouse is paused; resume it from the tray menu".into(),
        );
        let event = self.denied("paused", "paused", None);
        Err(refuse(
            self.gw,
            self.request_id,
            Layer::Paused,
            None,
            event,
            error,
        ))
    }

    /// The body, bounded by `limits.max_request_bytes`.
    async fn read_body(
        &self,
        req: Request<Body>,
    ) -> Result<(http::request::Parts, Bytes), ApiError> {
        let (parts, body) = req.into_parts();
        let limit = usize::try_from(self.gw.config.limits.max_request_bytes).unwrap_or(usize::MAX);
        match Limited::new(body, limit).collect().await {
            Ok(collected) => Ok((parts, collected.to_bytes())),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::PayloadTooLarge(
                format!("request body exceeds the limit of {limit} bytes"),
            )),
            Err(e) if crate::edge::listener::is_body_timeout(e.as_ref()) => {
                Err(ApiError::BodyTimeout)
            }
            Err(_) => Err(ApiError::InvalidRequest(
                "the request body could not be read".into(),
            )),
        }
    }

    /// The OpenAI front door is translated here, once: every later step sees a Messages
    /// body (the webhook too, with the path telling which door), and the answer is
    /// translated back at the end with the context returned here. The answer is asked for
    /// in identity encoding, so it can be read.
    fn openai_in(
        &self,
        headers: &mut http::HeaderMap,
        bytes: Bytes,
    ) -> Result<(Bytes, Option<chat::Context>), ApiError> {
        if self.endpoint != Endpoint::ChatCompletions {
            return Ok((bytes, None));
        }
        let (translated, ctx) = chat::request(&bytes, self.gw.deps.clock.now().timestamp())?;
        headers.remove(http::header::ACCEPT_ENCODING);
        Ok((translated, Some(ctx)))
    }

    /// `admin.billing_group_tag`: a signed-in person's request tags and the request-tags
    /// beta never reach an upstream (nor the webhook); the billing group they name is kept
    /// for the `inference` event.
    fn billing_tags(
        &self,
        headers: &mut http::HeaderMap,
        bytes: Bytes,
    ) -> (Bytes, Option<crate::metering::BillingGroup>) {
        let configured = self
            .gw
            .config
            .identity
            .as_ref()
            .and_then(|i| i.billing_group_tag.as_deref());
        let Some(tag) = billing::tag_for(self.principal, configured) else {
            return (bytes, None);
        };
        billing::strip_beta(headers);
        let groups = match self.principal {
            Principal::Session { user, .. } => user.groups.as_slice(),
            _ => &[],
        };
        let (bytes, group) = billing::strip_tags(bytes, tag, groups);
        (bytes, group.filter(|_| self.endpoint == Endpoint::Messages))
    }

    /// The policy webhook sees the parsed request before any routing decision.
    async fn webhook(
        &self,
        parts: &http::request::Parts,
        body: &[u8],
        model: &str,
    ) -> Result<(), ApiError> {
        use crate::policy::webhook::Decision;
        let Some(webhook) = &self.gw.webhook else {
            return Ok(());
        };
        let sub = match self.principal {
            Principal::Session { user, .. } => user.sub.clone(),
            Principal::Workload(w) => w.sub.clone(),
            Principal::ClientKey { id } => format!("key:{id}"),
        };
        let (path, query) = (parts.uri.path(), parts.uri.query());
        let decision = webhook
            .check(path, query, &parts.headers, body, self.request_id, &sub)
            .await;
        let (event, reason) = match decision {
            Decision::Allow => return Ok(()),
            Decision::Skipped { why } => {
                tracing::warn!(reason = %why, "policy webhook unavailable; failing open");
                self.gw
                    .deps
                    .emit(self.event("policy.skipped").with("why", why));
                return Ok(());
            }
            Decision::Unavailable { why } => {
                tracing::warn!(reason = %why, "policy webhook unavailable; failing closed");
                let reason = "policy check unavailable".to_owned();
                let event = self
                    .event("policy.blocked")
                    .with("rule_id", Value::Null)
                    .with("reason", reason.clone())
                    .with("why", why);
                (event, reason)
            }
            Decision::Block { reason, rule_id } => {
                let event = self
                    .event("policy.blocked")
                    .with("rule_id", rule_id)
                    .with("reason", reason.clone());
                (event, reason)
            }
        };
        let error = ApiError::PolicyBlocked(reason);
        Err(refuse(
            self.gw,
            self.request_id,
            Layer::Webhook,
            Some(model),
            event,
            error,
        ))
    }

    /// The caller's managed policy (`deniedModels`, `availableModels`, also on `model`
    /// fields nested in the body), then (desktop) the cached central policy: each refuses
    /// locally what it does not allow.
    fn model_allowed(&self, model: &str, bytes: &Bytes) -> Result<(), ApiError> {
        let policy = match self.principal {
            Principal::Session { user, .. } => self.gw.policies.matched(user),
            _ => None,
        };
        let refused = policy
            .filter(|p| !p.rules.is_empty())
            .and_then(|p| crate::policy::model_rules::refusal(&p.rules, model, bytes));
        let cached = self
            .gw
            .local
            .models()
            .filter(|allowed| !crate::policy::model_allowed(allowed, model));
        let message = refused.or_else(|| {
            cached.map(|allowed| {
                format!(
                    "model `{model}` is not allowed by your organization's policy (availableModels: {})",
                    allowed.join(", ")
                )
            })
        });
        let Some(message) = message else {
            return Ok(());
        };
        let event = self.denied("model_not_allowed", "policy", Some(model));
        Err(refuse(
            self.gw,
            self.request_id,
            Layer::Policy,
            Some(model),
            event,
            ApiError::InvalidRequest(message),
        ))
    }

    /// The operator's catalog: the upstreams that serve `model`, each with its body (the
    /// model rewritten where the upstream names it differently from `body_model`, the id
    /// in the body), and those that do not.
    fn legs(
        &self,
        model: &str,
        body_model: &str,
        bytes: &Bytes,
    ) -> Result<(Vec<Leg>, Vec<String>), ApiError> {
        let groups: &[String] = match self.principal {
            Principal::Session { user, .. } => &user.groups,
            _ => &[],
        };
        let resolution = self.gw.catalog.resolve_for(model, groups).map_err(|e| {
            let event = self.denied("model_not_allowed", "operator", Some(model));
            let error = ApiError::InvalidRequest(e.to_string());
            refuse(
                self.gw,
                self.request_id,
                Layer::Catalog,
                Some(model),
                event,
                error,
            )
        })?;
        let mut legs = Vec::with_capacity(resolution.targets.len());
        for (upstream, upstream_model) in resolution.targets {
            let body = if upstream_model == body_model {
                bytes.clone()
            } else {
                body::with_model(bytes, &upstream_model)?
            };
            legs.push(Leg {
                upstream,
                upstream_model,
                body,
            });
        }
        Ok((legs, resolution.not_configured))
    }

    /// Traffic limits (`rate_limits.inference`, the per-key concurrency): a ticket to hold
    /// until the answer ends, or a 429 before any upstream. `count_tokens` is not limited.
    async fn limit(
        &self,
        head: &body::Head,
        body_bytes: usize,
    ) -> Result<crate::limits::Ticket, ApiError> {
        use crate::limits::Admission;
        if self.endpoint == Endpoint::CountTokens {
            return Ok(Default::default());
        }
        let estimate = crate::limits::estimate(body_bytes, head.max_tokens);
        let now = self.gw.deps.clock.now();
        match self.gw.limits.admit(self.principal, estimate, now).await {
            Ok(Admission::Admitted(ticket)) => Ok(ticket),
            Ok(Admission::Refused { event, error }) => {
                let event = event
                    .with("request_id", self.request_id)
                    .with("principal", self.principal.label())
                    .with("model", head.model.as_str());
                Err(refuse(
                    self.gw,
                    self.request_id,
                    Layer::RateLimit,
                    Some(&head.model),
                    event,
                    error,
                ))
            }
            Err(e) => {
                let closed = self.gw.config.inference_limits.fail_closed;
                let event = self
                    .event("limits.unavailable")
                    .with("error", e.to_string())
                    .with("fail_closed", closed);
                if !closed {
                    tracing::warn!(error = %e, "traffic limits unavailable; letting the request through");
                    self.gw.deps.emit(event);
                    return Ok(Default::default());
                }
                tracing::warn!(error = %e, "traffic limits unavailable; refusing (rate_limits.fail_closed)");
                let error = ApiError::ServiceUnavailable(
                    "traffic limits unavailable; try again shortly".into(),
                );
                Err(refuse(
                    self.gw,
                    self.request_id,
                    Layer::RateLimit,
                    Some(&head.model),
                    event,
                    error,
                ))
            }
        }
    }

    /// Spend: the worst case reserved against every binding cap of the person (sessions,
    /// and the desktop's local key for personal budgets), or a refusal before any upstream.
    async fn reserve(
        &self,
        head: &body::Head,
        upstream_models: &[(usize, String)],
        body_bytes: usize,
    ) -> Result<Option<Held>, ApiError> {
        let local_user;
        let who = match self.principal {
            Principal::Session { user, .. } => user,
            Principal::ClientKey { id } if id == crate::auth::local_key::LOCAL_KEY_ID => {
                local_user = UserIdentity::local();
                &local_user
            }
            _ => return Ok(None),
        };
        if self.endpoint == Endpoint::CountTokens {
            return Ok(None);
        }
        let models: Vec<_> = upstream_models
            .iter()
            .map(|(i, m)| self.gw.priced_as(&head.model, *i, m))
            .collect();
        let cost = crate::spend::admission::Cost {
            models: &models,
            body_bytes,
            max_tokens: head.max_tokens,
            drivers: &head.drivers.unwrap_or_default(),
            family: crate::spend::Family::of_model(&head.model),
            attempts: upstream_models.len(),
        };
        let admitted = crate::spend::admission::reserve(self.gw, who, self.request_id, &cost).await;
        match admitted {
            Admitted::Unchecked => Ok(None),
            Admitted::Held(h) => Ok(Some(h)),
            Admitted::Refused { event, error } => Err(refuse(
                self.gw,
                self.request_id,
                Layer::Spend,
                Some(&head.model),
                event,
                error,
            )),
        }
    }
}
