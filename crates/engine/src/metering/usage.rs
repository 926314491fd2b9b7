//! Token usage as the upstream reports it, read from SSE or JSON while bytes pass by.
//!
//! [`SseUsageScanner`] is fed every chunk of a `text/event-stream` response. It is a
//! purpose-built line scanner rather than a general SSE parser: it copies only the `data`
//! of the few events that carry usage (`message_start`, `message_delta`, `error`), skips
//! the rest without allocating, and is linear in the bytes it sees. (A general parser such
//! as `eventsource-stream` allocates a string per event and re-copies its buffer per line,
//! which costs more per event than the gateway's whole per-event budget on big chunks.)
//! Its line buffer is bounded; past the bound it gives up on exact usage instead of
//! growing or delaying the response.

use serde::Deserialize;

/// Largest line or JSON body kept for usage extraction.
pub const MAX_BUFFER: usize = 8 * 1024 * 1024;

/// Token counts for one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_5m_tokens: u64,
    pub cache_write_1h_tokens: u64,
    pub web_search_requests: u64,
}

/// How the usage of a request is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageSource {
    /// The upstream reported final usage.
    Reported,
    /// Part reported (e.g. input from `message_start`), the rest estimated from text length.
    Estimated,
    /// Nothing could be read.
    None,
}

impl UsageSource {
    pub fn as_str(self) -> &'static str {
        match self {
            UsageSource::Reported => "reported",
            UsageSource::Estimated => "estimated",
            UsageSource::None => "none",
        }
    }
}

#[derive(Deserialize, Default)]
struct WireCacheCreation {
    ephemeral_5m_input_tokens: Option<u64>,
    ephemeral_1h_input_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct WireServerToolUse {
    web_search_requests: Option<u64>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_creation: Option<WireCacheCreation>,
    server_tool_use: Option<WireServerToolUse>,
}

impl WireUsage {
    /// Overlays the fields this report carries onto `u`.
    fn apply(&self, u: &mut Usage) {
        if let Some(v) = self.input_tokens {
            u.input_tokens = v;
        }
        if let Some(v) = self.output_tokens {
            u.output_tokens = v;
        }
        if let Some(v) = self.cache_read_input_tokens {
            u.cache_read_tokens = v;
        }
        match &self.cache_creation {
            Some(cc) => {
                if let Some(v) = cc.ephemeral_5m_input_tokens {
                    u.cache_write_5m_tokens = v;
                }
                if let Some(v) = cc.ephemeral_1h_input_tokens {
                    u.cache_write_1h_tokens = v;
                }
            }
            None => {
                // A total without its split: keep the split seen earlier (message_start)
                // and count any difference as 5-minute writes.
                if let Some(v) = self.cache_creation_input_tokens
                    && u.cache_write_5m_tokens.checked_add(u.cache_write_1h_tokens) != Some(v)
                {
                    u.cache_write_1h_tokens = u.cache_write_1h_tokens.min(v);
                    u.cache_write_5m_tokens = v - u.cache_write_1h_tokens;
                }
            }
        }
        if let Some(v) = self
            .server_tool_use
            .as_ref()
            .and_then(|s| s.web_search_requests)
        {
            u.web_search_requests = v;
        }
    }
}

#[derive(Deserialize)]
struct WireMessage {
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireEvent {
    #[serde(rename = "type")]
    kind: String,
    message: Option<WireMessage>,
    usage: Option<WireUsage>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No `event:` line yet: keep the data and look at its `type`.
    Unknown,
    Usage,
    Delta,
    Skip,
}

/// Incremental usage reader for an Anthropic SSE stream.
#[derive(Debug)]
pub struct SseUsageScanner {
    partial: Vec<u8>,
    kind: Kind,
    data: Vec<u8>,
    usage: Usage,
    saw_start: bool,
    saw_delta: bool,
    saw_error: bool,
    /// Bytes of text delta payload seen (for estimates when final usage never came).
    delta_bytes: u64,
    /// Inside a line longer than [`MAX_BUFFER`]: its bytes are counted, not kept.
    skipping: bool,
    /// A usage-bearing event was too large to read: the result is an estimate.
    lost_usage: bool,
}

impl Default for SseUsageScanner {
    fn default() -> Self {
        Self {
            partial: Vec::new(),
            kind: Kind::Unknown,
            data: Vec::new(),
            usage: Usage::default(),
            saw_start: false,
            saw_delta: false,
            saw_error: false,
            delta_bytes: 0,
            skipping: false,
            lost_usage: false,
        }
    }
}

impl SseUsageScanner {
    /// Reads the next bytes. Memory stays bounded by [`MAX_BUFFER`]: a longer line is
    /// skipped to its end (counted as delta text, or noted as lost usage), and reading
    /// goes on, so a final `message_delta` after it is never missed.
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while !rest.is_empty() {
            let nl = memchr::memchr(b'\n', rest);
            if self.skipping {
                let end = nl.unwrap_or(rest.len());
                self.skipped(end);
                if nl.is_none() {
                    return;
                }
                self.skipping = false;
                rest = &rest[end + 1..];
                continue;
            }
            let Some(nl) = nl else {
                if self.partial.len() + rest.len() > MAX_BUFFER {
                    let n = self.partial.len() + rest.len();
                    self.partial = Vec::new();
                    self.skipped(n);
                    self.skipping = true;
                } else {
                    self.partial.extend_from_slice(rest);
                }
                return;
            };
            let (line, tail) = rest.split_at(nl);
            rest = &tail[1..];
            if self.partial.is_empty() {
                self.line(line);
            } else {
                let mut joined = std::mem::take(&mut self.partial);
                joined.extend_from_slice(line);
                self.line(&joined);
                joined.clear();
                self.partial = joined;
            }
        }
    }

    /// Accounts for `n` bytes of a line too long to keep.
    fn skipped(&mut self, n: usize) {
        match self.kind {
            Kind::Delta => self.delta_bytes += n as u64,
            Kind::Usage | Kind::Unknown => self.lost_usage = true,
            Kind::Skip => {}
        }
    }

    fn line(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            self.dispatch();
            return;
        }
        if let Some(name) = field(line, b"event") {
            self.kind = match name {
                b"message_start" | b"message_delta" | b"error" => Kind::Usage,
                b"content_block_delta" => Kind::Delta,
                _ => Kind::Skip,
            };
        } else if let Some(data) = field(line, b"data") {
            match self.kind {
                Kind::Usage | Kind::Unknown => {
                    if self.data.len() + data.len() > MAX_BUFFER {
                        // Too large to read: skip the rest of this event.
                        self.lost_usage = true;
                        self.data = Vec::new();
                        self.kind = Kind::Skip;
                        return;
                    }
                    if !self.data.is_empty() {
                        self.data.push(b'\n');
                    }
                    self.data.extend_from_slice(data);
                }
                // JSON envelope of a text delta is about 70 bytes; the rest is text.
                Kind::Delta => self.delta_bytes += data.len().saturating_sub(70) as u64,
                Kind::Skip => {}
            }
        }
    }

    fn dispatch(&mut self) {
        if !self.data.is_empty() {
            if let Ok(ev) = serde_json::from_slice::<WireEvent>(&self.data) {
                match ev.kind.as_str() {
                    "message_start" => {
                        if let Some(u) = ev.message.and_then(|m| m.usage) {
                            u.apply(&mut self.usage);
                        }
                        self.saw_start = true;
                    }
                    "message_delta" => {
                        if let Some(u) = ev.usage {
                            u.apply(&mut self.usage);
                            self.saw_delta = true;
                        }
                    }
                    "error" => self.saw_error = true,
                    _ => {}
                }
            }
            self.data.clear();
        }
        self.kind = Kind::Unknown;
    }

    /// Whether the stream carried an `error` event.
    pub fn saw_error(&self) -> bool {
        self.saw_error
    }

    /// The usage and how it is known.
    pub fn result(&self) -> (Usage, UsageSource) {
        if self.saw_delta && !self.lost_usage {
            return (self.usage, UsageSource::Reported);
        }
        if self.saw_start || self.saw_delta || self.lost_usage || self.delta_bytes > 0 {
            let mut u = self.usage;
            u.output_tokens = u.output_tokens.max(self.delta_bytes.div_ceil(4));
            return (u, UsageSource::Estimated);
        }
        (self.usage, UsageSource::None)
    }
}

/// `name: value` or `name:value` -> value.
fn field<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let rest = line.strip_prefix(name)?.strip_prefix(b":")?;
    Some(rest.strip_prefix(b" ").unwrap_or(rest))
}

/// The end of a JSON response body too large to keep whole: the top-level `usage` comes
/// after `content`, so its last occurrence in the tail is read.
pub const JSON_TAIL: usize = 64 * 1024;

/// Usage from the tail of a JSON response body: the object after the last `"usage":`.
pub fn from_json_tail(tail: &[u8]) -> Option<Usage> {
    let at = memchr::memmem::rfind(tail, b"\"usage\"")?;
    let rest = tail[at + b"\"usage\"".len()..].trim_ascii_start();
    let rest = rest.strip_prefix(b":")?;
    let mut de = serde_json::Deserializer::from_slice(rest);
    let wire = <WireUsage as serde::Deserialize>::deserialize(&mut de).ok()?;
    let mut u = Usage::default();
    wire.apply(&mut u);
    Some(u)
}

/// Usage from a complete JSON response body (`usage` at the top level).
pub fn from_json_body(body: &[u8]) -> Option<Usage> {
    #[derive(Deserialize)]
    struct Top {
        usage: Option<WireUsage>,
    }
    let top: Top = serde_json::from_slice(body).ok()?;
    let mut u = Usage::default();
    top.usage?.apply(&mut u);
    Some(u)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const STREAM: &str = "event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":120,\"cache_creation_input_tokens\":30,\"cache_read_input_tokens\":400,\"cache_creation\":{\"ephemeral_5m_input_tokens\":10,\"ephemeral_1h_input_tokens\":20},\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: ping\ndata: {\"type\": \"ping\"}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there, this is text\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"cache_creation_input_tokens\":30,\"output_tokens\":57,\"server_tool_use\":{\"web_search_requests\":2}}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

    fn expected() -> Usage {
        Usage {
            input_tokens: 120,
            output_tokens: 57,
            cache_read_tokens: 400,
            cache_write_5m_tokens: 10,
            cache_write_1h_tokens: 20,
            web_search_requests: 2,
        }
    }

    #[test]
    fn whole_stream_in_one_chunk() {
        let mut s = SseUsageScanner::default();
        s.feed(STREAM.as_bytes());
        assert_eq!(s.result(), (expected(), UsageSource::Reported));
    }

    #[test]
    fn any_split_gives_the_same_usage() {
        let bytes = STREAM.as_bytes();
        for split in 1..bytes.len() {
            let mut s = SseUsageScanner::default();
            s.feed(&bytes[..split]);
            s.feed(&bytes[split..]);
            assert_eq!(s.result().0, expected(), "split at {split}");
        }
        let mut s = SseUsageScanner::default();
        for b in bytes {
            s.feed(std::slice::from_ref(b));
        }
        assert_eq!(s.result(), (expected(), UsageSource::Reported));
    }

    #[test]
    fn crlf_lines_and_no_event_names() {
        let text = STREAM
            .lines()
            .filter(|l| !l.starts_with("event:"))
            .collect::<Vec<_>>()
            .join("\r\n");
        let mut s = SseUsageScanner::default();
        s.feed(text.as_bytes());
        s.feed(b"\r\n\r\n");
        assert_eq!(s.result(), (expected(), UsageSource::Reported));
    }

    #[test]
    fn cut_stream_is_estimated_from_what_came() {
        let cut = &STREAM[..STREAM.find("event: content_block_stop").unwrap()];
        let mut s = SseUsageScanner::default();
        s.feed(cut.as_bytes());
        let (u, src) = s.result();
        assert_eq!(src, UsageSource::Estimated);
        assert_eq!(u.input_tokens, 120);
        assert!(u.output_tokens >= 1);
    }

    #[test]
    fn error_event_is_noticed_and_garbage_is_harmless() {
        let mut s = SseUsageScanner::default();
        s.feed(b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n");
        s.feed(b"data: {not json\n\n:comment\nevent:\n\n");
        assert!(s.saw_error());
        assert_eq!(s.result().1, UsageSource::None);
    }

    /// A split near `u64::MAX` followed by a total overflowed their sum (seed
    /// fuzz/corpus/sse_usage/cache-total-after-huge-split.sse).
    #[test]
    fn cache_total_after_a_huge_split_does_not_overflow() {
        let mut s = SseUsageScanner::default();
        s.feed(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"cache_creation\":{\"ephemeral_5m_input_tokens\":18446744073709551615,\"ephemeral_1h_input_tokens\":1}}}}\n\n");
        s.feed(b"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":2,\"cache_creation_input_tokens\":5}}\n\n");
        let (u, src) = s.result();
        assert_eq!(src, UsageSource::Reported);
        assert_eq!((u.cache_write_5m_tokens, u.cache_write_1h_tokens), (4, 1));
    }

    #[test]
    fn an_oversized_event_never_hides_the_final_usage() {
        let huge = "x".repeat(MAX_BUFFER + 10);
        let stream = format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":7,\"output_tokens\":1}}}}}}\n\n\
event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"delta\":{{\"text\":\"{huge}\"}}}}\n\n\
event: message_delta\ndata: {{\"type\":\"message_delta\",\"usage\":{{\"output_tokens\":99}}}}\n\n"
        );
        for piece in [1 << 20, 4096, 7] {
            let mut s = SseUsageScanner::default();
            for chunk in stream.as_bytes().chunks(piece) {
                s.feed(chunk);
            }
            let (u, src) = s.result();
            assert_eq!((u.input_tokens, u.output_tokens), (7, 99), "{piece}");
            assert_eq!(src, UsageSource::Reported);
            assert!(
                s.partial.capacity() <= 2 * MAX_BUFFER,
                "memory stays bounded"
            );
        }
        // An oversized usage event: what follows is still read, flagged as estimated.
        let stream = format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"content\":\"{huge}\"}}}}\n\n\
event: message_delta\ndata: {{\"type\":\"message_delta\",\"usage\":{{\"output_tokens\":5}}}}\n\n"
        );
        let mut s = SseUsageScanner::default();
        s.feed(stream.as_bytes());
        let (u, src) = s.result();
        assert_eq!((u.output_tokens, src), (5, UsageSource::Estimated));
    }

    #[test]
    fn usage_is_read_from_the_tail_of_a_huge_json_body() {
        let body = r#"{"content":[{"type":"text","text":"the \"usage\": trap"}],"stop_reason":"end_turn","usage" : {"input_tokens":11,"output_tokens":22}}"#;
        let u = from_json_tail(body.as_bytes()).unwrap();
        assert_eq!((u.input_tokens, u.output_tokens), (11, 22));
        assert!(from_json_tail(b"{\"content\":[]}").is_none());
    }

    #[test]
    fn json_body_usage_without_cache_breakdown_counts_as_5m() {
        let u = from_json_body(br#"{"id":"m","usage":{"input_tokens":5,"output_tokens":7,"cache_creation_input_tokens":9}}"#).unwrap();
        assert_eq!(u.cache_write_5m_tokens, 9);
        assert_eq!(u.output_tokens, 7);
        assert!(from_json_body(b"[1,2]").is_none());
    }
}
