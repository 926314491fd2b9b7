//! OpenAI Chat Completions request → Anthropic Messages request: the top-level fields
//! (limits, sampling, stop sequences, tools, reasoning). The conversation itself is
//! [`super::messages`]. Anything without a faithful Anthropic equivalent is refused with a
//! 400 naming the field, never dropped silently, except the few listed in [`IGNORED`].

use serde_json::{Map, Value, json};

use super::bad;
use crate::error::ApiError;

/// `max_tokens` when the client names no limit: the model's default output limit from the
/// built-in table, at most this many (a client that wants more asks for it).
pub const DEFAULT_MAX_TOKENS_CAP: u64 = 16_384;
/// `max_tokens` when the client names no limit and the model is not in the built-in table.
pub const DEFAULT_MAX_TOKENS_UNKNOWN: u64 = 4_096;

/// Fields accepted and ignored: they change nothing an Anthropic model could honour
/// (`seed`: no deterministic sampling; `service_tier`, `store`, `metadata`: OpenAI
/// account features).
pub const IGNORED: &[&str] = &["seed", "service_tier", "store", "metadata"];

/// Every field the front door reads.
const READ: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "temperature",
    "top_p",
    "user",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning_effort",
    // Accepted only at their neutral values (see `neutral`).
    "n",
    "logprobs",
    "top_logprobs",
    "response_format",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
];

/// A translated request: the Anthropic body and what the answer's translation needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    pub body: Value,
    pub model: String,
    pub stream: bool,
    /// `stream_options.include_usage`: a usage chunk before `[DONE]`.
    pub include_usage: bool,
}

/// Translates an OpenAI Chat Completions body (already read, bounded) into a Messages body.
pub fn translate(bytes: &[u8]) -> Result<Translated, ApiError> {
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| bad(format!("request body is not valid JSON: {e}")))?;
    let Value::Object(o) = v else {
        return Err(bad("request body must be a JSON object"));
    };
    if let Some(k) = o
        .keys()
        .find(|k| !READ.contains(&k.as_str()) && !IGNORED.contains(&k.as_str()))
    {
        return Err(bad(format!(
            "{k}: unrecognized request argument (not supported by Gatehouse's OpenAI-compatible endpoint)"
        )));
    }
    neutral(&o)?;
    let model = match o.get("model") {
        Some(Value::String(m)) if !m.trim().is_empty() => m.clone(),
        Some(Value::String(_)) => return Err(bad("model: must not be empty")),
        Some(_) => return Err(bad("model: must be a string")),
        None => return Err(bad("model: field required")),
    };
    let stream = optional_bool(&o, "stream")?.unwrap_or(false);
    let include_usage = match o.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(so)) => optional_bool(so, "include_usage")?.unwrap_or(false),
        Some(_) => return Err(bad("stream_options: must be an object")),
    };
    let (system, messages) = super::messages::translate(o.get("messages"))?;
    let thinking = reasoning_budget(&o)?;

    let mut out = Map::new();
    out.insert("model".into(), Value::String(model.clone()));
    out.insert(
        "max_tokens".into(),
        max_tokens(&o, &model, thinking)?.into(),
    );
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), Value::Array(messages));
    if let Some(stop) = stop_sequences(o.get("stop"))? {
        out.insert("stop_sequences".into(), stop);
    }
    if let Some(t) = unit_interval(&o, "temperature", "0 to 1 (Anthropic's range)")? {
        out.insert("temperature".into(), t);
    }
    if let Some(p) = unit_interval(&o, "top_p", "0 to 1")? {
        out.insert("top_p".into(), p);
    }
    match o.get("user") {
        None | Some(Value::Null) => {}
        Some(Value::String(u)) => {
            out.insert("metadata".into(), json!({ "user_id": u }));
        }
        Some(_) => return Err(bad("user: must be a string")),
    }
    tools(&o, &mut out)?;
    if let Some(budget) = thinking {
        out.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    if stream {
        out.insert("stream".into(), Value::Bool(true));
    }
    Ok(Translated {
        body: Value::Object(out),
        model,
        stream,
        include_usage,
    })
}

fn optional_bool(o: &Map<String, Value>, key: &str) -> Result<Option<bool>, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(bad(format!("{key}: must be a boolean"))),
    }
}

/// Fields accepted only at the value that changes nothing (`n: 1`, `logprobs: false`, ...).
fn neutral(o: &Map<String, Value>) -> Result<(), ApiError> {
    let is = |k: &str, ok: &dyn Fn(&Value) -> bool| o.get(k).is_none_or(|v| v.is_null() || ok(v));
    let refuse = |k: &str, why: &str| Err(bad(format!("{k}: {why}")));
    if !is("n", &|v| v.as_u64() == Some(1)) {
        return refuse("n", "only 1 choice is supported");
    }
    let no_logprobs = "log probabilities are not available from Anthropic models";
    if !is("logprobs", &|v| v == &Value::Bool(false)) {
        return refuse("logprobs", no_logprobs);
    }
    if !is("top_logprobs", &|v| v.as_u64() == Some(0)) {
        return refuse("top_logprobs", no_logprobs);
    }
    if !is("response_format", &|v| v["type"] == "text") {
        return refuse(
            "response_format",
            "only {\"type\": \"text\"} is supported; describe the JSON you want in the prompt or use a tool",
        );
    }
    for k in ["presence_penalty", "frequency_penalty"] {
        if !is(k, &|v| v.as_f64() == Some(0.0)) {
            return refuse(
                k,
                "penalties are not supported by Anthropic models (only 0)",
            );
        }
    }
    if !is("logit_bias", &|v| v.as_object().is_some_and(Map::is_empty)) {
        return refuse("logit_bias", "not supported by Anthropic models");
    }
    Ok(())
}

/// `reasoning_effort` → an extended-thinking budget (`none`/`minimal`: no thinking).
fn reasoning_budget(o: &Map<String, Value>) -> Result<Option<u64>, ApiError> {
    match o.get("reasoning_effort") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(e)) => match e.as_str() {
            "none" | "minimal" => Ok(None),
            "low" => Ok(Some(1_024)),
            "medium" => Ok(Some(4_096)),
            "high" => Ok(Some(16_384)),
            other => Err(bad(format!(
                "reasoning_effort: `{other}` is not one of none, minimal, low, medium, high"
            ))),
        },
        Some(_) => Err(bad("reasoning_effort: must be a string")),
    }
}

/// `max_completion_tokens` (else `max_tokens`) covers reasoning and answer, as in OpenAI's
/// API; absent, the model's default (capped) plus the reasoning budget.
fn max_tokens(o: &Map<String, Value>, model: &str, thinking: Option<u64>) -> Result<u64, ApiError> {
    let asked = ["max_completion_tokens", "max_tokens"]
        .into_iter()
        .find_map(|k| o.get(k).filter(|v| !v.is_null()).map(|v| (k, v)));
    let Some((key, v)) = asked else {
        let known = crate::models::builtin(model);
        let default = known.map_or(DEFAULT_MAX_TOKENS_UNKNOWN, |b| {
            u64::from(b.max_output.0).min(DEFAULT_MAX_TOKENS_CAP)
        });
        let total = default.saturating_add(thinking.unwrap_or(0));
        // With reasoning, never past the model's largest output.
        let total = known.map_or(total, |b| total.min(u64::from(b.max_output.1)));
        return match thinking {
            Some(budget) if total <= budget => Err(bad(format!(
                "reasoning_effort: its {budget}-token reasoning budget does not fit in what `{model}` can output"
            ))),
            _ => Ok(total),
        };
    };
    let n = v
        .as_u64()
        .filter(|n| *n > 0)
        .ok_or_else(|| bad(format!("{key}: must be a positive integer")))?;
    match thinking {
        Some(budget) if n <= budget => Err(bad(format!(
            "{key}: must be more than the reasoning budget of {budget} tokens that reasoning_effort asks for"
        ))),
        _ => Ok(n),
    }
}

fn stop_sequences(stop: Option<&Value>) -> Result<Option<Value>, ApiError> {
    match stop {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(json!([s]))),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
            Ok((!a.is_empty()).then(|| Value::Array(a.clone())))
        }
        Some(_) => Err(bad("stop: must be a string or a list of strings")),
    }
}

/// A number in 0..=1. OpenAI's `temperature` goes to 2; above 1 is refused rather than
/// clamped or rescaled, so a client never gets a different sampling than it asked for.
fn unit_interval(
    o: &Map<String, Value>,
    key: &str,
    range: &str,
) -> Result<Option<Value>, ApiError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if (0.0..=1.0).contains(&x) => Ok(Some(v.clone())),
            _ => Err(bad(format!(
                "{key}: must be a number from {range}; got {v}"
            ))),
        },
    }
}

/// `tools`, `tool_choice` and `parallel_tool_calls`.
fn tools(o: &Map<String, Value>, out: &mut Map<String, Value>) -> Result<(), ApiError> {
    let list = match o.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err(bad("tools: must be a list")),
    };
    let mut translated = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        if t["type"] != "function" {
            return Err(bad(format!(
                "tools[{i}].type: only `function` tools are supported"
            )));
        }
        let f = &t["function"];
        let Some(name) = f["name"].as_str() else {
            return Err(bad(format!("tools[{i}].function.name: field required")));
        };
        let mut tool = json!({"name": name});
        if let Some(d) = f["description"].as_str() {
            tool["description"] = d.into();
        }
        tool["input_schema"] = match &f["parameters"] {
            Value::Null => json!({"type": "object", "properties": {}}),
            Value::Object(p) => Value::Object(p.clone()),
            _ => {
                return Err(bad(format!(
                    "tools[{i}].function.parameters: must be an object"
                )));
            }
        };
        translated.push(tool);
    }
    if translated.is_empty() {
        return Ok(());
    }
    out.insert("tools".into(), Value::Array(translated));
    let mut choice = match o.get("tool_choice") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(match s.as_str() {
            "auto" => json!({"type": "auto"}),
            "none" => json!({"type": "none"}),
            "required" => json!({"type": "any"}),
            other => {
                return Err(bad(format!(
                    "tool_choice: `{other}` is not auto, none or required"
                )));
            }
        }),
        Some(c) if c["type"] == "function" => match c["function"]["name"].as_str() {
            Some(name) => Some(json!({"type": "tool", "name": name})),
            None => return Err(bad("tool_choice.function.name: field required")),
        },
        Some(_) => {
            return Err(bad(
                "tool_choice: must be auto, none, required or a function",
            ));
        }
    };
    if optional_bool(o, "parallel_tool_calls")? == Some(false) {
        let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
        if c["type"] != "none" {
            c["disable_parallel_tool_use"] = Value::Bool(true);
        }
    }
    if let Some(c) = choice {
        out.insert("tool_choice".into(), c);
    }
    Ok(())
}
