//! The request body's clock: while a handler reads a body, at least [`MIN_PROGRESS`]
//! bytes (or the rest of the body) must arrive within `timeouts.request_body_idle_ms`,
//! else reading fails with [`BodyTimeout`] and the handler answers 408.
//!
//! The clock runs only while the body is awaited and the client owes bytes: a body that
//! is not being read, or a request whose body is complete, has no clock, so the time a
//! model takes to answer is never counted. Counting progress in bytes rather than chunks
//! means a client trickling one byte every few seconds is cut as surely as a silent one.

use std::error::Error;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::Sleep;

type BoxError = Box<dyn Error + Send + Sync>;

/// Bytes that count as progress and restart the clock.
pub const MIN_PROGRESS: usize = 1024;

/// The body stopped arriving: fewer than [`MIN_PROGRESS`] bytes in the allowed time.
#[derive(Debug, thiserror::Error)]
#[error("the request body arrived too slowly")]
pub struct BodyTimeout;

/// Whether a body read failed because of [`BodyTimeout`] (through any wrapping, such as
/// axum's body error or `http_body_util::Limited`).
pub fn is_body_timeout(err: &(dyn Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.is::<BodyTimeout>() {
            return true;
        }
        cur = e.source();
    }
    false
}

/// A request body with its clock.
pub struct Watched {
    inner: Incoming,
    window: Duration,
    /// Bytes since the clock last restarted.
    progress: usize,
    /// Created on the first wait and reset for each later window.
    clock: Option<Pin<Box<Sleep>>>,
    /// Whether `clock` runs for the current window.
    armed: bool,
}

impl Watched {
    pub fn new(inner: Incoming, window: Duration) -> Self {
        Watched {
            inner,
            window,
            progress: 0,
            clock: None,
            armed: false,
        }
    }

    fn advance(&mut self, bytes: usize) {
        self.progress += bytes;
        if self.progress >= MIN_PROGRESS {
            self.progress = 0;
            self.armed = false;
        }
    }

    /// The client owes bytes: the window's clock runs (from the first wait in the window).
    fn wait(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let deadline = tokio::time::Instant::now() + self.window;
        let clock = self
            .clock
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if !self.armed {
            clock.as_mut().reset(deadline);
            self.armed = true;
        }
        match clock.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(BodyTimeout.into()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.advance(frame.data_ref().map_or(0, Bytes::len));
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => {
                this.armed = false;
                Poll::Ready(None)
            }
            Poll::Pending => this.wait(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn timeouts_are_found_through_wrapping() {
        let boxed: BoxError = Box::new(axum::Error::new(BodyTimeout));
        assert!(is_body_timeout(boxed.as_ref()));
        let other: BoxError = Box::new(axum::Error::new(std::io::Error::other("reset")));
        assert!(!is_body_timeout(other.as_ref()));
    }
}
