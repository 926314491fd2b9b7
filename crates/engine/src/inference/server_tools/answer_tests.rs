//! The synthesized message against golden files under
//! `crates/engine/tests/golden/server_tools/` (`<case>.json` the JSON answer, `<case>.sse`
//! the stream), the stream read back into the same message, and the meter's reading of
//! both. `GOLDEN_BLESS=1` writes a missing golden file (to be reviewed before it is
//! committed).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use super::*;
use crate::metering::usage::{SseUsageScanner, from_json_body};

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/server_tools")
        .join(name);
    if !path.exists() && std::env::var("GOLDEN_BLESS").is_ok() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing {}", path.display()));
    assert_eq!(expected, actual, "{name} differs; actual:\n{actual}");
}

fn summary(stop: &str) -> Summary {
    let mut tokens = Tokens::default();
    tokens.add(&json!({"input_tokens": 120, "output_tokens": 14, "cache_read_input_tokens": 20}));
    tokens.add(&json!({"input_tokens": 410, "output_tokens": 60,
        "cache_creation_input_tokens": 30, "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20}}));
    Summary {
        id: "msg_golden01".into(),
        model: "deepseek-chat".into(),
        stop_reason: stop.into(),
        stop_sequence: Value::Null,
        tokens,
    }
}

fn hit(n: u32) -> Hit {
    Hit {
        url: format!("https://example.com/{n}"),
        title: format!("Result {n}"),
        snippet: format!("Snippet {n} with \"quotes\" and é."),
        page_age: (n == 1).then(|| "April 30, 2025".to_owned()),
    }
}

fn searched() -> Vec<Block> {
    vec![
        Block::Model(json!({"type": "text", "text": "I'll search for that."})),
        Block::Search {
            id: "srvtoolu_01".into(),
            query: "gatehouse llm gateway".into(),
            outcome: Ok(vec![hit(1), hit(2)]),
        },
        Block::Search {
            id: "srvtoolu_02".into(),
            query: "second".into(),
            outcome: Err("unavailable"),
        },
        Block::Model(json!({"type": "text", "text": "Gatehouse is a gateway."})),
    ]
}

fn fetched() -> Vec<Block> {
    vec![
        Block::Fetch {
            id: "srvtoolu_03".into(),
            url: "https://example.com/page".into(),
            outcome: Ok(Page {
                url: "https://example.com/page".into(),
                title: Some("A page".into()),
                text: "Line one.\nLine two.".into(),
                retrieved_at: "2025-06-01T12:00:00Z".into(),
            }),
        },
        Block::Fetch {
            id: "srvtoolu_04".into(),
            url: "https://internal.example/".into(),
            outcome: Err("url_not_allowed"),
        },
        Block::Model(
            json!({"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "ls"}}),
        ),
    ]
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap() + "\n"
}

#[test]
fn search_answer_matches_its_golden_files() {
    let m = message(&summary("end_turn"), &searched());
    golden("search.json", &pretty(&m));
    golden("search.sse", &sse(&m));
    // Only the search that ran is billed.
    assert_eq!(m["usage"]["server_tool_use"]["web_search_requests"], 1);
    assert_eq!(m["usage"]["input_tokens"], 530);
    assert_eq!(
        m["usage"]["cache_creation"]["ephemeral_5m_input_tokens"],
        10
    );
}

#[test]
fn fetch_answer_matches_its_golden_files() {
    let m = message(&summary("tool_use"), &fetched());
    golden("fetch.json", &pretty(&m));
    golden("fetch.sse", &sse(&m));
    assert_eq!(m["usage"]["server_tool_use"]["web_fetch_requests"], 1);
}

/// The stream applied as a client applies it (start blocks, append deltas) gives back the
/// JSON message.
fn replay(stream: &str) -> Value {
    let mut message = Value::Null;
    let mut partial_json: Vec<String> = Vec::new();
    for frame in stream.split("\n\n").filter(|f| !f.is_empty()) {
        let (event, data) = frame.split_once('\n').unwrap();
        let event = event.strip_prefix("event: ").unwrap();
        let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(data["type"], event);
        let index = data["index"].as_u64().unwrap_or(0) as usize;
        match event {
            "message_start" => message = data["message"].clone(),
            "content_block_start" => {
                message["content"]
                    .as_array_mut()
                    .unwrap()
                    .push(data["content_block"].clone());
                partial_json.push(String::new());
            }
            "content_block_delta" => {
                let block = &mut message["content"][index];
                let d = &data["delta"];
                match d["type"].as_str().unwrap() {
                    "text_delta" => {
                        block["text"] = json!(format!(
                            "{}{}",
                            block["text"].as_str().unwrap(),
                            d["text"].as_str().unwrap()
                        ));
                    }
                    "input_json_delta" => {
                        partial_json[index].push_str(d["partial_json"].as_str().unwrap())
                    }
                    other => panic!("unexpected delta {other}"),
                }
            }
            "content_block_stop" => {
                if !partial_json[index].is_empty() {
                    message["content"][index]["input"] =
                        serde_json::from_str(&partial_json[index]).unwrap();
                }
            }
            "message_delta" => {
                message["stop_reason"] = data["delta"]["stop_reason"].clone();
                message["stop_sequence"] = data["delta"]["stop_sequence"].clone();
                message["usage"] = data["usage"].clone();
            }
            "message_stop" => {}
            other => panic!("unexpected event {other}"),
        }
    }
    message
}

#[test]
fn the_stream_replays_into_the_json_message() {
    for (stop, blocks) in [("end_turn", searched()), ("tool_use", fetched())] {
        let m = message(&summary(stop), &blocks);
        assert_eq!(replay(&sse(&m)), m);
    }
}

#[test]
fn the_meter_reads_searches_from_both_forms() {
    let m = message(&summary("end_turn"), &searched());
    let from_json = from_json_body(m.to_string().as_bytes()).unwrap();
    let mut scanner = SseUsageScanner::default();
    let stream = sse(&m);
    for piece in stream.as_bytes().chunks(7) {
        scanner.feed(piece);
    }
    let (from_sse, _) = scanner.result();
    assert_eq!(from_json, from_sse);
    assert_eq!(from_json.web_search_requests, 1);
    assert_eq!((from_json.input_tokens, from_json.output_tokens), (530, 74));
    assert_eq!(from_json.cache_read_tokens, 20);
    assert_eq!(
        (
            from_json.cache_write_5m_tokens,
            from_json.cache_write_1h_tokens
        ),
        (10, 20)
    );
}

#[test]
fn encrypted_content_reads_back_only_when_ours() {
    let e = encrypted_content("a snippet é");
    assert_eq!(snippet_of(&e).as_deref(), Some("a snippet é"));
    assert_eq!(snippet_of("EqgfCioIARgBIiQ3YTAwMjY1Mi1"), None);
    assert_eq!(snippet_of("not base64!"), None);
}
