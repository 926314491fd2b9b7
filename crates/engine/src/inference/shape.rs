//! Capability-aware shaping: what a request holds that a candidate upstream cannot take
//! (the capability table, [`crate::upstream::model_caps`]) sets that candidate aside
//! before routing, in three passes:
//!
//! 1. images, for models without vision: to `routing.fallback_models.images`, else a 400
//!    naming the model and the setting;
//! 2. an input estimated over the context window: to `routing.fallback_models.long_context`,
//!    else a 400 `prompt is too long: N tokens > M maximum`, the words that make Claude
//!    Code compact;
//! 3. Anthropic server tools (`web_search`, `web_fetch`) the upstream does not run: the
//!    gateway runs them itself when `server_tools` configures them, else a 400 naming the
//!    tool and the setting.
//!
//! Then each Claude-family leg loses the thinking blocks no Claude upstream signed (an
//! OpenAI-compatible model's reasoning, carried with an empty signature): sent on, they
//! are refused, so the next turn after a provider switch would fail. Last, tool-call ids
//! an upstream restricts (`tool_ids`, e.g. Mistral's nine characters) are fitted to it
//! ([`crate::upstream::tool_ids`]).

use bytes::Bytes;

use super::refusal::{Layer, refuse};
use super::{Call, body};
use crate::config::shaping::ServerTool;
use crate::error::ApiError;
use crate::upstream::model_caps::ModelCaps;
use crate::upstream::router::Leg;

/// The candidates after shaping, and what shaping did.
pub(super) struct Shaped {
    pub legs: Vec<Leg>,
    pub not_configured: Vec<String>,
    /// For `route_reason`: what was set aside or sent elsewhere.
    pub note: Option<String>,
}

/// Why a pass sets a leg aside.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    Vision,
    Window(u64),
}

impl Call<'_> {
    fn caps(&self, leg: &Leg) -> std::sync::Arc<ModelCaps> {
        self.gw.model_caps.get(leg.upstream, &leg.upstream_model)
    }

    fn upstream_name(&self, leg: &Leg) -> &str {
        &self.gw.upstreams.list[leg.upstream].name
    }

    /// The three passes, then the thinking each leg may not receive.
    pub(super) fn shape(
        &self,
        model: &str,
        bytes: &Bytes,
        legs: Vec<Leg>,
        not_configured: Vec<String>,
    ) -> Result<Shaped, ApiError> {
        let mut shaped = Shaped {
            legs,
            not_configured,
            note: None,
        };
        if shaped.legs.iter().any(|l| !self.caps(l).vision) && body::has_images(bytes) {
            self.pass(model, bytes, &mut shaped, Need::Vision)?;
        }
        let rough = bytes.len() as u64 / 4;
        let windows = shaped
            .legs
            .iter()
            .filter_map(|l| self.caps(l).context_window);
        if windows.into_iter().any(|w| rough > w) {
            let estimate = body::input_estimate(bytes);
            self.pass(model, bytes, &mut shaped, Need::Window(estimate))?;
        }
        self.server_tools(model, bytes, &mut shaped)?;
        self.drop_unsigned_thinking(&mut shaped)?;
        self.fit_tool_ids(&mut shaped)?;
        Ok(shaped)
    }

    /// Sets aside the legs that cannot meet `need`; with none left, the fallback model's
    /// legs (which must meet it), else a refusal.
    fn pass(
        &self,
        model: &str,
        bytes: &Bytes,
        shaped: &mut Shaped,
        need: Need,
    ) -> Result<(), ApiError> {
        let fits = |call: &Self, l: &Leg| {
            let caps = call.caps(l);
            match need {
                Need::Vision => caps.vision,
                Need::Window(tokens) => caps.context_window.is_none_or(|w| tokens <= w),
            }
        };
        let (kept, aside): (Vec<Leg>, Vec<Leg>) = std::mem::take(&mut shaped.legs)
            .into_iter()
            .partition(|l| fits(self, l));
        let why = match need {
            Need::Vision => "no vision".to_owned(),
            Need::Window(t) => format!("input ~{t} tokens over its context window"),
        };
        let aside_names: Vec<String> = aside
            .iter()
            .map(|l| format!("{}={why}", self.upstream_name(l)))
            .collect();
        if !kept.is_empty() {
            shaped.legs = kept;
            if !aside_names.is_empty() {
                note(shaped, format!("set aside {}", aside_names.join(", ")));
            }
            return Ok(());
        }
        let fallback = match need {
            Need::Vision => self.gw.config.routing.fallback_models.images.as_deref(),
            Need::Window(_) => self
                .gw
                .config
                .routing
                .fallback_models
                .long_context
                .as_deref(),
        };
        if let Some(to) = fallback.filter(|to| *to != model) {
            let (legs, not_configured) = self.legs(to, model, bytes)?;
            let legs: Vec<Leg> = legs.into_iter().filter(|l| fits(self, l)).collect();
            if !legs.is_empty() {
                shaped.legs = legs;
                shaped.not_configured = not_configured;
                let what = match need {
                    Need::Vision => "images",
                    Need::Window(_) => "long input",
                };
                note(
                    shaped,
                    format!("{what} sent to {to} ({})", aside_names.join(", ")),
                );
                return Ok(());
            }
        }
        let upstreams: Vec<&str> = aside.iter().map(|l| self.upstream_name(l)).collect();
        let message = match need {
            Need::Vision => format!(
                "model `{model}` cannot read images on {} (routing.capabilities: vision false); set routing.fallback_models.images to send requests with images to a model that can",
                upstreams.join(", ")
            ),
            Need::Window(tokens) => {
                let window = aside
                    .iter()
                    .filter_map(|l| self.caps(l).context_window)
                    .max()
                    .unwrap_or_default();
                format!("prompt is too long: {tokens} tokens > {window} maximum")
            }
        };
        Err(self.refuse_shape(model, "capability", message))
    }

    /// Legs whose upstream does not run a requested server tool are set aside; with none
    /// left the gateway runs the tools itself when `server_tools` is configured.
    fn server_tools(
        &self,
        model: &str,
        bytes: &Bytes,
        shaped: &mut Shaped,
    ) -> Result<(), ApiError> {
        let b = bytes.as_ref();
        let named = |n: &[u8]| memchr::memmem::find(b, n).is_some();
        if !named(b"web_search_") && !named(b"web_fetch_") {
            return Ok(());
        }
        let tools: Vec<ServerTool> = body::traits(bytes)?
            .tools
            .iter()
            .filter_map(|t| ServerTool::of_type(t))
            .collect();
        if tools.is_empty() {
            return Ok(());
        }
        let runs_all = |l: &Leg| {
            let caps = self.caps(l);
            tools.iter().all(|t| caps.runs(*t))
        };
        if shaped.legs.iter().any(runs_all) {
            let (kept, aside): (Vec<Leg>, Vec<Leg>) = std::mem::take(&mut shaped.legs)
                .into_iter()
                .partition(runs_all);
            if !aside.is_empty() {
                let names: Vec<&str> = aside.iter().map(|l| self.upstream_name(l)).collect();
                note(
                    shaped,
                    format!("set aside {} (server tools)", names.join(", ")),
                );
            }
            shaped.legs = kept;
            return Ok(());
        }
        let missing: Vec<ServerTool> = tools
            .iter()
            .copied()
            .filter(|t| !self.gateway_runs(*t))
            .collect();
        if let Some(tool) = missing.first() {
            let names: Vec<&str> = shaped.legs.iter().map(|l| self.upstream_name(l)).collect();
            let message = super::server_tools::not_configured(tool.as_str(), &names);
            return Err(self.refuse_shape(model, "server_tool_unavailable", message));
        }
        note(shaped, "server tools run by the gateway".to_owned());
        Ok(())
    }

    /// Claude-family legs lose the thinking blocks with an empty signature.
    fn drop_unsigned_thinking(&self, shaped: &mut Shaped) -> Result<(), ApiError> {
        let mut dropped = false;
        for leg in &mut shaped.legs {
            let up = &self.gw.upstreams.list[leg.upstream];
            if matches!(up.provider, crate::config::Provider::OpenAi(_)) {
                continue;
            }
            if let Some(body) = crate::upstream::thinking::without_unsigned(&leg.body)? {
                leg.body = body;
                dropped = true;
            }
        }
        if dropped {
            note(shaped, "unsigned thinking dropped".to_owned());
        }
        Ok(())
    }

    /// Whether the gateway itself runs `tool` (`server_tools`).
    fn gateway_runs(&self, tool: ServerTool) -> bool {
        self.gw.config.server_tools.runs(tool)
    }

    /// Tool-call ids an upstream would refuse are rewritten for it.
    fn fit_tool_ids(&self, shaped: &mut Shaped) -> Result<(), ApiError> {
        let mut fitted = Vec::new();
        for leg in &mut shaped.legs {
            let Some(rule) = self.caps(leg).tool_ids else {
                continue;
            };
            if let Some(body) = crate::upstream::tool_ids::rewrite(&leg.body, &rule)? {
                leg.body = body;
                fitted.push(self.gw.upstreams.list[leg.upstream].name.clone());
            }
        }
        if !fitted.is_empty() {
            note(shaped, format!("tool ids fitted for {}", fitted.join(", ")));
        }
        Ok(())
    }

    fn refuse_shape(&self, model: &str, reason: &'static str, message: String) -> ApiError {
        let event = self.denied(reason, "capability", Some(model));
        refuse(
            self.gw,
            self.request_id,
            Layer::Capability,
            Some(model),
            event.with("message", message.clone()),
            ApiError::InvalidRequest(message),
        )
    }
}

fn note(shaped: &mut Shaped, what: String) {
    shaped.note = Some(match shaped.note.take() {
        Some(n) => format!("{n}; {what}"),
        None => what,
    });
}
