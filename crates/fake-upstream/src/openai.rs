//! The OpenAI-compatible face: `POST /v1/chat/completions` (JSON, or SSE chunks ending
//! in `data: [DONE]` with the usage chunk when `stream_options.include_usage`).
//!
//! It scripts one tool round trip. A request offering a `Bash` function whose messages
//! hold no `role: tool` message yet is answered with a call of `Bash`
//! (`{"command": "echo gatehouse-ok", ...}`, id `functions.Bash:<n>` as Kimi names them);
//! a request with `role: tool` messages is checked like OpenAI does (each must answer a
//! `tool_calls` id of an earlier assistant message, else 400) and answered with text that
//! quotes the last tool output. Anything else gets a plain text answer. A model id
//! containing `reason` also gets `reasoning_content` and, like DeepSeek's thinking mode,
//! refuses (400, in DeepSeek's words) an assistant message with `tool_calls` that has no
//! `reasoning_content` field (an empty one passes); one containing `nostream` answers JSON even when asked
//! to stream. With `tool_uses_every_turn` the config's `tool_uses` are called instead (after
//! the reply text), on every turn whose last message is not a tool result, and their results
//! are answered with the reply text. The config's text-only models,
//! context window and Mistral ids are checked first ([`crate::strict::openai_refusal`]).
//! Usage is fixed: 120 prompt tokens (20 of them cached) and 9 completion tokens.
//!
//! Faults apply as on the Anthropic face, with OpenAI's error body (`error.message`,
//! `error.type`, `error.code`): a `Status` fault's `error_type` becomes `code` (e.g.
//! `context_length_exceeded`), its `retry_after` the `retry-after` header; both stream
//! faults end a stream with an `error` chunk after that many deltas (a JSON answer is not
//! faulted by them); a header delay is ignored.

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use serde_json::{Value, json};

use crate::config::{FakeConfig, Fault};
use crate::server::{Shared, json_response};
use crate::sse::{Abort, FakeBody};

pub(crate) const PROMPT_TOKENS: u64 = 120;
pub(crate) const CACHED_TOKENS: u64 = 20;
pub(crate) const COMPLETION_TOKENS: u64 = 9;

/// The command the scripted tool call asks for, and what it prints.
pub const TOOL_COMMAND: &str = "echo gatehouse-ok";
pub const TOOL_OUTPUT: &str = "gatehouse-ok";
/// The plain text answer.
pub const TEXT_ANSWER: &str = "Hello from the fake OpenAI upstream.";

pub(crate) fn error(
    status: StatusCode,
    kind: &str,
    code: &str,
    message: &str,
) -> Response<FakeBody> {
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    json_response(status, Bytes::from(body.to_string()))
}

/// What the fake answers to one completion request.
enum Reply {
    Text(String),
    /// Function calls (id, name and JSON arguments each), after a text when there is one.
    ToolCalls(Vec<(String, String, String)>, Option<String>),
}

/// The id of the `k`th call of answer `n`: Kimi's `functions.<name>:<n>`, or Mistral's nine
/// alphanumerics.
fn call_id(config: &FakeConfig, name: &str, n: u64, k: usize) -> String {
    if config.mistral_tool_ids {
        crate::strict::mistral_id(n.wrapping_mul(16).wrapping_add(k as u64))
    } else if k == 0 {
        format!("functions.{name}:{n}")
    } else {
        format!("functions.{name}:{n}.{k}")
    }
}

/// The tool call ids of earlier assistant messages; `Err` names the first `role: tool`
/// message that answers none (OpenAI's 400).
fn check_tool_messages(messages: &[Value]) -> Result<Option<&str>, String> {
    let mut issued: Vec<&str> = Vec::new();
    let mut last_output = None;
    for (i, m) in messages.iter().enumerate() {
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            issued.extend(call["id"].as_str());
        }
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default();
            if !issued.contains(&id) {
                return Err(format!(
                    "Invalid parameter: messages[{i}] with role 'tool' must be a response to a preceeding message with 'tool_calls' (tool_call_id `{id}` unknown)."
                ));
            }
            last_output = m["content"].as_str();
        }
    }
    Ok(last_output)
}

fn reply(config: &FakeConfig, body: &Value, n: u64) -> Result<Reply, String> {
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        return Err("'messages' must be a non-empty array".into());
    };
    if body["model"].as_str().is_none_or(str::is_empty) {
        return Err("you must provide a model parameter".into());
    }
    // DeepSeek's thinking mode: the reasoning of a turn that called tools must come back.
    let reasoner = body["model"].as_str().is_some_and(|m| m.contains("reason"));
    if reasoner
        && let Some(i) = messages
            .iter()
            .position(|m| m["tool_calls"].is_array() && !m["reasoning_content"].is_string())
    {
        return Err(format!(
            "Missing `reasoning_content` field in the assistant message at message index {i}. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
        ));
    }
    // The turn's tools ran when a tool message follows the last assistant message (images
    // of a tool's result may come after it in a user message).
    let since = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .map_or(0, |i| i + 1);
    let last_is_tool = messages[since..].iter().any(|m| m["role"] == "tool");
    let output = check_tool_messages(messages)?;
    // A `searcher` model uses the server tools Gatehouse offers as functions.
    match crate::server_tools::turn(body) {
        Some(crate::server_tools::Turn::Call { name, arguments }) => {
            let id = call_id(config, &name, n, 0);
            return Ok(Reply::ToolCalls(vec![(id, name, arguments)], None));
        }
        Some(crate::server_tools::Turn::Answer(text)) => return Ok(Reply::Text(text)),
        None => {}
    }
    if config.tool_uses_every_turn && !last_is_tool && !config.tool_uses.is_empty() {
        let calls = config.tool_uses.iter().enumerate();
        return Ok(Reply::ToolCalls(
            calls
                .map(|(k, t)| {
                    (
                        call_id(config, &t.name, n, k),
                        t.name.clone(),
                        t.input.to_string(),
                    )
                })
                .collect(),
            Some(config.reply_text.clone()),
        ));
    }
    if let Some(output) = output {
        if config.tool_uses_every_turn {
            return Ok(Reply::Text(config.reply_text.clone()));
        }
        return Ok(Reply::Text(format!(
            "The command printed: {}",
            output.trim()
        )));
    }
    let offers_bash = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["function"]["name"] == "Bash");
    let tools_allowed = body["tool_choice"] != "none";
    if offers_bash && tools_allowed {
        let id = call_id(config, "Bash", n, 0);
        return Ok(Reply::ToolCalls(
            vec![(id, "Bash".to_owned(), arguments())],
            None,
        ));
    }
    Ok(Reply::Text(TEXT_ANSWER.to_owned()))
}

fn usage() -> Value {
    json!({
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
        "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS},
    })
}

fn arguments() -> String {
    json!({"command": TOOL_COMMAND, "description": "Print the gatehouse marker"}).to_string()
}

/// Serves `/v1/chat/completions` (request `index`; `raw`: the body as received).
pub(crate) fn serve(
    shared: &Shared,
    (body, raw): (&Value, &[u8]),
    index: usize,
    n: u64,
) -> Result<Response<FakeBody>, Abort> {
    if let Some(refused) = crate::strict::openai_refusal(shared, index, body, raw) {
        return Ok(refused);
    }
    let config = shared.rendered().config.clone();
    let mut fault_after = None;
    match shared.pop_fault() {
        None | Some(Fault::HangBeforeHeaders { .. }) => {}
        Some(Fault::ResetBeforeHeaders) => return Err(Abort),
        Some(Fault::MidStreamError { after_deltas } | Fault::ResetMidStream { after_deltas }) => {
            fault_after = Some(after_deltas)
        }
        Some(Fault::Status {
            status,
            retry_after,
            error_type,
            message,
        }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let code = error_type.unwrap_or_else(|| "error".to_owned());
            let message = message.unwrap_or_else(|| "Injected by the fake upstream".to_owned());
            let mut resp = error(status, "invalid_request_error", &code, &message);
            if let Some(secs) = retry_after {
                resp.headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from(secs));
            }
            return Ok(resp);
        }
    }
    let reply = match reply(&config, body, n) {
        Ok(r) => r,
        Err(m) => {
            crate::strict::note(shared, index, &m);
            return Ok(error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_value",
                &m,
            ));
        }
    };
    let model = body["model"].as_str().unwrap_or_default();
    let reasoning = model.contains("reason").then_some("Thinking about it.");
    let id = format!("chatcmpl-fake{n}");
    // Some servers ignore `stream`: a model id containing `nostream` answers JSON anyway.
    if body["stream"] == true && !model.contains("nostream") {
        let usage_chunk = body["stream_options"]["include_usage"] == true;
        return Ok(stream(
            &id,
            model,
            &reply,
            reasoning,
            usage_chunk,
            fault_after,
        ));
    }
    let mut message = json!({"role": "assistant", "content": null});
    if let Some(r) = reasoning {
        message["reasoning_content"] = json!(r);
    }
    let finish = match &reply {
        Reply::Text(t) => {
            message["content"] = json!(t);
            "stop"
        }
        Reply::ToolCalls(calls, text) => {
            if let Some(t) = text {
                message["content"] = json!(t);
            }
            let calls: Vec<Value> = calls
                .iter()
                .map(|(id, name, args)| {
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
                })
                .collect();
            message["tool_calls"] = json!(calls);
            "tool_calls"
        }
    };
    let completion = json!({
        "id": id, "object": "chat.completion", "created": 1_733_000_000, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
        "usage": usage(),
    });
    Ok(json_response(
        StatusCode::OK,
        Bytes::from(completion.to_string()),
    ))
}

/// The whole stream as one body (the fake does not pace it).
fn stream(
    id: &str,
    model: &str,
    reply: &Reply,
    reasoning: Option<&str>,
    usage_chunk: bool,
    fault_after: Option<u32>,
) -> Response<FakeBody> {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": 1_733_000_000, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
        })
    };
    let mut deltas = vec![json!({"role": "assistant", "content": ""})];
    if let Some(r) = reasoning {
        deltas.push(json!({"reasoning_content": r}));
    }
    let finish = match reply {
        Reply::Text(t) => {
            let mid = t
                .char_indices()
                .nth(t.chars().count() / 2)
                .map_or(0, |(i, _)| i);
            deltas.push(json!({"content": &t[..mid]}));
            deltas.push(json!({"content": &t[mid..]}));
            "stop"
        }
        Reply::ToolCalls(calls, text) => {
            if let Some(t) = text {
                deltas.push(json!({"content": t}));
            }
            for (index, (id, name, args)) in calls.iter().enumerate() {
                let mut cut = args.len() / 2;
                while !args.is_char_boundary(cut) {
                    cut -= 1;
                }
                let (a, b) = args.split_at(cut);
                deltas.push(
                    json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                );
                deltas
                    .push(json!({"tool_calls": [{"index": index, "function": {"arguments": a}}]}));
                deltas
                    .push(json!({"tool_calls": [{"index": index, "function": {"arguments": b}}]}));
            }
            "tool_calls"
        }
    };
    let mut out = String::new();
    let mut push = |v: &Value| out.push_str(&format!("data: {v}\n\n"));
    for (i, d) in deltas.into_iter().enumerate() {
        if fault_after.is_some_and(|n| i > n as usize) {
            let e =
                json!({"error": {"message": "Overloaded", "type": "server_error", "code": 503}});
            push(&e);
            return sse_response(out);
        }
        push(&chunk(d, Value::Null));
    }
    push(&chunk(json!({}), json!(finish)));
    if usage_chunk {
        let mut u = chunk(json!({}), Value::Null);
        u["choices"] = json!([]);
        u["usage"] = usage();
        push(&u);
    }
    out.push_str("data: [DONE]\n\n");
    sse_response(out)
}

fn sse_response(body: String) -> Response<FakeBody> {
    let mut resp = Response::new(FakeBody::full(Bytes::from(body)));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}
