//! The soak phase's traffic (see [`crate::soak`]): workers sending a fixed mix at a steady
//! rate until a deadline, the upstream faults injected meanwhile, and what the answers were.
//!
//! The mix repeats every [`MIX`]`.len()` requests, taken in turn by all workers: JSON and
//! streamed `/v1/messages`, streams the client hangs up on after the first delta, the OpenAI
//! front door (`/v1/chat/completions`, JSON and streamed), `Idempotency-Key` pairs (the
//! same key and body sent twice in a row: the second is replayed), half of it as a capped
//! signed-in person (session tokens, so spend is reserved), refresh grants
//! (`POST /oauth/token`) and sign-ins (a freshly minted session token). Faults go to the
//! fakes' queues on a clock, not per request: each fault hits whichever request reaches
//! that fake next.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use fake_upstream::Fault;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use memchr::memmem;

use crate::client::{CLIENT_KEY, Conn};
use crate::reservation::{SESSION_SECRET, token};

/// Signed-in people (each with a binding cap); worker `w` is person `w % PEOPLE`.
pub const PEOPLE: usize = 4;
/// Longest wait for one answer.
const REQUEST_LIMIT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the fault clock ticks.
pub const FAULT_TICK: Duration = Duration::from_millis(100);
/// Consecutive 503s sent to upstream `a` every [`BURST_EVERY`] ticks: more than the
/// breaker's `breaker_failures`, so its breaker opens and traffic fails over to `b`.
pub const BURST: usize = 25;
const BURST_EVERY: u64 = 300;

/// Who sends a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    /// The bench's client key (no spend reservation).
    Key,
    /// The worker's signed-in person, capped.
    Person,
}

/// One step of the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Json(Who),
    Stream(Who),
    /// A stream the client leaves after its first delta.
    HangUp(Who),
    ChatJson(Who),
    ChatStream(Who),
    /// The same `Idempotency-Key` and body twice in a row (stream or not).
    Repeat(Who, bool),
    /// `POST /oauth/token` with the worker's refresh token.
    Refresh,
    /// A new session token for the worker's person (a sign-in's outcome).
    SignIn,
}

use Who::{Key, Person};

/// The mix, in order; 22 steps, 23 inference requests (a repeat is two).
const MIX: [Step; 22] = [
    Step::Json(Key),
    Step::Stream(Person),
    Step::Json(Person),
    Step::HangUp(Key),
    Step::ChatJson(Key),
    Step::Stream(Key),
    Step::Repeat(Key, false),
    Step::ChatStream(Person),
    Step::Json(Key),
    Step::HangUp(Person),
    Step::Refresh,
    Step::Json(Person),
    Step::Stream(Person),
    Step::ChatJson(Person),
    Step::Repeat(Person, true),
    Step::Json(Key),
    Step::ChatStream(Key),
    Step::Stream(Key),
    Step::Json(Person),
    Step::SignIn,
    Step::Stream(Person),
    Step::Json(Key),
];

/// What the traffic did; shared by the workers and read by the sampler.
#[derive(Default)]
pub struct Tally {
    /// Inference requests sent (every attempt, replays included).
    pub sent: AtomicU64,
    /// Answered by routing: the gateway sent headers, not a replay and not a refusal
    /// before routing (see [`refused_before_routing`]).
    pub answered: AtomicU64,
    /// Answers with `idempotent-replayed: true`.
    pub replayed: AtomicU64,
    /// Refused before routing (401, 403, 409, 422).
    pub refused: AtomicU64,
    /// No answer (connection error or timeout before the headers).
    pub failed: AtomicU64,
    /// Streams the client left after the first delta.
    pub hung_up: AtomicU64,
    /// Answers whose body broke off (an upstream reset relayed).
    pub body_errors: AtomicU64,
    pub refreshes: AtomicU64,
    pub refresh_failures: AtomicU64,
    pub sign_ins: AtomicU64,
    pub faults_a: AtomicU64,
    pub faults_b: AtomicU64,
    /// Set by the sampler from `/metrics`: upstream `a`'s breaker is open (no faults are
    /// queued for it then, so the queue cannot outgrow the breaker's trials).
    pub a_down: AtomicBool,
    /// Answered statuses, by status.
    pub statuses: Mutex<BTreeMap<u16, u64>>,
    pub first_error: Mutex<Option<String>>,
}

impl Tally {
    fn error(&self, e: &anyhow::Error) {
        if let Ok(mut f) = self.first_error.lock() {
            f.get_or_insert_with(|| format!("{e:#}"));
        }
    }

    fn status(&self, s: u16) {
        if let Ok(mut m) = self.statuses.lock() {
            *m.entry(s).or_default() += 1;
        }
    }
}

/// Statuses the gateway answers itself before routing in this mix: a session it does not
/// take (401/403), an `Idempotency-Key` still running or lost (409) or reused with another
/// body (422). Nothing else here refuses: no traffic limits, caps far above the spend.
pub fn refused_before_routing(status: u16) -> bool {
    matches!(status, 401 | 403 | 409 | 422)
}

/// A worker's signed-in person and tokens.
struct Session {
    sub: String,
    access: String,
    refresh: String,
}

impl Session {
    fn sign_in(sub: String) -> anyhow::Result<Session> {
        Ok(Session {
            access: token(&sub)?,
            refresh: sealed_refresh(&sub)?,
            sub,
        })
    }
}

/// A Gatehouse refresh token for `sub` as its refresh grant would issue one, carrying the
/// bench issuer's refresh token `bench-rt:<sub>`.
fn sealed_refresh(sub: &str) -> anyhow::Result<String> {
    use gatehouse_engine::identity::RefreshPayload;
    use gatehouse_engine::identity::keys::{KeyRing, SealKind};
    let keys = KeyRing::new(&[gatehouse_engine::secret::Secret::new(SESSION_SECRET)]);
    keys.seal(
        SealKind::RefreshToken,
        &RefreshPayload {
            sub: sub.to_owned(),
            idp_refresh_token: Some(format!("bench-rt:{sub}")),
            iat: chrono::Utc::now().timestamp(),
            id: uuid::Uuid::new_v4().to_string(),
        },
    )
    .context("cannot seal a refresh token")
}

/// Runs `workers` workers until `deadline`, together at about `rps` steps per second.
pub async fn drive(
    addr: SocketAddr,
    workers: usize,
    rps: f64,
    deadline: Instant,
    tally: &Tally,
) -> anyhow::Result<()> {
    let next = AtomicU64::new(0);
    let period = Duration::from_secs_f64(workers as f64 / rps.max(1.0));
    let start = tokio::time::Instant::now();
    let mut people = Vec::new();
    for w in 0..workers {
        people.push(Session::sign_in(format!("soak-{}", w % PEOPLE))?);
    }
    let run = |w: usize, mut me: Session| {
        let next = &next;
        async move {
            // Workers start spread over one period, so the rate is even.
            let first = start + period.mul_f64(w as f64 / workers as f64);
            let mut tick = tokio::time::interval_at(first, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut link: Option<Link> = None;
            // Bounded by the deadline: one step per tick.
            while Instant::now() < deadline {
                tick.tick().await;
                if Instant::now() >= deadline {
                    break;
                }
                let k = next.fetch_add(1, Ordering::Relaxed);
                let step = MIX[(k % MIX.len() as u64) as usize];
                step_once(addr, &mut link, &mut me, step, tally).await;
            }
        }
    };
    futures_util::future::join_all(people.into_iter().enumerate().map(|(w, p)| run(w, p))).await;
    Ok(())
}

async fn step_once(
    addr: SocketAddr,
    link: &mut Option<Link>,
    me: &mut Session,
    step: Step,
    tally: &Tally,
) {
    let auth = |who: Who, me: &Session| match who {
        Key => ("x-api-key", CLIENT_KEY.to_owned()),
        Person => ("authorization", format!("Bearer {}", me.access)),
    };
    let call = |who: Who, path: &'static str, body: Bytes, hang_up: bool| Call {
        path,
        auth: auth(who, me),
        body,
        idempotency_key: None,
        hang_up,
        form: false,
    };
    let calls = match step {
        Step::Json(w) => vec![call(w, "/v1/messages", messages(false), false)],
        Step::Stream(w) => vec![call(w, "/v1/messages", messages(true), false)],
        Step::HangUp(w) => vec![call(w, "/v1/messages", messages(true), true)],
        Step::ChatJson(w) => vec![call(w, CHAT, chat(false), false)],
        Step::ChatStream(w) => vec![call(w, CHAT, chat(true), false)],
        Step::Repeat(w, stream) => {
            let key = uuid::Uuid::new_v4().to_string();
            let one = Call {
                idempotency_key: Some(key),
                ..call(w, "/v1/messages", messages(stream), false)
            };
            vec![one.clone(), one]
        }
        Step::SignIn => {
            match Session::sign_in(me.sub.clone()) {
                Ok(p) => {
                    *me = p;
                    tally.sign_ins.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => tally.error(&e),
            }
            return;
        }
        Step::Refresh => {
            refresh(addr, link, me, tally).await;
            return;
        }
    };
    for c in calls {
        tally.sent.fetch_add(1, Ordering::Relaxed);
        match send(addr, link, &c).await {
            Ok(a) => {
                if a.replayed {
                    tally.replayed.fetch_add(1, Ordering::Relaxed);
                } else if refused_before_routing(a.status) {
                    tally.refused.fetch_add(1, Ordering::Relaxed);
                } else {
                    tally.answered.fetch_add(1, Ordering::Relaxed);
                }
                tally.status(a.status);
                if a.hung_up {
                    tally.hung_up.fetch_add(1, Ordering::Relaxed);
                }
                if a.body_error {
                    tally.body_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                tally.failed.fetch_add(1, Ordering::Relaxed);
                tally.error(&e);
            }
        }
    }
}

/// Redeems the worker's refresh token; a refused one means signing in again.
async fn refresh(addr: SocketAddr, link: &mut Option<Link>, me: &mut Session, tally: &Tally) {
    let c = Call {
        path: "/oauth/token",
        auth: ("x-bench", "refresh".to_owned()),
        body: Bytes::from(format!(
            "grant_type=refresh_token&refresh_token={}",
            me.refresh
        )),
        idempotency_key: None,
        hang_up: false,
        form: true,
    };
    let result = async {
        let a = send(addr, link, &c).await?;
        let v: serde_json::Value = serde_json::from_slice(&a.body)
            .with_context(|| format!("refresh answered {}", a.status))?;
        match (v["access_token"].as_str(), v["refresh_token"].as_str()) {
            (Some(at), Some(rt)) if a.status == StatusCode::OK.as_u16() => {
                me.access = at.to_owned();
                me.refresh = rt.to_owned();
                anyhow::Ok(())
            }
            _ => bail!("refresh answered {}: {v}", a.status),
        }
    }
    .await;
    match result {
        Ok(()) => {
            tally.refreshes.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => {
            tally.refresh_failures.fetch_add(1, Ordering::Relaxed);
            tally.error(&e.context("refresh grant"));
            if let Ok(p) = Session::sign_in(me.sub.clone()) {
                *me = p;
            }
        }
    }
}

const CHAT: &str = "/v1/chat/completions";

fn messages(stream: bool) -> Bytes {
    crate::client::messages_body(stream)
}

fn chat(stream: bool) -> Bytes {
    Bytes::from(format!(
        "{{\"model\":\"claude-sonnet-4-6\",\"max_tokens\":64,\"stream\":{stream},\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}]}}"
    ))
}

/// One request to send.
#[derive(Clone)]
struct Call {
    path: &'static str,
    auth: (&'static str, String),
    body: Bytes,
    idempotency_key: Option<String>,
    /// Leave after the first delta (and close the connection).
    hang_up: bool,
    /// A form body (`/oauth/token`) rather than JSON.
    form: bool,
}

/// What came back.
struct Answer {
    status: u16,
    replayed: bool,
    hung_up: bool,
    body_error: bool,
    body: Bytes,
}

/// Sends `c` on the worker's connection (opened when there is none; dropped after a hang-up
/// or an error, so the next request opens a fresh one).
async fn send(addr: SocketAddr, link: &mut Option<Link>, c: &Call) -> anyhow::Result<Answer> {
    let l = match link {
        Some(l) => l,
        None => link.insert(Link::connect(addr).await?),
    };
    let out = tokio::time::timeout(REQUEST_LIMIT, l.exchange(addr, c))
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within {REQUEST_LIMIT:?}")));
    if !matches!(&out, Ok(a) if !a.hung_up && !a.body_error) {
        *link = None;
    }
    out
}

/// One keep-alive HTTP/1.1 connection.
struct Link {
    conn: crate::client::KeepAlive,
}

impl Link {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Link> {
        let conn = crate::client::KeepAlive::connect(addr, CONNECT_TIMEOUT).await?;
        Ok(Link { conn })
    }

    async fn exchange(&mut self, addr: SocketAddr, c: &Call) -> anyhow::Result<Answer> {
        let content_type = if c.form {
            "application/x-www-form-urlencoded"
        } else {
            "application/json"
        };
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(c.path)
            .header("host", addr.to_string())
            .header(c.auth.0, &c.auth.1)
            .header("content-type", content_type)
            .header("anthropic-version", "2023-06-01")
            .header("x-client-request-id", uuid::Uuid::new_v4().to_string());
        if let Some(k) = &c.idempotency_key {
            req = req.header("idempotency-key", k);
        }
        let req = req.body(Full::new(c.body.clone()))?;
        self.conn.sender.ready().await?;
        let resp = self.conn.sender.send_request(req).await?;
        let status = resp.status().as_u16();
        let replayed = resp
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v.as_bytes() == b"true");
        let mut body = resp.into_body();
        let mut seen = Vec::new();
        let mut answer = Answer {
            status,
            replayed,
            hung_up: false,
            body_error: false,
            body: Bytes::new(),
        };
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                answer.body_error = true;
                break;
            };
            let Some(data) = frame.data_ref() else {
                continue;
            };
            seen.extend_from_slice(data);
            if c.hang_up && memmem::find(&seen, b"delta").is_some() {
                answer.hung_up = true;
                break;
            }
        }
        answer.body = Bytes::from(seen);
        Ok(answer)
    }
}

/// Queues faults on the fakes until `deadline`, on a clock of [`FAULT_TICK`]: on `a` one
/// per tick (503, 529, an `error` event mid-stream, a reset before the headers, a reset
/// mid-stream, 500 in turn; a 429 without `retry-after` every 50 ticks; a burst of
/// [`BURST`] 503s every [`BURST_EVERY`] ticks), none while `a`'s breaker is open; on `b`
/// one every 10 ticks (503 or an `error` event mid-stream).
pub async fn faults(a: SocketAddr, b: SocketAddr, deadline: Instant, tally: &Tally) {
    let (Ok(mut ca), Ok(mut cb)) = (Conn::connect(a).await, Conn::connect(b).await) else {
        tally.error(&anyhow::anyhow!("cannot reach the fakes' control API"));
        return;
    };
    let status = |status| Fault::Status {
        status,
        retry_after: None,
        error_type: None,
        message: None,
    };
    let cycle = [
        status(503),
        status(529),
        Fault::MidStreamError { after_deltas: 2 },
        Fault::ResetBeforeHeaders,
        Fault::ResetMidStream { after_deltas: 2 },
        status(500),
    ];
    let mut tick = tokio::time::interval(FAULT_TICK);
    let mut n: u64 = 0;
    // Bounded by the deadline: one round per tick.
    while Instant::now() < deadline {
        tick.tick().await;
        n += 1;
        if !tally.a_down.load(Ordering::Relaxed) {
            let mut batch = vec![cycle[(n % cycle.len() as u64) as usize].clone()];
            if n.is_multiple_of(50) {
                batch.push(status(429));
            }
            if n.is_multiple_of(BURST_EVERY) {
                batch.extend(std::iter::repeat_n(status(503), BURST));
            }
            for f in batch {
                if post_fault(&mut ca, &f).await {
                    tally.faults_a.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if n.is_multiple_of(10) {
            let f = if n.is_multiple_of(20) {
                status(503)
            } else {
                Fault::MidStreamError { after_deltas: 2 }
            };
            if post_fault(&mut cb, &f).await {
                tally.faults_b.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

async fn post_fault(conn: &mut Conn, f: &Fault) -> bool {
    let Ok(body) = serde_json::to_string(f) else {
        return false;
    };
    matches!(
        conn.post_collect("/_fake/faults", Bytes::from(body)).await,
        Ok((StatusCode::NO_CONTENT, _))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_has_every_kind_and_both_callers() {
        let has = |f: fn(&Step) -> bool| MIX.iter().any(f);
        assert!(has(|s| matches!(s, Step::Json(Key))));
        assert!(has(|s| matches!(s, Step::Json(Person))));
        assert!(has(|s| matches!(s, Step::HangUp(Key))));
        assert!(has(|s| matches!(s, Step::HangUp(Person))));
        assert!(has(|s| matches!(s, Step::ChatStream(_))));
        assert!(has(|s| matches!(s, Step::Repeat(_, true))));
        assert!(has(|s| matches!(s, Step::Refresh)));
        assert!(has(|s| matches!(s, Step::SignIn)));
        assert!(refused_before_routing(409) && !refused_before_routing(429));
    }

    #[test]
    fn refresh_tokens_open_with_the_session_secret() {
        use gatehouse_engine::identity::RefreshPayload;
        use gatehouse_engine::identity::keys::{KeyRing, SealKind};
        let sealed = sealed_refresh("soak-1").unwrap_or_default();
        let keys = KeyRing::new(&[gatehouse_engine::secret::Secret::new(SESSION_SECRET)]);
        let p: Option<RefreshPayload> = keys.open(SealKind::RefreshToken, &sealed).ok();
        assert_eq!(
            p.and_then(|p| p.idp_refresh_token).as_deref(),
            Some("bench-rt:soak-1")
        );
    }
}
