//! Response bodies: a lazily generated, paced SSE stream ([`SseBody`]) and
//! the small [`FakeBody`] enum hyper serves. No task is spawned per stream:
//! the state machine advances only when hyper polls it, so a client that goes
//! away simply makes hyper drop the body and generation stops.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

use crate::record::StreamTracker;
use crate::render::{OVERLOADED_EVENT, Rendered};

/// Pause before an injected abort so hyper flushes the bytes already handed
/// to it (hyper drops its write buffer when a body errors).
const ABORT_FLUSH_PAUSE: Duration = Duration::from_millis(20);

/// Error used to make hyper abort a connection (injected resets).
#[derive(Debug)]
pub(crate) struct Abort;

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fake upstream: injected connection reset")
    }
}

impl std::error::Error for Abort {}

/// What to do to the stream after some deltas.
#[derive(Clone, Copy, Debug)]
pub(crate) enum StreamFault {
    None,
    /// Send the overloaded `error` event after this many deltas, then end.
    Error(u32),
    /// Abort the connection after this many deltas.
    Reset(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Start,
    UnpacedRest,
    HeadRest,
    Deltas,
    Fault,
    Tail,
    Aborting,
    Done,
}

/// Lazily generated Anthropic SSE stream.
pub(crate) struct SseBody {
    rendered: Arc<Rendered>,
    start: Bytes,
    phase: Phase,
    next_delta: usize,
    fault: StreamFault,
    sleep: Option<Pin<Box<Sleep>>>,
    tracker: StreamTracker,
}

impl SseBody {
    pub(crate) fn new(
        rendered: Arc<Rendered>,
        start: Bytes,
        fault: StreamFault,
        tracker: StreamTracker,
    ) -> SseBody {
        SseBody {
            rendered,
            start,
            phase: Phase::Start,
            next_delta: 0,
            fault,
            sleep: None,
            tracker,
        }
    }

    fn unpaced(&self) -> bool {
        matches!(self.fault, StreamFault::None)
            && self.rendered.config.first_token_delay_ms == 0
            && self.rendered.config.token_interval_ms == 0
    }

    /// Polls a (lazily created) sleep of `ms`; `Ready` once it elapsed.
    fn poll_delay(&mut self, cx: &mut Context<'_>, ms: u64) -> Poll<()> {
        if ms == 0 {
            return Poll::Ready(());
        }
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(Duration::from_millis(ms))));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.sleep = None;
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn finish(&mut self, data: Bytes) -> Poll<Option<Result<Frame<Bytes>, Abort>>> {
        self.phase = Phase::Done;
        self.tracker.complete();
        Poll::Ready(Some(Ok(Frame::data(data))))
    }
}

fn data(b: Bytes) -> Poll<Option<Result<Frame<Bytes>, Abort>>> {
    Poll::Ready(Some(Ok(Frame::data(b))))
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Abort;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Abort>>> {
        let this = &mut *self;
        loop {
            match this.phase {
                Phase::Start => {
                    // Unpaced and unfaulted: the whole stream in two frames,
                    // message_start + the pre-rendered rest.
                    this.phase = if this.unpaced() {
                        Phase::UnpacedRest
                    } else {
                        Phase::HeadRest
                    };
                    return data(std::mem::take(&mut this.start));
                }
                Phase::UnpacedRest => {
                    let rest = this.rendered.unpaced_rest.clone();
                    return this.finish(rest);
                }
                Phase::HeadRest => {
                    this.phase = Phase::Deltas;
                    return data(this.rendered.head_rest.clone());
                }
                Phase::Deltas => {
                    let i = this.next_delta;
                    let n = this.rendered.deltas.len();
                    let fault_at = match this.fault {
                        StreamFault::None => None,
                        StreamFault::Error(k) | StreamFault::Reset(k) => Some((k as usize).min(n)),
                    };
                    if fault_at == Some(i) {
                        this.phase = Phase::Fault;
                        continue;
                    }
                    if i >= n {
                        this.phase = Phase::Tail;
                        continue;
                    }
                    let cfg = &this.rendered.config;
                    let ms = if i == 0 {
                        cfg.first_token_delay_ms
                    } else {
                        cfg.token_interval_ms
                    };
                    if this.poll_delay(cx, ms).is_pending() {
                        return Poll::Pending;
                    }
                    this.next_delta += 1;
                    return data(this.rendered.deltas[i].clone());
                }
                Phase::Fault => match this.fault {
                    StreamFault::Error(_) => {
                        let event = match &this.rendered.config.mid_stream_error_message {
                            None => Bytes::from_static(OVERLOADED_EVENT.as_bytes()),
                            Some(m) => {
                                let data = serde_json::json!({"type": "error", "error": {"type": "overloaded_error", "message": m}});
                                Bytes::from(format!("event: error\ndata: {data}\n\n"))
                            }
                        };
                        return this.finish(event);
                    }
                    _ => this.phase = Phase::Aborting,
                },
                Phase::Tail => {
                    let tail = this.rendered.tail.clone();
                    return this.finish(tail);
                }
                Phase::Aborting => {
                    let pause = ABORT_FLUSH_PAUSE.as_millis() as u64;
                    if this.poll_delay(cx, pause).is_pending() {
                        return Poll::Pending;
                    }
                    this.phase = Phase::Done;
                    return Poll::Ready(Some(Err(Abort)));
                }
                Phase::Done => return Poll::Ready(None),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.phase == Phase::Done
    }
}

/// Body type of every response the fake serves.
pub(crate) enum FakeBody {
    /// A complete, pre-rendered body (`content-length` is set from it).
    Full(Option<Bytes>),
    /// A paced SSE stream.
    Sse(Box<SseBody>),
    /// An SSE body re-framed as an AWS event stream (the Bedrock face).
    EventStream(Box<crate::clouds::EventStreamBody>),
    /// Some bytes, then an injected connection abort.
    Truncated {
        data: Option<Bytes>,
        pause: Option<Pin<Box<Sleep>>>,
    },
}

impl FakeBody {
    pub(crate) fn full(b: impl Into<Bytes>) -> FakeBody {
        FakeBody::Full(Some(b.into()))
    }

    pub(crate) fn empty() -> FakeBody {
        FakeBody::Full(None)
    }

    pub(crate) fn truncated(b: Bytes) -> FakeBody {
        FakeBody::Truncated {
            data: Some(b),
            pause: None,
        }
    }
}

impl Body for FakeBody {
    type Data = Bytes;
    type Error = Abort;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Abort>>> {
        match self.get_mut() {
            FakeBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            FakeBody::Sse(s) => Pin::new(s.as_mut()).poll_frame(cx),
            FakeBody::EventStream(s) => Pin::new(s.as_mut()).poll_frame(cx),
            FakeBody::Truncated { data: d, pause } => {
                if let Some(b) = d.take() {
                    return data(b);
                }
                let sleep =
                    pause.get_or_insert_with(|| Box::pin(tokio::time::sleep(ABORT_FLUSH_PAUSE)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(Abort))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            FakeBody::Full(b) => b.is_none(),
            FakeBody::Sse(s) => s.is_end_stream(),
            FakeBody::EventStream(_) | FakeBody::Truncated { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            FakeBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            FakeBody::Full(None) => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
