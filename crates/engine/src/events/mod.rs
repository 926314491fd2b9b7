//! Structured events: one JSON object per line with `ts`, `evt` and the event's fields.
//!
//! Events are for attribution (who did what, why a request was refused, what it cost) and
//! are separate from operator log lines, which go through `tracing`. No event ever holds a
//! secret: callers put identifiers (key ids, request ids), never credentials, into fields.
//! JSON encoding escapes control characters, so a field cannot forge a second line.

pub mod live;

use std::io::Write;
use std::sync::Mutex;

use chrono::{Datelike, SecondsFormat, Timelike, Utc};
use serde_json::{Map, Value};

/// One event. Build with [`Event::new`] and [`Event::with`].
#[derive(Debug, Clone)]
pub struct Event {
    pub evt: &'static str,
    /// When the event happened (not when it was written).
    pub ts: chrono::DateTime<Utc>,
    pub fields: Fields,
}

/// An event's fields in the order they were added; a key added twice keeps its first
/// place and its last value. Keys are the code's own names, so a short list beats a hash
/// map: one `inference` event (22 fields) is built, written and counted per request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields(Vec<(&'static str, Value)>);

impl Fields {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Value)> {
        self.0.iter().map(|(k, v)| (*k, v))
    }

    fn insert(&mut self, key: &'static str, value: Value) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.0.push((key, value)),
        }
    }
}

/// `fields["key"]`: the value, or `null` when the event has no such field.
impl std::ops::Index<&str> for Fields {
    type Output = Value;
    fn index(&self, key: &str) -> &Value {
        static NULL: Value = Value::Null;
        self.get(key).unwrap_or(&NULL)
    }
}

impl Event {
    pub fn new(evt: &'static str) -> Self {
        Self {
            evt,
            ts: Utc::now(),
            fields: Fields(Vec::with_capacity(8)),
        }
    }

    pub fn with(mut self, key: &'static str, value: impl Into<Value>) -> Self {
        self.fields.insert(key, value.into());
        self
    }

    /// Appends the event as one JSON line, serialised straight into `out` (no tree, no
    /// copies of the fields, no string per field).
    pub fn write_line(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"ts\":\"");
        write_ts(out, &self.ts);
        out.extend_from_slice(b"\",\"evt\":");
        let _ = serde_json::to_writer(&mut *out, self.evt);
        for (k, v) in &self.fields.0 {
            out.push(b',');
            let _ = serde_json::to_writer(&mut *out, k);
            out.push(b':');
            let _ = serde_json::to_writer(&mut *out, v);
        }
        out.extend_from_slice(b"}\n");
    }

    /// The event as the single JSON object that is written out.
    pub fn to_json(&self) -> Value {
        let mut obj = Map::with_capacity(self.fields.len() + 2);
        obj.insert(
            "ts".into(),
            self.ts.to_rfc3339_opts(SecondsFormat::Millis, true).into(),
        );
        obj.insert("evt".into(), self.evt.into());
        for (k, v) in self.fields.iter() {
            obj.insert(k.to_owned(), v.clone());
        }
        Value::Object(obj)
    }
}

/// `ts` as RFC 3339 with milliseconds and `Z` (what `to_rfc3339_opts(Millis, true)`
/// gives), without the formatting machinery.
fn write_ts(out: &mut Vec<u8>, ts: &chrono::DateTime<Utc>) {
    let year = ts.year();
    // Years chrono pads differently and leap seconds: its own formatter.
    if !(0..=9999).contains(&year) || ts.nanosecond() >= 1_000_000_000 {
        out.extend_from_slice(ts.to_rfc3339_opts(SecondsFormat::Millis, true).as_bytes());
        return;
    }
    let digits = |out: &mut Vec<u8>, n: u32, width: u32| {
        for p in (0..width).rev() {
            out.push(b'0' + (n / 10u32.pow(p) % 10) as u8);
        }
    };
    digits(out, year as u32, 4);
    out.push(b'-');
    digits(out, ts.month(), 2);
    out.push(b'-');
    digits(out, ts.day(), 2);
    out.push(b'T');
    digits(out, ts.hour(), 2);
    out.push(b':');
    digits(out, ts.minute(), 2);
    out.push(b':');
    digits(out, ts.second(), 2);
    out.push(b'.');
    digits(out, ts.nanosecond() / 1_000_000, 3);
    out.push(b'Z');
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
        let mut out = Vec::with_capacity(events.len() * 512);
        for e in events {
            e.write_line(&mut out);
        }
        // One write per batch; a closed stderr must not take the gateway down.
        let _ = std::io::stderr().lock().write_all(&out);
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
        let mut line = Vec::with_capacity(512);
        event.write_line(&mut line);
        if let Ok(mut w) = self.0.lock() {
            let _ = w.write_all(&line);
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
        let mut line = Vec::new();
        e.write_line(&mut line);
        let line = String::from_utf8(line).unwrap();
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let parsed: Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(parsed, e.to_json());
        assert!(line.starts_with("{\"ts\":"));
    }

    #[test]
    fn timestamps_are_written_as_chrono_writes_them() {
        use chrono::TimeZone;
        let stamps = [
            Utc::now(),
            Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
            Utc.timestamp_millis_opt(1_767_225_599_999).unwrap(),
            Utc.with_ymd_and_hms(999, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(12345, 6, 7, 8, 9, 10).unwrap(),
        ];
        for ts in stamps {
            let mut out = Vec::new();
            write_ts(&mut out, &ts);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                ts.to_rfc3339_opts(SecondsFormat::Millis, true)
            );
        }
    }

    #[test]
    fn a_field_added_twice_keeps_its_place_and_last_value() {
        let e = Event::new("x").with("a", 1).with("b", 2).with("a", 3);
        let keys: Vec<_> = e.fields.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(e.fields["a"], 3);
        assert_eq!(e.fields["missing"], Value::Null);
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
