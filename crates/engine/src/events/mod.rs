//! Structured events: one JSON object per line with `ts`, `evt` and the event's fields.
//!
//! Events are for attribution (who did what, why a request was refused, what it cost) and
//! are separate from operator log lines, which go through `tracing`. No event ever holds a
//! secret: callers put identifiers (key ids, request ids), never credentials, into fields.
//! JSON encoding escapes control characters, so a field cannot forge a second line.

pub mod live;

use std::io::Write;
use std::sync::Mutex;

use chrono::{SecondsFormat, Utc};
use serde_json::{Map, Value};

/// One event. Build with [`Event::new`] and [`Event::with`].
#[derive(Debug, Clone)]
pub struct Event {
    pub evt: &'static str,
    /// When the event happened (not when it was written).
    pub ts: chrono::DateTime<Utc>,
    pub fields: Map<String, Value>,
}

impl Event {
    pub fn new(evt: &'static str) -> Self {
        Self {
            evt,
            ts: Utc::now(),
            fields: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(key.to_owned(), value.into());
        self
    }

    /// Appends the event as one JSON line (no intermediate tree, no copies of the fields).
    pub fn write_line(&self, out: &mut String) {
        out.push_str("{\"ts\":\"");
        out.push_str(&self.ts.to_rfc3339_opts(SecondsFormat::Millis, true));
        out.push_str("\",\"evt\":");
        out.push_str(&Value::String(self.evt.to_owned()).to_string());
        for (k, v) in &self.fields {
            out.push(',');
            if let (Ok(k), Ok(v)) = (serde_json::to_string(k), serde_json::to_string(v)) {
                out.push_str(&k);
                out.push(':');
                out.push_str(&v);
            }
        }
        out.push_str("}\n");
    }

    /// The event as the single JSON object that is written out.
    pub fn to_json(&self) -> Value {
        let mut obj = Map::with_capacity(self.fields.len() + 2);
        obj.insert(
            "ts".into(),
            self.ts.to_rfc3339_opts(SecondsFormat::Millis, true).into(),
        );
        obj.insert("evt".into(), self.evt.into());
        for (k, v) in &self.fields {
            obj.insert(k.clone(), v.clone());
        }
        Value::Object(obj)
    }
}

/// Where events go.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: &Event);

    /// Several events at once (sinks that write may do it in one go).
    fn emit_batch(&self, events: &[Event]) {
        for e in events {
            self.emit(e);
        }
    }
}

/// One line per event on stderr (the default for `gatehouse serve`).
#[derive(Debug, Default, Clone, Copy)]
pub struct StderrEventSink;

impl EventSink for StderrEventSink {
    fn emit(&self, event: &Event) {
        self.emit_batch(std::slice::from_ref(event));
    }

    fn emit_batch(&self, events: &[Event]) {
        let mut out = String::with_capacity(events.len() * 512);
        for e in events {
            e.write_line(&mut out);
        }
        // One write per batch; a closed stderr must not take the gateway down.
        let _ = std::io::stderr().lock().write_all(out.as_bytes());
    }
}

/// Keeps events in memory (tests, and the desktop app's live view).
#[derive(Debug, Default)]
pub struct MemoryEventSink {
    events: Mutex<Vec<Value>>,
}

impl MemoryEventSink {
    pub fn events(&self) -> Vec<Value> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Events whose `evt` equals `name`.
    pub fn named(&self, name: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e.get("evt").and_then(Value::as_str) == Some(name))
            .collect()
    }
}

impl EventSink for MemoryEventSink {
    fn emit(&self, event: &Event) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event.to_json());
        }
    }
}

/// Sends every event to several sinks (e.g. stderr and a rotating file).
pub struct FanoutEventSink(pub Vec<std::sync::Arc<dyn EventSink>>);

impl EventSink for FanoutEventSink {
    fn emit(&self, event: &Event) {
        for sink in &self.0 {
            sink.emit(event);
        }
    }

    fn emit_batch(&self, events: &[Event]) {
        for sink in &self.0 {
            sink.emit_batch(events);
        }
    }
}

/// Writes event lines to any writer, e.g. a `tracing_appender` rolling file.
pub struct WriterEventSink<W: Write + Send>(pub Mutex<W>);

impl<W: Write + Send> EventSink for WriterEventSink<W> {
    fn emit(&self, event: &Event) {
        let mut line = String::with_capacity(512);
        event.write_line(&mut line);
        if let Ok(mut w) = self.0.lock() {
            let _ = w.write_all(line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn line_and_tree_agree() {
        let e = Event::new("x")
            .with("a", 1)
            .with("b", "two\n")
            .with("c", Value::Null);
        let mut line = String::new();
        e.write_line(&mut line);
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let parsed: Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(parsed, e.to_json());
        assert!(line.starts_with("{\"ts\":"));
    }

    #[test]
    fn control_characters_stay_on_one_line() {
        let e = Event::new("auth.denied").with("reason", "bad\nline\u{1b}[31m");
        let s = e.to_json().to_string();
        assert!(!s.contains('\n'));
        assert!(s.contains("\\n"));
        assert!(s.contains("\\u001b"));
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["evt"], "auth.denied");
    }
}
