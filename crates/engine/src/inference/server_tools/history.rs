//! What the upstream sees while the gateway runs the server tools: each server tool
//! becomes an ordinary client tool (`web_search` with `{query}`, `web_fetch` with `{url}`),
//! the answer is asked for whole (`stream: false`), the results come back as `tool_result`
//! text, and server-tool blocks of earlier turns (`server_tool_use`,
//! `web_search_tool_result`, `web_fetch_tool_result`), which such an upstream cannot read,
//! become text.

use serde_json::{Value, json};

use super::answer::{Hit, Page, snippet_of};
use crate::config::shaping::ServerTool;

/// Uses of a tool when the request gives no `max_uses`.
pub(crate) const DEFAULT_MAX_USES: u64 = 5;

/// A server tool the request asks for, as it asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Asked {
    pub tool: ServerTool,
    /// The name the model calls it by (`web_search`).
    pub name: String,
    pub max_uses: u64,
    /// `allowed_domains` / `blocked_domains`, lower-case.
    pub allowed: Vec<String>,
    pub blocked: Vec<String>,
}

impl Asked {
    /// Whether `host` may be searched or fetched under the tool's domain lists (a domain
    /// covers its subdomains).
    pub fn admits(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let covers = |d: &String| {
            let d = d.split('/').next().unwrap_or_default();
            host == d || host.strip_suffix(d).is_some_and(|p| p.ends_with('.'))
        };
        (self.allowed.is_empty() || self.allowed.iter().any(covers))
            && !self.blocked.iter().any(covers)
    }
}

fn domains(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|d| {
            let d = d.trim().to_ascii_lowercase();
            let d = d.strip_prefix("https://").unwrap_or(&d);
            let d = d.strip_prefix("http://").unwrap_or(d);
            d.to_owned()
        })
        .filter(|d| !d.is_empty())
        .collect()
}

/// The server tools `body`'s `tools` asks for, in order.
pub(crate) fn asked(body: &Value) -> Vec<Asked> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let tool = ServerTool::of_type(t["type"].as_str()?)?;
            Some(Asked {
                tool,
                name: t["name"].as_str().unwrap_or(tool.as_str()).to_owned(),
                max_uses: t["max_uses"].as_u64().unwrap_or(DEFAULT_MAX_USES),
                allowed: domains(&t["allowed_domains"]),
                blocked: domains(&t["blocked_domains"]),
            })
        })
        .collect()
}

/// The client tool the model calls in place of `asked`.
fn client_tool(asked: &Asked) -> Value {
    match asked.tool {
        ServerTool::WebSearch => json!({
            "name": asked.name,
            "description": "Search the web. Returns the top results for the query: title, URL, publication date when known, and a snippet.",
            "input_schema": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "The search query"}},
                "required": ["query"],
            },
        }),
        ServerTool::WebFetch => json!({
            "name": asked.name,
            "description": "Fetch a web page and return its text. Only URLs given in the conversation or found in earlier search or fetch results can be fetched.",
            "input_schema": {
                "type": "object",
                "properties": {"url": {"type": "string", "description": "The URL to fetch"}},
                "required": ["url"],
            },
        }),
    }
}

/// The first step's body: server tools as client tools, a whole answer, earlier
/// server-tool blocks as text.
pub(crate) fn rewrite(body: &mut Value, asked: &[Asked]) {
    if let Some(tools) = body.get_mut("tools").and_then(Value::as_array_mut) {
        for t in tools.iter_mut() {
            let server = t["type"].as_str().and_then(ServerTool::of_type);
            let name = t["name"].as_str();
            if let Some(a) = asked
                .iter()
                .find(|a| Some(a.tool) == server && name.is_none_or(|n| n == a.name))
            {
                *t = client_tool(a);
            }
        }
    }
    if let Some(obj) = body.as_object_mut() {
        obj.insert("stream".into(), json!(false));
    }
    if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
        for m in messages {
            if let Some(blocks) = m.get_mut("content").and_then(Value::as_array_mut) {
                for b in blocks.iter_mut() {
                    if let Some(text) = as_text(b) {
                        *b = json!({"type": "text", "text": text});
                    }
                }
            }
        }
    }
}

/// After the first step a forced tool choice (`any`, or one tool) becomes `auto`: the
/// model has used the tool and must be free to answer.
pub(crate) fn relax_tool_choice(body: &mut Value) {
    let Some(choice) = body.get_mut("tool_choice") else {
        return;
    };
    if matches!(choice["type"].as_str(), Some("any" | "tool")) {
        let parallel = choice.get("disable_parallel_tool_use").cloned();
        *choice = json!({"type": "auto"});
        if let Some(p) = parallel {
            choice["disable_parallel_tool_use"] = p;
        }
    }
}

/// A search's results as the model reads them.
pub(crate) fn search_text(query: &str, outcome: &Result<Vec<Hit>, &'static str>) -> String {
    let hits = match outcome {
        Err(code) => return format!("The web search for {query:?} failed: {code}."),
        Ok(h) if h.is_empty() => return format!("The web search for {query:?} found nothing."),
        Ok(h) => h,
    };
    let mut out = format!("Web search results for {query:?}:\n");
    for (i, h) in hits.iter().enumerate() {
        out.push_str(&format!("\n{}. {}\n   URL: {}\n", i + 1, h.title, h.url));
        if let Some(age) = &h.page_age {
            out.push_str(&format!("   Published: {age}\n"));
        }
        if !h.snippet.is_empty() {
            out.push_str(&format!("   {}\n", h.snippet));
        }
    }
    out
}

/// A fetched page as the model reads it.
pub(crate) fn fetch_text(url: &str, outcome: &Result<Page, &'static str>) -> String {
    match outcome {
        Err(code) => format!("Fetching {url} failed: {code}."),
        Ok(p) => {
            let title = p
                .title
                .as_deref()
                .map(|t| format!("Title: {t}\n"))
                .unwrap_or_default();
            format!(
                "URL: {}\n{title}Retrieved: {}\n\n{}",
                p.url, p.retrieved_at, p.text
            )
        }
    }
}

/// A server-tool block of an earlier turn as text (`None` for any other block).
pub(crate) fn as_text(block: &Value) -> Option<String> {
    match block["type"].as_str()? {
        "server_tool_use" => Some(format!(
            "[{} {}]",
            block["name"].as_str().unwrap_or("server tool"),
            block["input"]
        )),
        "web_search_tool_result" => {
            let content = &block["content"];
            let outcome = match content.as_array() {
                Some(results) => Ok(results.iter().map(hit_of).collect()),
                None => Err(error_code(content)),
            };
            Some(search_text("(earlier search)", &outcome))
        }
        "web_fetch_tool_result" => {
            let c = &block["content"];
            let url = c["url"].as_str().unwrap_or_default().to_owned();
            let outcome = if c["type"] == "web_fetch_result" {
                let doc = &c["content"];
                Ok(Page {
                    url: url.clone(),
                    title: doc["title"].as_str().map(str::to_owned),
                    text: doc["source"]["data"]
                        .as_str()
                        .unwrap_or("(content not shown)")
                        .to_owned(),
                    retrieved_at: c["retrieved_at"].as_str().unwrap_or("unknown").to_owned(),
                })
            } else {
                Err(error_code(c))
            };
            Some(fetch_text(&url, &outcome))
        }
        _ => None,
    }
}

fn error_code(content: &Value) -> &'static str {
    const CODES: [&str; 12] = [
        "invalid_tool_input",
        "unavailable",
        "max_uses_exceeded",
        "too_many_requests",
        "query_too_long",
        "request_too_large",
        "url_too_long",
        "url_not_allowed",
        "url_not_accessible",
        "unsupported_content_type",
        "url_not_in_prior_context",
        "content_too_large",
    ];
    let code = content["error_code"].as_str().unwrap_or_default();
    CODES
        .iter()
        .find(|c| **c == code)
        .copied()
        .unwrap_or("unavailable")
}

/// A `web_search_result` of an earlier turn: the snippet is readable only when the gateway
/// made it.
fn hit_of(v: &Value) -> Hit {
    Hit {
        url: v["url"].as_str().unwrap_or_default().to_owned(),
        title: v["title"].as_str().unwrap_or_default().to_owned(),
        snippet: v["encrypted_content"]
            .as_str()
            .and_then(snippet_of)
            .unwrap_or_default(),
        page_age: v["page_age"].as_str().map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::inference::server_tools::answer::encrypted_content;

    #[test]
    fn server_tools_become_client_tools_and_the_answer_whole() {
        let mut body = json!({
            "model": "m", "stream": true,
            "tools": [
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 8,
                 "allowed_domains": ["https://Docs.Rs"]},
                {"name": "Bash", "input_schema": {"type": "object"}},
            ],
            "tool_choice": {"type": "tool", "name": "web_search"},
            "messages": [{"role": "user", "content": "search"}],
        });
        let asked = asked(&body);
        assert_eq!(asked.len(), 1);
        assert_eq!(
            (asked[0].max_uses, asked[0].allowed.clone()),
            (8, vec!["docs.rs".to_owned()])
        );
        rewrite(&mut body, &asked);
        assert_eq!(body["stream"], false);
        assert_eq!(body["tools"][0]["name"], "web_search");
        assert!(body["tools"][0].get("type").is_none());
        assert_eq!(body["tools"][0]["input_schema"]["required"][0], "query");
        assert_eq!(body["tools"][1]["name"], "Bash");
        assert_eq!(body["tool_choice"]["name"], "web_search");
        relax_tool_choice(&mut body);
        assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    }

    #[test]
    fn domain_lists_cover_subdomains() {
        let a = Asked {
            tool: ServerTool::WebSearch,
            name: "web_search".into(),
            max_uses: 1,
            allowed: vec!["example.com".into()],
            blocked: vec!["bad.example.com".into()],
        };
        assert!(a.admits("example.com") && a.admits("docs.example.com"));
        assert!(!a.admits("bad.example.com") && !a.admits("x.bad.example.com"));
        assert!(!a.admits("notexample.com") && !a.admits("example.org"));
    }

    #[test]
    fn earlier_server_tool_blocks_become_text_with_our_snippets() {
        let mut body = json!({"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "rust"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
                    {"type": "web_search_result", "url": "https://a.example/", "title": "A",
                     "encrypted_content": encrypted_content("ours"), "page_age": null},
                    {"type": "web_search_result", "url": "https://b.example/", "title": "B",
                     "encrypted_content": "EqgfCioIARgBIiQ3YTAw", "page_age": "May 1, 2025"},
                ]},
                {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_2",
                 "content": {"type": "web_fetch_tool_result_error", "error_code": "url_not_accessible"}},
                {"type": "text", "text": "answer"},
            ]},
        ]});
        rewrite(&mut body, &[]);
        let blocks = body["messages"][1]["content"].as_array().unwrap();
        assert!(blocks.iter().all(|b| b["type"] == "text"));
        assert_eq!(blocks[0]["text"], r#"[web_search {"query":"rust"}]"#);
        let results = blocks[1]["text"].as_str().unwrap();
        assert!(results.contains("https://a.example/") && results.contains("ours"));
        assert!(results.contains("Published: May 1, 2025") && !results.contains("EqgfC"));
        assert!(
            blocks[2]["text"]
                .as_str()
                .unwrap()
                .contains("url_not_accessible")
        );
        assert_eq!(blocks[3]["text"], "answer");
    }
}
