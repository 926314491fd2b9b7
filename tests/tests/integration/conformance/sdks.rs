//! The strict fakes against the providers' official SDKs (`tests/e2e/strict_sdks.mjs`):
//! every refusal reaches the SDK as its own API error, with the status and the provider's
//! words, and the valid request beside it succeeds.

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_tests::{e2e_dir, node_json};
use serde_json::json;

#[tokio::test]
async fn the_strict_fakes_satisfy_the_official_sdks() {
    assert!(
        e2e_dir()
            .join("node_modules/@anthropic-ai/vertex-sdk")
            .exists(),
        "run scripts/test.sh (npm ci in tests/e2e)"
    );
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let v = node_json("strict_sdks.mjs", &[], &[("FAKE_URL", &fake.url())]).await;
    let a = &v["anthropic"];
    assert_eq!(a["first_blocks"], json!(["thinking", "text", "tool_use"]));
    assert_eq!(a["streamed_blocks"], a["first_blocks"]);
    assert_eq!(a["streamed_signature"], a["signature"]);
    assert_eq!(a["second_stop"], "end_turn", "{v}");
    for (case, message) in [
        (
            "foreign",
            "messages.1.content.0: Invalid `signature` in `thinking` block",
        ),
        (
            "empty",
            "messages.1.content.0: Invalid `signature` in `thinking` block",
        ),
        (
            "missing",
            "messages.1.content.0.thinking.signature: Field required",
        ),
        (
            "tool_id",
            "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
        ),
    ] {
        assert_eq!(a[case]["status"], 400, "{case}: {v}");
        assert_eq!(a[case]["type"], "invalid_request_error", "{case}");
        assert_eq!(a[case]["message"], message, "{case}");
    }
    let too_long = a["too_long"]["message"].as_str().unwrap();
    assert!(
        too_long.starts_with("prompt is too long: ")
            && too_long.ends_with(" tokens > 2000 maximum"),
        "{too_long}"
    );
    let b = &v["bedrock"];
    assert_eq!(b["known_beta"], "tool_use");
    assert_eq!(b["unknown_beta"]["status"], 400);
    assert_eq!(
        b["unknown_beta"]["message"],
        "The model returned the following errors: invalid beta flag"
    );
    assert_eq!(
        b["extra_key"]["message"],
        "Malformed input request: #: extraneous key [service_tier] is not permitted, please reformat your input and try again."
    );
    assert!(
        b["too_long"]["message"]
            .as_str()
            .unwrap()
            .starts_with("The model returned the following errors: prompt is too long: ")
    );
    let x = &v["vertex"];
    assert_eq!(x["known_beta"], "tool_use");
    assert_eq!(
        x["unknown_beta"]["message"],
        "Unexpected value(s) `prompt-caching-scope-2026-01-05` for the `anthropic-beta` header. Please consult our documentation at docs.anthropic.com or try again without the header."
    );
    assert_eq!(
        x["extra_key"]["message"],
        "service_tier: Extra inputs are not permitted"
    );
    let o = &v["openai"];
    assert_eq!(o["reasoning"], "Thinking about it.");
    assert_eq!(o["handed_back"], "stop");
    assert_eq!(o["reasoning_missing"]["status"], 400);
    assert_eq!(
        o["reasoning_missing"]["message"],
        "Missing `reasoning_content` field in the assistant message at message index 1. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
    );
    let image = o["image_text_only"]["message"].as_str().unwrap();
    assert!(
        image.starts_with(
            "Failed to deserialize the JSON body into the target type: messages[0]: unknown variant `image_url`, expected `text` at line 1 column "
        ),
        "{image}"
    );
    assert_eq!(o["image_vision"], "stop");
    assert_eq!(o["too_long"]["code"], "context_length_exceeded");
    assert!(o["too_long"]["message"].as_str().unwrap().starts_with(
        "This model's maximum context length is 2000 tokens. However, your messages resulted in "
    ));
    let m = &v["mistral"];
    let id = m["id"].as_str().unwrap();
    assert!(
        id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()),
        "{id}"
    );
    assert_eq!(m["answered"], "stop");
    assert_eq!(
        m["foreign_id"]["message"],
        "Tool call id was call_0fypS1hVX but must be a-z, A-Z, 0-9, with a length of 9."
    );
    // Every refusal the SDKs saw is in the fake's own list.
    assert_eq!(v["refusals"], 14);
    assert_eq!(fake.refusals().len(), 14);
}
