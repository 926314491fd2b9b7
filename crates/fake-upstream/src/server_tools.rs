//! A model that uses Anthropic's server tools the way Gatehouse offers them to an upstream
//! that cannot run them: as client functions named `web_search` (`{query}`) and
//! `web_fetch` (`{url}`). Opt-in by model id: a model containing `searcher` on the
//! OpenAI-compatible face calls the first of those functions the request offers once
//! (the query after `query:` in the last user message, else that whole message; the first
//! `http(s)://` URL in it for a fetch), and once the tool's result is back answers with
//! text quoting it, so a test sees that the result reached the model.

use serde_json::{Value, json};

/// What the model does this turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Call `name` with these JSON arguments.
    Call {
        name: String,
        arguments: String,
    },
    Answer(String),
}

/// The answer's words before the quoted tool output.
pub const ANSWER_PREFIX: &str = "From the tool: ";

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// This turn, when the request is for a searcher model offering one of the tools.
pub(crate) fn turn(body: &Value) -> Option<Turn> {
    if !body["model"].as_str()?.contains("searcher") {
        return None;
    }
    let tool = body["tools"].as_array()?.iter().find_map(|t| {
        let name = t["function"]["name"].as_str()?;
        matches!(name, "web_search" | "web_fetch").then(|| name.to_owned())
    })?;
    let messages = body["messages"].as_array()?;
    let since = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .map_or(0, |i| i + 1);
    if let Some(result) = messages[since..].iter().rev().find(|m| m["role"] == "tool") {
        return Some(Turn::Answer(format!(
            "{ANSWER_PREFIX}{}",
            text_of(&result["content"])
        )));
    }
    let asked = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .unwrap_or_default();
    let arguments = if tool == "web_search" {
        let query = asked
            .split_once("query:")
            .map_or(asked.as_str(), |(_, q)| q)
            .trim();
        json!({"query": query})
    } else {
        let url = asked
            .split_whitespace()
            .find(|w| w.starts_with("http://") || w.starts_with("https://"))
            .map(|w| w.trim_end_matches(['.', ',', ')', ';']))
            .unwrap_or_default();
        json!({"url": url})
    };
    Some(Turn::Call {
        name: tool,
        arguments: arguments.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(model: &str, messages: Value) -> Value {
        json!({"model": model, "messages": messages, "tools": [
            {"type": "function", "function": {"name": "Bash", "parameters": {}}},
            {"type": "function", "function": {"name": "web_search", "parameters": {}}},
        ]})
    }

    #[test]
    fn searchers_search_once_then_quote_the_result() {
        let ask =
            json!([{"role": "user", "content": "Perform a web search for the query: rust async"}]);
        assert_eq!(turn(&body("gpt-4o", ask.clone())), None);
        assert_eq!(
            turn(&body("fake-searcher", ask)),
            Some(Turn::Call {
                name: "web_search".into(),
                arguments: r#"{"query":"rust async"}"#.into()
            })
        );
        let answered = json!([
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c"}]},
            {"role": "tool", "tool_call_id": "c", "content": "results"},
        ]);
        assert_eq!(
            turn(&body("fake-searcher", answered)),
            Some(Turn::Answer("From the tool: results".into()))
        );
    }

    #[test]
    fn fetches_take_the_first_url_of_the_question() {
        let b = json!({"model": "fake-searcher", "tools": [{"function": {"name": "web_fetch"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Read https://a.example/x. Thanks"}]}]});
        assert_eq!(
            turn(&b),
            Some(Turn::Call {
                name: "web_fetch".into(),
                arguments: r#"{"url":"https://a.example/x"}"#.into()
            })
        );
    }
}
