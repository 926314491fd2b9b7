//! The phases of one connection, for its head and idle clocks.
//!
//! ```text
//! opened ──▶ Head ──(request handed to the router)──▶ Busy ──(last response done)──▶ Idle
//!              ▲                                                                    │
//!              └────────────────────(first byte of the next request)────────────────┘
//! ```
//!
//! `Head` must end within the head timeout, `Idle` within the keep-alive timeout; `Busy`
//! has no clock (the request body has its own, see `body`). Phase changes never wake the
//! watchdog (that would cost a task wake-up per request): it looks again at least every
//! `min(head, idle)`, so an idle clock fires on time and a head clock at most that much
//! late. A request counts as busy
//! from the moment hyper hands it over until its response body is finished or dropped
//! ([`InFlight`] rides along in [`Tracked`]). On HTTP/2, bytes between requests are PINGs
//! and window updates, not the start of a head, so an HTTP/2 connection goes from `Idle`
//! to `Busy` only.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// Which clock ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    Head,
    Idle,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Head(Instant),
    Busy,
    Idle(Instant),
}

struct State {
    phase: Phase,
    in_flight: usize,
    h2: bool,
}

/// Shared by the connection's IO, its requests and its watchdog.
pub struct Activity {
    state: Mutex<State>,
    /// True while `Idle` on HTTP/1: the next byte read starts a head.
    between_requests: AtomicBool,
}

impl Activity {
    /// A connection just opened: its first head is due.
    pub fn new(now: Instant) -> Self {
        Activity {
            state: Mutex::new(State {
                phase: Phase::Head(now),
                in_flight: 0,
                h2: false,
            }),
            between_requests: AtomicBool::new(false),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The lock guards plain values; a panic elsewhere cannot leave them half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// hyper handed a request over.
    pub fn begin(self: &Arc<Self>, version: http::Version) -> InFlight {
        let mut s = self.state();
        s.in_flight += 1;
        s.h2 |= version == http::Version::HTTP_2;
        s.phase = Phase::Busy;
        self.between_requests.store(false, Ordering::Relaxed);
        InFlight(self.clone())
    }

    fn end(&self) {
        let mut s = self.state();
        s.in_flight = s.in_flight.saturating_sub(1);
        if s.in_flight == 0 {
            s.phase = Phase::Idle(Instant::now());
            self.between_requests.store(!s.h2, Ordering::Relaxed);
        }
    }

    /// Bytes arrived from the client.
    fn read(&self) {
        if !self.between_requests.swap(false, Ordering::Relaxed) {
            return;
        }
        let mut s = self.state();
        if let Phase::Idle(_) = s.phase {
            s.phase = Phase::Head(Instant::now());
        }
    }

    /// An idle connection asked to close gets one more idle period to do so.
    pub fn restart_idle(&self, now: Instant) {
        let mut s = self.state();
        if let Phase::Idle(_) = s.phase {
            s.phase = Phase::Idle(now);
        }
    }

    fn due(&self, head: Duration, idle: Duration) -> Option<(Instant, Expiry)> {
        match self.state().phase {
            Phase::Head(since) => Some((since + head, Expiry::Head)),
            Phase::Idle(since) => Some((since + idle, Expiry::Idle)),
            Phase::Busy => None,
        }
    }

    /// Resolves when the current phase outlives its clock (looking again at least every
    /// `min(head, idle)`, since phase changes do not wake it).
    pub async fn expired(&self, head: Duration, idle: Duration) -> Expiry {
        let recheck = head.min(idle);
        loop {
            let now = Instant::now();
            match self.due(head, idle) {
                Some((at, why)) if at <= now => return why,
                Some((at, _)) => tokio::time::sleep_until(at.min(now + recheck)).await,
                None => tokio::time::sleep_until(now + recheck).await,
            }
        }
    }
}

/// One request between hand-over and the end of its response.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// The connection's IO, reporting reads to its [`Activity`].
pub struct Watched<IO> {
    io: IO,
    activity: Arc<Activity>,
}

impl<IO> Watched<IO> {
    pub fn new(io: IO, activity: Arc<Activity>) -> Self {
        Watched { io, activity }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A response body that keeps its request [`InFlight`] until it is finished or dropped.
pub struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl Tracked {
    pub fn new(body: Body, in_flight: InFlight) -> Self {
        Tracked {
            body,
            _in_flight: in_flight,
        }
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: Duration = Duration::from_secs(10);
    const IDLE: Duration = Duration::from_secs(75);

    #[tokio::test(start_paused = true)]
    async fn phases_and_their_clocks() {
        let start = Instant::now();
        let a = Arc::new(Activity::new(start));
        assert_eq!(a.due(HEAD, IDLE), Some((start + HEAD, Expiry::Head)));
        let req = a.begin(http::Version::HTTP_11);
        assert_eq!(a.due(HEAD, IDLE), None);
        // Bytes of a body while busy start nothing.
        a.read();
        assert_eq!(a.due(HEAD, IDLE), None);
        tokio::time::advance(Duration::from_secs(600)).await;
        drop(req);
        let idle_since = Instant::now();
        assert_eq!(a.due(HEAD, IDLE), Some((idle_since + IDLE, Expiry::Idle)));
        tokio::time::advance(Duration::from_secs(5)).await;
        a.read();
        let head_since = Instant::now();
        assert_eq!(a.due(HEAD, IDLE), Some((head_since + HEAD, Expiry::Head)));
        a.read();
        assert_eq!(a.due(HEAD, IDLE), Some((head_since + HEAD, Expiry::Head)));
    }

    #[tokio::test(start_paused = true)]
    async fn http2_stays_idle_through_control_frames() {
        let a = Arc::new(Activity::new(Instant::now()));
        let one = a.begin(http::Version::HTTP_2);
        let two = a.begin(http::Version::HTTP_2);
        drop(one);
        assert_eq!(a.due(HEAD, IDLE), None, "one stream still open");
        drop(two);
        a.read();
        assert!(matches!(a.due(HEAD, IDLE), Some((_, Expiry::Idle))));
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_waits_out_busy_phases() {
        let a = Arc::new(Activity::new(Instant::now()));
        let req = a.begin(http::Version::HTTP_11);
        let watch = {
            let a = a.clone();
            tokio::spawn(async move { a.expired(HEAD, IDLE).await })
        };
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!watch.is_finished());
        let ended = Instant::now();
        drop(req);
        assert_eq!(watch.await.ok(), Some(Expiry::Idle));
        assert_eq!(Instant::now(), ended + IDLE, "the idle clock fires on time");
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_after_an_idle_spell_is_noticed_within_one_head_period() {
        let a = Arc::new(Activity::new(Instant::now()));
        drop(a.begin(http::Version::HTTP_11));
        let watch = {
            let a = a.clone();
            tokio::spawn(async move { a.expired(HEAD, IDLE).await })
        };
        tokio::time::sleep(Duration::from_secs(30)).await;
        let head_since = Instant::now();
        a.read();
        assert_eq!(watch.await.ok(), Some(Expiry::Head));
        let late = Instant::now() - (head_since + HEAD);
        assert!(late <= HEAD, "at most one head period late: {late:?}");
    }
}
