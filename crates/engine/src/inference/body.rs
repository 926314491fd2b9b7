//! The request body, read once: validated as a JSON object, with the few fields the gateway
//! needs (`model`, `stream`, `max_tokens`) taken out without re-serialising the rest.
//!
//! Top-level values are kept as raw JSON slices, so rewriting `model` for an upstream that
//! names it differently copies the other fields byte for byte, in their order.

use std::borrow::Cow;
use std::collections::HashSet;

use bytes::Bytes;
use serde_json::value::RawValue;

use crate::error::ApiError;
use crate::spend::CostDrivers;

/// What the gateway reads from a Messages request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub model: String,
    pub stream: bool,
    pub max_tokens: Option<u64>,
    /// What can make the request cost more than its bytes (for the spend worst case);
    /// read only when asked for, so a gateway without caps does not scan every body.
    pub drivers: Option<CostDrivers>,
    /// Hashes of the raw `system` and `tools` (0 when absent): what a conversation's
    /// prompt cache depends on, compared turn to turn.
    pub system: u64,
    pub tools: u64,
    /// Hash of the first message (0 when none): with `system`, what identifies a
    /// conversation whose caller names no session.
    pub first_turn: u64,
}

/// The top-level fields in order, duplicates refused: the gateway's policy and an upstream
/// must never read different values of the same key (`model` twice, say). A body has a
/// handful of top-level keys, so they are kept in a list; past [`INDEXED`] keys duplicates
/// are found through a set, so a hostile body cannot make the check quadratic.
struct TopLevel<'a> {
    fields: Vec<(Cow<'a, str>, &'a RawValue)>,
}

/// Keys checked for duplicates by a scan of the list; more go through a set.
const INDEXED: usize = 16;

impl<'a> TopLevel<'a> {
    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl<'de> serde::Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                let mut fields: Vec<(Cow<'de, str>, &'de RawValue)> = Vec::with_capacity(8);
                let mut seen: Option<HashSet<Cow<'de, str>>> = None;
                while let Some((k, v)) = m.next_entry::<Cow<'de, str>, &'de RawValue>()? {
                    let duplicate = match seen.as_mut() {
                        Some(set) => !set.insert(k.clone()),
                        None => fields.iter().any(|(seen, _)| *seen == k),
                    };
                    if duplicate {
                        return Err(serde::de::Error::custom(format!("duplicate key `{k}`")));
                    }
                    fields.push((k, v));
                    if seen.is_none() && fields.len() > INDEXED {
                        seen = Some(fields.iter().map(|(k, _)| k.clone()).collect());
                    }
                }
                Ok(TopLevel { fields })
            }
        }
        d.deserialize_map(Visit)
    }
}

fn top_level(bytes: &[u8]) -> Result<TopLevel<'_>, ApiError> {
    serde_json::from_slice::<TopLevel<'_>>(bytes).map_err(|e| {
        let text = e.to_string();
        if text.starts_with("duplicate key") {
            ApiError::InvalidRequest(format!("request body has a {text}"))
        } else if e.is_data() {
            ApiError::InvalidRequest("request body must be a JSON object".into())
        } else {
            ApiError::InvalidRequest(format!("request body is not valid JSON: {e}"))
        }
    })
}

/// The head; `costs` also reads the [`CostDrivers`].
pub fn parse_head(bytes: &[u8], costs: bool) -> Result<Head, ApiError> {
    let top = top_level(bytes)?;
    let model = match top.get("model") {
        None => return Err(ApiError::InvalidRequest("model: field required".into())),
        Some(raw) => serde_json::from_str::<String>(raw.get())
            .map_err(|_| ApiError::InvalidRequest("model: must be a string".into()))?,
    };
    if model.trim().is_empty() {
        return Err(ApiError::InvalidRequest("model: must not be empty".into()));
    }
    let stream = match top.get("stream") {
        None => false,
        Some(raw) => serde_json::from_str::<Option<bool>>(raw.get())
            .map_err(|_| ApiError::InvalidRequest("stream: must be a boolean".into()))?
            .unwrap_or(false),
    };
    let max_tokens = match top.get("max_tokens") {
        None => None,
        Some(raw) => Some(serde_json::from_str::<u64>(raw.get()).map_err(|_| {
            ApiError::InvalidRequest("max_tokens: must be a non-negative integer".into())
        })?),
    };
    Ok(Head {
        model,
        stream,
        max_tokens,
        drivers: costs.then(|| cost_drivers(&top)),
        system: crate::conversation::fingerprint(top.get("system").map(RawValue::get)),
        tools: crate::conversation::fingerprint(top.get("tools").map(RawValue::get)),
        first_turn: top
            .get("messages")
            .and_then(|raw| first_element(raw.get()))
            .map_or(0, |m| crate::conversation::fingerprint(Some(m))),
    })
}

/// The first element of a JSON array already known to be valid: its bytes up to the
/// comma or bracket that ends it at depth 0, strings and escapes skipped.
fn first_element(array: &str) -> Option<&str> {
    let b = array.as_bytes();
    let open = b.iter().position(|c| !c.is_ascii_whitespace())?;
    if b[open] != b'[' {
        return None;
    }
    let start = open
        + 1
        + b[open + 1..]
            .iter()
            .position(|c| !c.is_ascii_whitespace())?;
    if b[start] == b']' {
        return None;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, &c) in b.iter().enumerate().skip(start) {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth > 0 => depth -= 1,
            b',' | b']' if depth == 0 => return Some(array[start..i].trim_end()),
            _ => {}
        }
    }
    None
}

/// Server tools (run and billed on the upstream), by the prefix of their `type`. Typed
/// tools the client runs are listed in [`CLIENT_TOOLS`]; any other typed tool counts as a
/// server tool, so a new one is never under-reserved.
const WEB_SEARCH: &str = "web_search";
const CLIENT_TOOLS: [&str; 5] = ["custom", "bash_", "text_editor_", "computer_", "memory_"];

/// Reads the tools, MCP servers and content sources that can raise a request's cost.
fn cost_drivers(top: &TopLevel<'_>) -> CostDrivers {
    #[derive(serde::Deserialize)]
    struct Tool {
        #[serde(rename = "type")]
        kind: Option<String>,
        max_uses: Option<u64>,
    }
    let mut d = CostDrivers::default();
    let tools = top
        .get("tools")
        .and_then(|raw| serde_json::from_str::<Vec<Tool>>(raw.get()).ok())
        .unwrap_or_default();
    for t in tools {
        let Some(kind) = t.kind.as_deref() else {
            continue;
        };
        if CLIENT_TOOLS.iter().any(|c| kind.starts_with(c)) {
            continue;
        }
        let uses = t
            .max_uses
            .unwrap_or(crate::spend::worst_case::DEFAULT_TOOL_USES);
        d.server_tool_uses = d.server_tool_uses.saturating_add(uses);
        if kind.starts_with(WEB_SEARCH) {
            d.web_searches = d.web_searches.saturating_add(uses);
        }
    }
    d.fetched_input = top.contains_key("mcp_servers")
        || ["messages", "system"]
            .iter()
            .filter_map(|k| top.get(k))
            .any(|raw| fetches(raw.get()));
    d
}

/// Whether content blocks take a source the upstream fetches (`url` or `file`), or name a
/// `file_id`. A `source` or `file_id` key can only be spelled literally or with `\u`
/// escapes, so content with neither is passed over without parsing it.
fn fetches(json: &str) -> bool {
    let b = json.as_bytes();
    let finder = |n: &str| memchr::memmem::find(b, n.as_bytes()).is_some();
    if !finder("\"source\"") && !finder("\"file_id\"") && !finder("\\u") {
        return false;
    }
    // Content too deep to read is assumed to fetch: never under-reserve.
    serde_json::from_str::<serde_json::Value>(json).map_or(true, |v| fetching_source(&v))
}

fn fetching_source(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Array(items) => items.iter().any(fetching_source),
        serde_json::Value::Object(o) => {
            let by_source = o
                .get("source")
                .and_then(|s| s.get("type"))
                .and_then(|t| t.as_str())
                .is_some_and(|t| matches!(t, "url" | "file"));
            by_source || o.contains_key("file_id") || o.values().any(fetching_source)
        }
        _ => false,
    }
}

/// What routing rules look at in a request body (read only when rules are configured).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Traits {
    /// `thinking.type` is `enabled` or `adaptive`.
    pub thinking: bool,
    /// Each tool's `type`, or its `name` when untyped (a client tool).
    pub tools: Vec<String>,
    /// An `image` block in the messages (also inside a tool result).
    pub images: bool,
    /// Body bytes / 4: a rough, cheap estimate of the input tokens.
    pub est_input_tokens: u64,
}

/// The [`Traits`] of a body that [`parse_head`] accepted.
pub fn traits(bytes: &[u8]) -> Result<Traits, ApiError> {
    #[derive(serde::Deserialize)]
    struct Thinking<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<Cow<'a, str>>,
    }
    #[derive(serde::Deserialize)]
    struct Tool {
        #[serde(rename = "type")]
        kind: Option<String>,
        name: Option<String>,
    }
    let top = top_level(bytes)?;
    let thinking = top
        .get("thinking")
        .and_then(|raw| serde_json::from_str::<Thinking<'_>>(raw.get()).ok())
        .and_then(|t| t.kind)
        .is_some_and(|k| matches!(k.as_ref(), "enabled" | "adaptive"));
    let tools = top
        .get("tools")
        .and_then(|raw| serde_json::from_str::<Vec<Tool>>(raw.get()).ok())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|t| match t.kind {
            Some(k) if k != "custom" => Some(k),
            _ => t.name,
        })
        .collect();
    let images = top.get("messages").is_some_and(|raw| has_image(raw.get()));
    Ok(Traits {
        thinking,
        tools,
        images,
        est_input_tokens: (bytes.len() / 4) as u64,
    })
}

/// Whether the body's messages hold an `image` block (also inside a tool result).
pub fn has_images(bytes: &[u8]) -> bool {
    top_level(bytes)
        .ok()
        .and_then(|top| top.get("messages"))
        .is_some_and(|raw| has_image(raw.get()))
}

/// Tokens an image counts as in [`input_estimate`] (a large image's cost).
const IMAGE_TOKENS: u64 = 1600;

/// A closer estimate of the input tokens than bytes / 4: base64 image and document data
/// count as [`IMAGE_TOKENS`] each instead of their length. Parses the body: for the rare
/// request near a context window.
pub fn input_estimate(bytes: &[u8]) -> u64 {
    fn walk(v: &serde_json::Value, depth: usize, data: &mut (u64, u64)) {
        if depth > 16 {
            return;
        }
        match v {
            serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, depth + 1, data)),
            serde_json::Value::Object(o) => {
                let base64 = o.get("type").and_then(|t| t.as_str()) == Some("base64");
                for (k, v) in o {
                    match v.as_str() {
                        Some(s) if base64 && k == "data" => {
                            data.0 += s.len() as u64;
                            data.1 += 1;
                        }
                        _ => walk(v, depth + 1, data),
                    }
                }
            }
            _ => {}
        }
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return (bytes.len() / 4) as u64;
    };
    let mut data = (0u64, 0u64);
    walk(&v, 0, &mut data);
    let text = (bytes.len() as u64).saturating_sub(data.0);
    text / 4 + data.1 * IMAGE_TOKENS
}

/// Whether messages hold an `image` block. Without the word `image` anywhere (it can only
/// be spelled literally or with `\u` escapes) nothing is parsed.
fn has_image(json: &str) -> bool {
    let b = json.as_bytes();
    if memchr::memmem::find(b, b"image").is_none() && memchr::memmem::find(b, b"\\u").is_none() {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(json).is_ok_and(|v| image_block(&v, 0))
}

fn image_block(v: &serde_json::Value, depth: usize) -> bool {
    if depth > 8 {
        return false;
    }
    match v {
        serde_json::Value::Array(items) => items.iter().any(|i| image_block(i, depth + 1)),
        serde_json::Value::Object(o) => {
            o.get("type").and_then(|t| t.as_str()) == Some("image")
                || o.get("content").is_some_and(|c| image_block(c, depth + 1))
        }
        _ => false,
    }
}

/// The same body with `model` replaced, everything else byte for byte.
pub fn with_model(bytes: &[u8], model: &str) -> Result<Bytes, ApiError> {
    let model_json = serde_json::to_string(model).map_err(|_| ApiError::Internal)?;
    crate::upstream::body::edit(bytes, &[], &[("model", model_json)])
        .map_err(|_| ApiError::InvalidRequest("request body must be a JSON object".into()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn drivers(body: &str) -> CostDrivers {
        parse_head(body.as_bytes(), true).unwrap().drivers.unwrap()
    }

    #[test]
    fn traits_for_rules() {
        let body = br#"{"model":"m","thinking":{"type":"enabled","budget_tokens":2000},
            "tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"Bash","input_schema":{}}],
            "messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t",
              "content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}]}"#;
        let t = traits(body).unwrap();
        assert!(t.thinking && t.images);
        assert_eq!(t.tools, ["web_search_20250305", "Bash"]);
        assert_eq!(t.est_input_tokens, (body.len() / 4) as u64);
        let plain = traits(br#"{"model":"m","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"an image of"}]}"#).unwrap();
        assert!(!plain.thinking && !plain.images && plain.tools.is_empty());
    }

    #[test]
    fn cost_drivers_are_read_only_when_asked_for() {
        let body =
            br#"{"model":"m","mcp_servers":[{"type":"url","url":"https://mcp","name":"x"}]}"#;
        assert_eq!(parse_head(body, false).unwrap().drivers, None);
        assert!(
            parse_head(body, true)
                .unwrap()
                .drivers
                .unwrap()
                .fetched_input
        );
    }

    #[test]
    fn cost_drivers_find_fetched_content_mcp_and_server_tools() {
        let plain = r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a \"source\" in text"}]}],
            "tools":[{"name":"t","input_schema":{}},{"type":"bash_20250124","name":"bash"}]}"#;
        assert_eq!(drivers(plain), CostDrivers::default());
        let by_url = r#"{"model":"m","messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}"#;
        assert!(drivers(by_url).fetched_input);
        let escaped = r#"{"model":"m","messages":[{"role":"user","content":[{"type":"image","\u0073ource":{"type":"url","url":"https://x/a.png"}}]}]}"#;
        assert!(
            drivers(escaped).fetched_input,
            "an escaped key is still read"
        );
        let file = r#"{"model":"m","system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"f_1"}}]}]}"#;
        assert!(drivers(file).fetched_input);
        let mcp = r#"{"model":"m","messages":[],"mcp_servers":[{"type":"url","url":"https://mcp","name":"x"}]}"#;
        assert!(drivers(mcp).fetched_input);
        let search = r#"{"model":"m","messages":[],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3},{"type":"web_fetch_20250910","name":"web_fetch"}]}"#;
        let d = drivers(search);
        assert_eq!((d.server_tool_uses, d.web_searches), (13, 3));
        let unknown = r#"{"model":"m","messages":[],"tools":[{"type":"brand_new_server_tool_20270101","name":"n"}]}"#;
        assert_eq!(
            drivers(unknown).server_tool_uses,
            10,
            "unknown typed tools count"
        );
    }

    #[test]
    fn duplicate_top_level_keys_are_refused() {
        let e = parse_head(
            br#"{"model":"claude-sonnet-4-6","model":"claude-opus-4-6"}"#,
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("duplicate key `model`"), "{e}");
        // Nested objects may repeat keys of the top level.
        assert!(parse_head(br#"{"model":"m","metadata":{"model":"x"}}"#, false).is_ok());
        // Past the keys checked by a scan, the set finds them (early and late keys alike).
        let many: String = (0..40).map(|i| format!(",\"k{i}\":{i}")).collect();
        for dup in ["model", "k3", "k30"] {
            let body = format!("{{\"model\":\"m\"{many},\"{dup}\":1}}");
            let e = parse_head(body.as_bytes(), false).unwrap_err();
            assert!(
                e.to_string().contains(&format!("duplicate key `{dup}`")),
                "{e}"
            );
        }
        let body = format!("{{\"model\":\"m\"{many}}}");
        assert!(parse_head(body.as_bytes(), false).is_ok());
    }

    #[test]
    fn head_fields() {
        let h = parse_head(
            br#"{"model":"claude-sonnet-4-6","max_tokens":10,"stream":true,"messages":[]}"#,
            false,
        )
        .unwrap();
        assert_eq!(
            h,
            Head {
                model: "claude-sonnet-4-6".into(),
                stream: true,
                max_tokens: Some(10),
                drivers: None,
                system: 0,
                tools: 0,
                first_turn: 0,
            }
        );
        let h = parse_head(br#"{"model":"m","stream":null}"#, false).unwrap();
        assert!(!h.stream);
    }

    #[test]
    fn fingerprints_follow_system_tools_and_the_first_turn() {
        let a = br#"{"model":"m","system":"s","tools":[{"name":"t"}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"}]}"#;
        let b = br#"{"model":"m","system":"s2","tools":[{"name":"t"}],"messages":[{"role":"user","content":"hi"}]}"#;
        let (ha, hb) = (parse_head(a, false).unwrap(), parse_head(b, false).unwrap());
        assert_ne!(ha.system, hb.system);
        assert_eq!(ha.tools, hb.tools);
        assert_ne!(ha.tools, 0);
        assert_eq!(ha.first_turn, hb.first_turn);
        assert_ne!(ha.first_turn, 0);
        let empty = parse_head(br#"{"model":"m","messages":[]}"#, false).unwrap();
        assert_eq!(empty.first_turn, 0);
        assert_eq!(
            first_element(r#" [ {"a":"x,]\"}"}, 1]"#),
            Some(r#"{"a":"x,]\"}"}"#)
        );
        assert_eq!(first_element(r#"["s"]"#), Some(r#""s""#));
        assert_eq!(first_element("[ ]"), None);
        assert_eq!(first_element("{}"), None);
    }

    #[test]
    fn bad_bodies_are_400_with_a_reason() {
        for (body, needle) in [
            (&b"{"[..], "not valid JSON"),
            (b"[1]", "JSON object"),
            (b"{}", "model: field required"),
            (br#"{"model":5}"#, "model: must be a string"),
            (br#"{"model":"m","stream":"yes"}"#, "stream"),
            (br#"{"model":"m","max_tokens":-1}"#, "max_tokens"),
            (b"", "not valid JSON"),
            (br#"{"model":"m"} trailing"#, "not valid JSON"),
        ] {
            let e = parse_head(body, false).unwrap_err();
            assert_eq!(e.outcome().0.as_u16(), 400);
            assert!(e.to_string().contains(needle), "{e}");
        }
    }

    #[test]
    fn model_rewrite_keeps_everything_else_verbatim() {
        let body = br#"{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":"hi \u00e9"}],"z":1.50,"a":{"b":[1,2]}}"#;
        let out = with_model(body, "corp/sonnet").unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"model":"corp/sonnet","messages":[{"role":"user","content":"hi \u00e9"}],"z":1.50,"a":{"b":[1,2]}}"#
        );
    }
}
