//! Anthropic Messages request → OpenAI Chat Completions request.
//!
//! What has an equivalent is moved (system, messages with their text, image, document,
//! tool-use and tool-result blocks, tools, `tool_choice`, sampling settings, the output
//! limit, `metadata.user_id`, streaming with usage); what has none is dropped and named in
//! [`Translated::dropped`] so `route_reason` says what the upstream never saw.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::ids;
use crate::config::TokenField;

/// The OpenAI body and the names of what had no equivalent.
#[derive(Debug)]
pub struct Translated {
    pub body: Value,
    pub dropped: BTreeSet<String>,
}

/// Why a body could not be translated (it is not a Messages request).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(pub String);

/// Top-level fields translated below; anything else is dropped by name.
const KNOWN: &[&str] = &[
    "model",
    "system",
    "messages",
    "tools",
    "tool_choice",
    "max_tokens",
    "stop_sequences",
    "temperature",
    "top_p",
    "metadata",
    "stream",
];

/// Translates `body` for `model`; `field` carries the output limit.
pub fn translate(
    body: &Value,
    model: &str,
    field: TokenField,
    stream: bool,
) -> Result<Translated, RequestError> {
    let Some(obj) = body.as_object() else {
        return Err(RequestError(
            "the request body must be a JSON object".into(),
        ));
    };
    let mut t = Translator {
        reasoning_required: reasoning_required(obj, model),
        ..Translator::default()
    };
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    let mut messages = Vec::new();
    if let Some(system) = obj.get("system") {
        let text = t.text_of(system);
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    let Some(input) = obj.get("messages").and_then(Value::as_array) else {
        return Err(RequestError("`messages` must be an array".into()));
    };
    for m in input {
        t.message(m, &mut messages)?;
    }
    out.insert("messages".into(), Value::Array(messages));
    if let Some(v) = obj.get("max_tokens") {
        out.insert(field.as_str().into(), v.clone());
    }
    for (from, to) in [
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("stop_sequences", "stop"),
    ] {
        // `null` and `[]` mean "not set"; some servers refuse them.
        let set = |v: &&Value| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty());
        if let Some(v) = obj.get(from).filter(set) {
            out.insert(to.into(), v.clone());
        }
    }
    if let Some(user) = obj
        .get("metadata")
        .and_then(|m| m.get("user_id"))
        .filter(|u| u.as_str().is_some_and(|s| !s.is_empty()))
    {
        out.insert("user".into(), user.clone());
    }
    let has_tools = t.tools(obj.get("tools"), &mut out);
    if has_tools {
        t.tool_choice(obj.get("tool_choice"), &mut out);
    } else if obj.get("tool_choice").is_some_and(|c| !c.is_null()) {
        t.drop("tool_choice");
    }
    if stream {
        out.insert("stream".into(), json!(true));
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    for key in obj.keys().filter(|k| !KNOWN.contains(&k.as_str())) {
        t.drop(key);
    }
    Ok(Translated {
        body: Value::Object(out),
        dropped: t.dropped,
    })
}

#[derive(Default)]
struct Translator {
    dropped: BTreeSet<String>,
    /// Every assistant tool call carries `reasoning_content`, empty when its thinking is
    /// gone (DeepSeek's thinking mode refuses a tool turn without the field; after Claude
    /// Code compacts, the current turn's call comes back without its thinking).
    reasoning_required: bool,
}

/// Whether the upstream reasons and wants `reasoning_content` on tool turns: the request
/// asks for thinking, and the model is DeepSeek's or the conversation already carries
/// an OpenAI-compatible model's reasoning (unsigned thinking).
fn reasoning_required(obj: &Map<String, Value>, model: &str) -> bool {
    let thinking = obj
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|t| t != "disabled");
    let reasoned = || {
        obj.get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| m.get("content").and_then(Value::as_array))
            .flatten()
            .any(|b| b["type"] == "thinking" && b["signature"].as_str().is_none_or(str::is_empty))
    };
    thinking && (model.to_ascii_lowercase().starts_with("deepseek") || reasoned())
}

impl Translator {
    fn drop(&mut self, what: &str) {
        self.dropped.insert(what.to_owned());
    }

    /// Notes a block's `cache_control` (prompt caching has no Chat Completions field).
    fn cache(&mut self, block: &Value) {
        if block.get("cache_control").is_some() {
            self.drop("cache_control");
        }
    }

    /// The text of a string or of text blocks (joined by blank lines).
    fn text_of(&mut self, content: &Value) -> String {
        match content {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => {
                let mut parts = Vec::new();
                for b in blocks {
                    self.cache(b);
                    match b["type"].as_str() {
                        Some("text") => parts.push(b["text"].as_str().unwrap_or_default()),
                        Some(other) => self.drop(&format!("{other} block")),
                        None => self.drop("untyped block"),
                    }
                }
                parts.join("\n\n")
            }
            _ => String::new(),
        }
    }

    fn message(&mut self, m: &Value, out: &mut Vec<Value>) -> Result<(), RequestError> {
        match m["role"].as_str() {
            Some("system") => {
                let text = self.text_of(&m["content"]);
                out.push(json!({"role": "system", "content": text}));
            }
            Some("user") => self.user(&m["content"], out),
            Some("assistant") => self.assistant(&m["content"], out),
            _ => {
                return Err(RequestError(
                    "each message needs a role of user, assistant or system".into(),
                ));
            }
        }
        Ok(())
    }

    /// A user turn: its tool results become `role: tool` messages first (they must follow
    /// the assistant's `tool_calls`), the rest one user message.
    fn user(&mut self, content: &Value, out: &mut Vec<Value>) {
        let blocks = match content {
            Value::String(s) => {
                out.push(json!({"role": "user", "content": s}));
                return;
            }
            Value::Array(b) => b,
            _ => return,
        };
        let mut parts = Vec::new();
        // Images a tool returned: Chat Completions tool messages hold text only.
        let mut tool_images = Vec::new();
        for b in blocks {
            self.cache(b);
            if b["type"] == "tool_result" {
                let (text, images) = self.tool_result_content(&b["content"]);
                let text = if b["is_error"] == true {
                    format!("[tool error] {text}")
                } else {
                    text
                };
                let id = ids::to_openai(b["tool_use_id"].as_str().unwrap_or_default());
                out.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
                tool_images.extend(images);
            } else if let Some(part) = self.part(b) {
                parts.push(part);
            }
        }
        if !tool_images.is_empty() {
            self.drop("image in tool_result (sent in a user message)");
            let mut moved = vec![json!({"type": "text", "text": "Images returned by the tool:"})];
            moved.extend(tool_images);
            parts.splice(0..0, moved);
        }
        if parts.is_empty() {
            return;
        }
        out.push(json!({"role": "user", "content": collapse(parts)}));
    }

    /// A tool result's text (blocks joined) and its images as OpenAI parts.
    fn tool_result_content(&mut self, content: &Value) -> (String, Vec<Value>) {
        let Some(blocks) = content.as_array() else {
            return (content.as_str().unwrap_or_default().to_owned(), Vec::new());
        };
        let mut text = Vec::new();
        let mut images = Vec::new();
        for b in blocks {
            self.cache(b);
            match self.part(b) {
                Some(p) if p["type"] == "text" => {
                    text.push(p["text"].as_str().unwrap_or_default().to_owned());
                }
                Some(p) => images.push(p),
                None => {}
            }
        }
        (text.join("\n\n"), images)
    }

    /// One user content block as an OpenAI content part; `None` when it has no equivalent
    /// (named in `dropped`).
    fn part(&mut self, b: &Value) -> Option<Value> {
        match b["type"].as_str() {
            Some("text") => Some(json!({"type": "text", "text": b["text"]})),
            Some("image") => {
                let url = source_url(&b["source"]);
                if url.is_none() {
                    self.drop("image (unsupported source)");
                }
                url.map(|u| json!({"type": "image_url", "image_url": {"url": u}}))
            }
            Some("document") => self.document(b),
            Some("thinking" | "redacted_thinking") => {
                self.drop("thinking blocks");
                None
            }
            Some(other) => {
                self.drop(&format!("{other} block"));
                None
            }
            None => {
                self.drop("untyped block");
                None
            }
        }
    }

    /// Documents: plain text as a text part, a base64 PDF as a `file` part, content
    /// blocks as their text; URL and file-id sources have no equivalent.
    fn document(&mut self, b: &Value) -> Option<Value> {
        let source = &b["source"];
        let title = b["title"].as_str();
        let with_title = |text: &str| match title {
            Some(t) => format!("{t}\n\n{text}"),
            None => text.to_owned(),
        };
        match (source["type"].as_str(), source["media_type"].as_str()) {
            (Some("text"), _) => Some(json!({
                "type": "text",
                "text": with_title(source["data"].as_str().unwrap_or_default()),
            })),
            (Some("content"), _) => {
                let text = self.text_of(&source["content"]);
                Some(json!({"type": "text", "text": with_title(&text)}))
            }
            (Some("base64"), Some("application/pdf")) => Some(json!({
                "type": "file",
                "file": {
                    "filename": title.unwrap_or("document.pdf"),
                    "file_data": format!(
                        "data:application/pdf;base64,{}",
                        source["data"].as_str().unwrap_or_default()
                    ),
                },
            })),
            (kind, _) => {
                self.drop(&format!("document ({} source)", kind.unwrap_or("unknown")));
                None
            }
        }
    }

    /// An assistant turn: text joined, `tool_use` as `tool_calls`, unsigned thinking as
    /// `reasoning_content`, Anthropic's signed thinking dropped.
    fn assistant(&mut self, content: &Value, out: &mut Vec<Value>) {
        let blocks = match content {
            Value::String(s) => {
                out.push(json!({"role": "assistant", "content": s}));
                return;
            }
            Value::Array(b) => b,
            _ => return,
        };
        let mut text = Vec::new();
        let mut calls = Vec::new();
        let mut reasoning = Vec::new();
        for b in blocks {
            self.cache(b);
            match b["type"].as_str() {
                Some("text") => text.push(b["text"].as_str().unwrap_or_default().to_owned()),
                // Unsigned thinking came from an OpenAI-compatible model's reasoning (this
                // translation signs nothing): it goes back as `reasoning_content`, which
                // DeepSeek's thinking mode requires after tool calls.
                Some("thinking") if b["signature"].as_str().is_none_or(str::is_empty) => {
                    reasoning.push(b["thinking"].as_str().unwrap_or_default().to_owned());
                }
                Some("tool_use") => calls.push(json!({
                    "id": ids::to_openai(b["id"].as_str().unwrap_or_default()),
                    "type": "function",
                    "function": {
                        "name": b["name"],
                        "arguments": b["input"].to_string(),
                    },
                })),
                Some("thinking" | "redacted_thinking") => self.drop("thinking blocks"),
                Some(other) => self.drop(&format!("{other} block")),
                None => self.drop("untyped block"),
            }
        }
        let mut msg = Map::new();
        msg.insert("role".into(), json!("assistant"));
        let text = text.join("\n\n");
        msg.insert(
            "content".into(),
            if text.is_empty() && !calls.is_empty() {
                Value::Null
            } else {
                json!(text)
            },
        );
        let called = !calls.is_empty();
        if called {
            msg.insert("tool_calls".into(), Value::Array(calls));
        }
        if !reasoning.is_empty() {
            msg.insert("reasoning_content".into(), json!(reasoning.join("\n\n")));
        } else if self.reasoning_required && called {
            msg.insert("reasoning_content".into(), json!(""));
        }
        out.push(Value::Object(msg));
    }

    /// Client tools as functions; server tools (typed, e.g. `web_search_20250305`) are
    /// dropped by type. Whether any function is left.
    fn tools(&mut self, tools: Option<&Value>, out: &mut Map<String, Value>) -> bool {
        let Some(list) = tools.and_then(Value::as_array) else {
            return false;
        };
        let mut functions = Vec::new();
        for tool in list {
            self.cache(tool);
            match tool["type"].as_str() {
                None | Some("custom") => {
                    let mut f = Map::new();
                    f.insert("name".into(), tool["name"].clone());
                    if let Some(d) = tool.get("description") {
                        f.insert("description".into(), d.clone());
                    }
                    let params = match &tool["input_schema"] {
                        Value::Null => json!({"type": "object", "properties": {}}),
                        schema => schema.clone(),
                    };
                    f.insert("parameters".into(), params);
                    functions.push(json!({"type": "function", "function": f}));
                }
                Some(kind) => self.drop(&format!("server tool {kind}")),
            }
        }
        let any = !functions.is_empty();
        if any {
            out.insert("tools".into(), Value::Array(functions));
        }
        any
    }

    fn tool_choice(&mut self, choice: Option<&Value>, out: &mut Map<String, Value>) {
        let Some(choice) = choice.filter(|c| !c.is_null()) else {
            return;
        };
        let mapped = match choice["type"].as_str() {
            Some("auto") => Some(json!("auto")),
            Some("any") => Some(json!("required")),
            Some("none") => Some(json!("none")),
            Some("tool") => Some(json!({"type": "function", "function": {"name": choice["name"]}})),
            _ => {
                self.drop("tool_choice");
                None
            }
        };
        if let Some(m) = mapped {
            out.insert("tool_choice".into(), m);
        }
        if choice["disable_parallel_tool_use"] == true {
            out.insert("parallel_tool_calls".into(), json!(false));
        }
    }
}

/// Text-only parts become one string (servers that take only strings understand it).
fn collapse(parts: Vec<Value>) -> Value {
    if parts.iter().all(|p| p["type"] == "text") {
        let texts: Vec<&str> = parts
            .iter()
            .map(|p| p["text"].as_str().unwrap_or_default())
            .collect();
        json!(texts.join("\n\n"))
    } else {
        Value::Array(parts)
    }
}

/// An image source as a URL: a `data:` URL for base64, the URL itself for `url`.
fn source_url(source: &Value) -> Option<String> {
    match source["type"].as_str()? {
        "base64" => Some(format!(
            "data:{};base64,{}",
            source["media_type"].as_str()?,
            source["data"].as_str()?
        )),
        "url" => source["url"].as_str().map(str::to_owned),
        _ => None,
    }
}
