//! Bounded in-memory records of what the fake upstream received
//! ([`RecordedRequest`]) and how each `/v1/messages` answer went ([`StreamRecord`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Maximum number of requests (and of stream records) kept; older ones are
/// dropped first so a long benchmark does not grow memory without bound.
pub const MAX_RECORDS: usize = 10_000;

/// One request as received (every path except the `/_fake/` control API).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// Lower-case header names with their values (lossy UTF-8), in received
    /// order (repeated headers are grouped after their first occurrence).
    pub headers: Vec<(String, String)>,
    /// Parsed JSON body; `Value::Null` if empty, not JSON, or recording is off.
    pub body: serde_json::Value,
    pub body_bytes: usize,
}

/// One per successful (or mid-stream faulted) `/v1/messages` answer.
#[derive(Clone, Debug)]
pub struct StreamRecord {
    /// Index of the request in [`crate::FakeUpstream::requests`] (exact while
    /// fewer than [`MAX_RECORDS`] requests were recorded since the last clear).
    pub request_index: usize,
    /// When the response headers were handed to hyper.
    pub started_at: Instant,
    /// When the final event (`message_stop` or `error`), or the whole JSON
    /// body, was handed to hyper.
    pub last_event_sent_at: Option<Instant>,
    /// The whole answer was handed to hyper.
    pub completed: bool,
    /// Final usage object the fake reported.
    pub usage: serde_json::Value,
}

/// A request the fake refused as its provider would (the `strict` module's rules).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    /// Index of the request in [`crate::FakeUpstream::requests`].
    pub request_index: usize,
    pub status: u16,
    /// The provider's message, as answered.
    pub message: String,
}

/// Ring buffers of requests and streams plus the clear epoch.
#[derive(Default)]
pub(crate) struct Records {
    epoch: u64,
    requests: VecDeque<RecordedRequest>,
    requests_evicted: usize,
    streams: VecDeque<StreamRecord>,
    streams_evicted: usize,
    refusals: VecDeque<Refusal>,
}

impl Records {
    /// Stores a request and returns its index (counted since the last clear).
    pub(crate) fn push_request(&mut self, req: RecordedRequest) -> usize {
        if self.requests.len() >= MAX_RECORDS {
            self.requests.pop_front();
            self.requests_evicted += 1;
        }
        self.requests.push_back(req);
        self.requests_evicted + self.requests.len() - 1
    }

    /// Stores a stream record and returns a handle to update it later.
    pub(crate) fn push_stream(&mut self, rec: StreamRecord) -> (u64, usize) {
        if self.streams.len() >= MAX_RECORDS {
            self.streams.pop_front();
            self.streams_evicted += 1;
        }
        self.streams.push_back(rec);
        (self.epoch, self.streams_evicted + self.streams.len() - 1)
    }

    fn stream_mut(&mut self, epoch: u64, index: usize) -> Option<&mut StreamRecord> {
        if epoch != self.epoch {
            return None;
        }
        let pos = index.checked_sub(self.streams_evicted)?;
        self.streams.get_mut(pos)
    }

    /// Notes a refusal (at most [`MAX_RECORDS`] kept, the oldest dropped first).
    pub(crate) fn push_refusal(&mut self, refusal: Refusal) {
        if self.refusals.len() >= MAX_RECORDS {
            self.refusals.pop_front();
        }
        self.refusals.push_back(refusal);
    }

    pub(crate) fn refusals(&self) -> Vec<Refusal> {
        self.refusals.iter().cloned().collect()
    }

    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        self.requests.iter().cloned().collect()
    }

    pub(crate) fn streams(&self) -> Vec<StreamRecord> {
        self.streams.iter().cloned().collect()
    }

    /// Forgets everything; indices restart at 0 and in-flight streams stop
    /// updating their (now gone) records.
    pub(crate) fn clear(&mut self) {
        self.epoch += 1;
        self.requests.clear();
        self.requests_evicted = 0;
        self.streams.clear();
        self.streams_evicted = 0;
        self.refusals.clear();
    }
}

/// Shared, lock-protected [`Records`].
#[derive(Clone, Default)]
pub(crate) struct RecordStore(Arc<Mutex<Records>>);

impl RecordStore {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Records> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Handle held by a response body to mark its stream record finished.
pub(crate) struct StreamTracker {
    store: RecordStore,
    epoch: u64,
    index: usize,
}

impl StreamTracker {
    /// Creates the record (started now) and returns its tracker.
    pub(crate) fn start(
        store: &RecordStore,
        request_index: usize,
        usage: serde_json::Value,
    ) -> StreamTracker {
        let rec = StreamRecord {
            request_index,
            started_at: Instant::now(),
            last_event_sent_at: None,
            completed: false,
            usage,
        };
        let (epoch, index) = store.lock().push_stream(rec);
        StreamTracker {
            store: store.clone(),
            epoch,
            index,
        }
    }

    /// Marks the answer as fully handed to hyper.
    pub(crate) fn complete(&self) {
        let now = Instant::now();
        if let Some(rec) = self.store.lock().stream_mut(self.epoch, self.index) {
            rec.last_event_sent_at = Some(now);
            rec.completed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn req(i: usize) -> RecordedRequest {
        RecordedRequest {
            method: "GET".into(),
            path: format!("/{i}"),
            query: None,
            headers: vec![],
            body: serde_json::Value::Null,
            body_bytes: 0,
        }
    }

    #[test]
    fn bounded_and_clearable() {
        let store = RecordStore::default();
        for i in 0..MAX_RECORDS + 5 {
            assert_eq!(store.lock().push_request(req(i)), i);
        }
        let all = store.lock().requests();
        assert_eq!(all.len(), MAX_RECORDS);
        assert_eq!(all[0].path, "/5");
        let t = StreamTracker::start(&store, 3, serde_json::Value::Null);
        store.lock().clear();
        t.complete();
        assert!(store.lock().streams().is_empty());
        assert_eq!(store.lock().push_request(req(0)), 0);
    }
}
