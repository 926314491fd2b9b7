//! Pre-rendering of answer bytes. Everything that only depends on the
//! [`FakeConfig`] is rendered once per `set_config`; per request only the
//! message id and model are formatted in.
//!
//! Text splitting (`output_tokens` = N deltas): the reply text is cut into
//! "words" — segments starting at a whitespace run that follows non-whitespace
//! (`"Hello from the"` gives `"Hello"`, `" from"`, `" the"`).
//! * N <= words: the words are grouped into N contiguous, near-equal pieces.
//! * words < N <= characters: the text is cut into N near-equal runs of
//!   characters (sub-word "tokens").
//!
//! In both cases the deltas concatenate to exactly the reply text.
//! * N > characters: every character is its own delta and each extra delta
//!   carries one space-prefixed reply word, cycling through the words
//!   (`" Hello"`, `" from"`, ...), so the streamed text is the reply text
//!   followed by those words (an empty reply yields empty-text deltas).
//!
//! The non-streaming JSON answer always carries the reply text itself.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::config::{FakeConfig, ToolUse};

/// SSE `error` event sent by the `MidStreamError` fault.
pub(crate) const OVERLOADED_EVENT: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";

/// Body of `GET /v1/models`.
pub(crate) const MODELS_BODY: &str = r#"{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-5","last_id":"claude-sonnet-4-5"}"#;

/// Model echoed when neither the config nor the request names one.
const FALLBACK_MODEL: &str = "claude-sonnet-4-5";

/// Config plus all bytes derived from it.
pub(crate) struct Rendered {
    pub(crate) config: FakeConfig,
    /// Rest of the `message_start` event after the `"model":<model>` value.
    message_start_tail: String,
    /// `content_block_start` + `ping` events.
    pub(crate) head_rest: Bytes,
    /// One `content_block_delta` event each.
    pub(crate) deltas: Vec<Bytes>,
    /// `content_block_stop` + `message_delta` + `message_stop` events.
    pub(crate) tail: Bytes,
    /// `head_rest` + all deltas + `tail`: the whole stream after
    /// `message_start` when there is no pacing and no fault.
    pub(crate) unpaced_rest: Bytes,
    /// Usage object of `message_delta`.
    pub(crate) stream_usage: Value,
    /// Rest of the JSON answer after the `"model":<model>` value.
    json_tail: String,
    /// Usage object of the JSON answer.
    pub(crate) json_usage: Value,
    /// `{"input_tokens":I}`.
    pub(crate) count_tokens_body: Bytes,
    /// JSON-encoded `model_override`, if any.
    model_override_json: Option<String>,
    /// With scripted tool calls: the plain answer, for a request that returns their results.
    pub(crate) after_tool_result: Option<Arc<Rendered>>,
    /// With `strict`: the answer to a request that asks for thinking, which starts with a
    /// thinking block the fake signed.
    pub(crate) thinking: Option<Arc<Rendered>>,
}

/// The `tool_use` blocks' events after the text block (at `text_index`), each input
/// streamed as two `input_json_delta` fragments; and the blocks for the JSON answer.
fn tool_blocks(tools: &[ToolUse], text_index: usize) -> (String, String) {
    let mut events = String::new();
    let mut blocks = String::new();
    for (k, t) in tools.iter().enumerate() {
        let index = k + 1 + text_index;
        let (id, name) = (json_str(&t.id), json_str(&t.name));
        let input = t.input.to_string();
        events += &event(
            "content_block_start",
            &format!(
                "{{\"type\":\"content_block_start\",\"index\":{index},\"content_block\":{{\"type\":\"tool_use\",\"id\":{id},\"name\":{name},\"input\":{{}}}}}}"
            ),
        );
        let mut cut = input.len() / 2;
        while !input.is_char_boundary(cut) {
            cut -= 1;
        }
        for part in [&input[..cut], &input[cut..]] {
            events += &event(
                "content_block_delta",
                &format!(
                    "{{\"type\":\"content_block_delta\",\"index\":{index},\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":{}}}}}",
                    json_str(part)
                ),
            );
        }
        events += &event(
            "content_block_stop",
            &format!("{{\"type\":\"content_block_stop\",\"index\":{index}}}"),
        );
        blocks +=
            &format!(",{{\"type\":\"tool_use\",\"id\":{id},\"name\":{name},\"input\":{input}}}");
    }
    (events, blocks)
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

fn event(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// Splits the reply text into `pieces` delta texts (see the module docs).
pub(crate) fn split_reply(text: &str, pieces: u32) -> Vec<String> {
    let n = pieces as usize;
    let mut starts = vec![0usize];
    let mut prev_ws = true;
    for (i, c) in text.char_indices() {
        let ws = c.is_whitespace();
        if i > 0 && ws && !prev_ws {
            starts.push(i);
        }
        prev_ws = ws;
    }
    let segments: Vec<&str> = if text.is_empty() {
        Vec::new()
    } else {
        let mut ends = starts[1..].to_vec();
        ends.push(text.len());
        starts.iter().zip(ends).map(|(&s, e)| &text[s..e]).collect()
    };
    let w = segments.len();
    if n <= w {
        return (0..n)
            .map(|k| segments[k * w / n..(k + 1) * w / n].concat())
            .collect();
    }
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let chars = bounds.len() - 1;
    if n <= chars {
        return (0..n)
            .map(|k| text[bounds[k * chars / n]..bounds[(k + 1) * chars / n]].to_owned())
            .collect();
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out: Vec<String> = (0..chars)
        .map(|k| text[bounds[k]..bounds[k + 1]].to_owned())
        .collect();
    for j in 0..n - chars {
        out.push(match words.get(j % words.len().max(1)) {
            Some(word) => format!(" {word}"),
            None => String::new(),
        });
    }
    out
}

impl Rendered {
    pub(crate) fn new(config: FakeConfig) -> Rendered {
        Rendered::build(config, false)
    }

    /// The thinking block's events (index 0) and its JSON.
    fn thinking_block() -> (String, String) {
        let text = json_str(crate::strict::THINKING_TEXT);
        let signature = json_str(&crate::strict::sign(crate::strict::THINKING_TEXT));
        let events = event(
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
        ) + &event(
            "content_block_delta",
            &format!(
                "{{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"thinking_delta\",\"thinking\":{text}}}}}"
            ),
        ) + &event(
            "content_block_delta",
            &format!(
                "{{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"signature_delta\",\"signature\":{signature}}}}}"
            ),
        ) + &event(
            "content_block_stop",
            r#"{"type":"content_block_stop","index":0}"#,
        );
        let json =
            format!("{{\"type\":\"thinking\",\"thinking\":{text},\"signature\":{signature}}},");
        (events, json)
    }

    /// The answer, starting with a signed thinking block when `thinking`.
    fn build(config: FakeConfig, thinking: bool) -> Rendered {
        let c = &config;
        let creation =
            u64::from(c.cache_creation_5m_tokens) + u64::from(c.cache_creation_1h_tokens);
        let common = format!(
            "\"input_tokens\":{},\"cache_creation_input_tokens\":{creation},\"cache_read_input_tokens\":{}",
            c.input_tokens, c.cache_read_input_tokens
        );
        let cache_creation = format!(
            "\"cache_creation\":{{\"ephemeral_5m_input_tokens\":{},\"ephemeral_1h_input_tokens\":{}}}",
            c.cache_creation_5m_tokens, c.cache_creation_1h_tokens
        );
        let server_tool = if c.web_search_requests > 0 {
            format!(
                ",\"server_tool_use\":{{\"web_search_requests\":{}}}",
                c.web_search_requests
            )
        } else {
            String::new()
        };
        let start_usage = format!("{{{common},{cache_creation},\"output_tokens\":1}}");
        let stream_usage = format!(
            "{{{common},\"output_tokens\":{}{server_tool}}}",
            c.output_tokens
        );
        let json_usage = format!(
            "{{{common},{cache_creation},\"output_tokens\":{}{server_tool}}}",
            c.output_tokens
        );

        let message_start_tail = format!(
            ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{start_usage}}}}}\n\n"
        );
        let (thinking_events, thinking_json) = if thinking {
            Rendered::thinking_block()
        } else {
            (String::new(), String::new())
        };
        let ti = usize::from(thinking);
        let head_rest = thinking_events
            + &event(
                "content_block_start",
                &format!(
                    "{{\"type\":\"content_block_start\",\"index\":{ti},\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}"
                ),
            )
            + &event("ping", r#"{"type": "ping"}"#);
        let texts = split_reply(&c.reply_text, c.output_tokens);
        let deltas: Vec<Bytes> = texts
            .iter()
            .map(|t| {
                let data = format!(
                    "{{\"type\":\"content_block_delta\",\"index\":{ti},\"delta\":{{\"type\":\"text_delta\",\"text\":{}}}}}",
                    json_str(t)
                );
                Bytes::from(event("content_block_delta", &data))
            })
            .collect();
        let (tool_events, tool_json) = tool_blocks(&c.tool_uses, ti);
        let stop = if c.tool_uses.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        };
        let tail = event(
            "content_block_stop",
            &format!("{{\"type\":\"content_block_stop\",\"index\":{ti}}}"),
        ) + &tool_events
            + &event(
                "message_delta",
                &format!(
                    "{{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{stop}\",\"stop_sequence\":null}},\"usage\":{stream_usage}}}"
                ),
            )
            + &event("message_stop", r#"{"type":"message_stop"}"#);
        let mut unpaced = head_rest.clone().into_bytes();
        for d in &deltas {
            unpaced.extend_from_slice(d);
        }
        unpaced.extend_from_slice(tail.as_bytes());
        let json_tail = format!(
            ",\"content\":[{thinking_json}{{\"type\":\"text\",\"text\":{}}}{tool_json}],\"stop_reason\":\"{stop}\",\"stop_sequence\":null,\"usage\":{json_usage}}}",
            json_str(&c.reply_text)
        );
        let after_tool_result = (!c.tool_uses.is_empty()).then(|| {
            let plain = FakeConfig {
                tool_uses: Vec::new(),
                ..c.clone()
            };
            Arc::new(Rendered::build(plain, thinking))
        });
        let thinking = (c.strict && !thinking).then(|| Arc::new(Rendered::build(c.clone(), true)));
        Rendered {
            message_start_tail,
            head_rest: Bytes::from(head_rest),
            deltas,
            tail: Bytes::from(tail),
            unpaced_rest: Bytes::from(unpaced),
            stream_usage: serde_json::from_str(&stream_usage).unwrap_or(Value::Null),
            json_tail,
            json_usage: serde_json::from_str(&json_usage).unwrap_or(Value::Null),
            count_tokens_body: Bytes::from(format!("{{\"input_tokens\":{}}}", c.input_tokens)),
            model_override_json: c.model_override.as_deref().map(json_str),
            after_tool_result,
            thinking,
            config,
        }
    }

    /// JSON-encoded model to echo for a request that named `requested`.
    pub(crate) fn model_json(&self, requested: Option<&str>) -> String {
        match (&self.model_override_json, requested) {
            (Some(m), _) => m.clone(),
            (None, Some(r)) => json_str(r),
            (None, None) => json_str(FALLBACK_MODEL),
        }
    }

    /// The `message_start` event for message number `id`.
    pub(crate) fn message_start(&self, id: u64, model_json: &str) -> Bytes {
        Bytes::from(format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_fake_{id}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":{model_json}{}",
            self.message_start_tail
        ))
    }

    /// The non-streaming JSON answer for message number `id`.
    pub(crate) fn json_message(&self, id: u64, model_json: &str) -> Bytes {
        Bytes::from(format!(
            "{{\"id\":\"msg_fake_{id}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":{model_json}{}",
            self.json_tail
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn split_exact_when_enough_words() {
        let t = "Hello from the fake upstream.";
        for n in 1..=5 {
            let parts = split_reply(t, n);
            assert_eq!(parts.len(), n as usize);
            assert_eq!(parts.concat(), t);
        }
        assert_eq!(
            split_reply(t, 5),
            ["Hello", " from", " the", " fake", " upstream."]
        );
        assert!(split_reply(t, 0).is_empty());
        assert_eq!(split_reply("  a  b ", 3).concat(), "  a  b ");
    }

    #[test]
    fn split_below_words_keeps_text() {
        let t = "Hello from the fake upstream.";
        for n in 6..=29 {
            let parts = split_reply(t, n);
            assert_eq!(parts.len(), n as usize);
            assert_eq!(parts.concat(), t);
            assert!(parts.iter().all(|p| !p.is_empty()));
        }
        assert_eq!(split_reply("héllo", 5), ["h", "é", "l", "l", "o"]);
    }

    #[test]
    fn split_cycles_words_when_too_short() {
        let parts = split_reply("a b", 6);
        assert_eq!(parts, ["a", " ", "b", " a", " b", " a"]);
        assert_eq!(split_reply("", 2), ["", ""]);
    }

    #[test]
    fn rendered_json_is_valid() {
        let cfg = FakeConfig {
            reply_text: "quote \" and \\ newline\n".into(),
            web_search_requests: 2,
            cache_creation_5m_tokens: 3,
            cache_creation_1h_tokens: 4,
            ..FakeConfig::default()
        };
        let full = cfg.reply_text.clone();
        let r = Rendered::new(cfg);
        let m = r.model_json(Some("m\"x"));
        let v: Value = serde_json::from_slice(&r.json_message(7, &m)).unwrap();
        assert_eq!(v["model"], "m\"x");
        assert_eq!(v["content"][0]["text"], full);
        assert_eq!(v["usage"]["cache_creation_input_tokens"], 7);
        assert_eq!(v["usage"]["server_tool_use"]["web_search_requests"], 2);
        assert_eq!(r.stream_usage["output_tokens"], 8);
        assert!(r.stream_usage.get("cache_creation").is_none());
        let start = r.message_start(7, &m);
        let s = std::str::from_utf8(&start).unwrap();
        let data = s
            .strip_prefix("event: message_start\ndata: ")
            .unwrap()
            .trim_end();
        let v: Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["message"]["id"], "msg_fake_7");
        assert_eq!(v["message"]["usage"]["output_tokens"], 1);
    }

    #[test]
    fn strict_answers_to_thinking_start_with_a_signed_thinking_block() {
        let cfg = FakeConfig {
            strict: true,
            tool_uses: vec![ToolUse {
                id: "toolu_a".into(),
                name: "Read".into(),
                input: serde_json::json!({"file_path": "/x"}),
            }],
            ..FakeConfig::default()
        };
        let r = Rendered::new(cfg);
        let t = r.thinking.as_ref().unwrap();
        assert!(t.thinking.is_none());
        let v: Value = serde_json::from_slice(&t.json_message(1, "\"m\"")).unwrap();
        assert_eq!(v["content"][0]["type"], "thinking");
        assert_eq!(
            v["content"][0]["signature"],
            crate::strict::sign(crate::strict::THINKING_TEXT)
        );
        assert_eq!(v["content"][1]["type"], "text");
        assert_eq!(v["content"][2]["id"], "toolu_a");
        let mut indexes = Vec::new();
        for data in std::str::from_utf8(&t.unpaced_rest)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
        {
            let e: Value = serde_json::from_str(data).unwrap();
            if e["type"] == "content_block_start" {
                indexes.push((
                    e["index"].as_u64().unwrap(),
                    e["content_block"]["type"].clone(),
                ));
            }
        }
        let want: [(u64, Value); 3] = [
            (0, "thinking".into()),
            (1, "text".into()),
            (2, "tool_use".into()),
        ];
        assert_eq!(indexes, want);
        // Without `strict` there is no thinking variant.
        assert!(Rendered::new(FakeConfig::default()).thinking.is_none());
    }

    #[test]
    fn tool_uses_render_as_blocks_and_streamed_fragments() {
        let cfg = FakeConfig {
            reply_text: "Checking.".into(),
            output_tokens: 1,
            tool_uses: vec![
                ToolUse {
                    id: "toolu_a".into(),
                    name: "get_weather".into(),
                    input: serde_json::json!({"city": "Paris é"}),
                },
                ToolUse {
                    id: "toolu_b".into(),
                    name: "now".into(),
                    input: serde_json::json!({}),
                },
            ],
            ..FakeConfig::default()
        };
        let r = Rendered::new(cfg);
        let v: Value = serde_json::from_slice(&r.json_message(1, "\"m\"")).unwrap();
        assert_eq!(v["stop_reason"], "tool_use");
        assert_eq!(v["content"][1]["input"]["city"], "Paris é");
        assert_eq!(v["content"][2]["name"], "now");
        let tail = std::str::from_utf8(&r.tail).unwrap();
        let mut args = [String::new(), String::new()];
        for data in tail.lines().filter_map(|l| l.strip_prefix("data: ")) {
            let e: Value = serde_json::from_str(data).unwrap();
            if e["delta"]["type"] == "input_json_delta" {
                let i = e["index"].as_u64().unwrap() as usize - 1;
                args[i].push_str(e["delta"]["partial_json"].as_str().unwrap());
            }
        }
        assert_eq!(args[0], r#"{"city":"Paris é"}"#);
        assert_eq!(args[1], "{}");
        assert!(tail.contains(r#""stop_reason":"tool_use""#));
        let after = r.after_tool_result.as_ref().unwrap();
        assert!(after.after_tool_result.is_none());
        let v: Value = serde_json::from_slice(&after.json_message(2, "\"m\"")).unwrap();
        assert_eq!(v["stop_reason"], "end_turn");
    }
}
