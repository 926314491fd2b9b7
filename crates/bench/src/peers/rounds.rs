//! Sequential (concurrency 1) measurements of several paths in interleaved rounds:
//! each path keeps one keep-alive connection, and every round sends a slice of the
//! requests on every path in turn (starting with a different path each round), so drift
//! on a shared machine (other builds, a peer's background work) lands on every path
//! alike instead of on whichever was measured first. The samples of all rounds are
//! pooled per path. Bounded by a request count per path and a deadline.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;

use crate::client::{Auth, Conn};
use crate::load::{Percentiles, Sequential};
use crate::procs::Children;

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const STREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for the processes to go quiet before a round.
const SETTLE_MAX: Duration = Duration::from_secs(30);

/// One path's state during the rounds.
struct Lane {
    addr: SocketAddr,
    auth: Auth,
    conn: Option<Conn>,
    totals: Vec<Duration>,
    firsts: Vec<Duration>,
    /// Failed measured requests.
    errors: u64,
    /// Failed requests, warm-up included.
    failures: u64,
    failed: Option<String>,
}

/// What one run of rounds sends.
pub struct Plan<'a> {
    pub body: &'a Bytes,
    pub streaming: bool,
    pub warmup: usize,
    pub n: usize,
    pub rounds: usize,
    pub max_time: Duration,
}

/// Runs `plan` on every path of `paths`; one result per path, in order.
pub async fn interleaved(
    children: &Children,
    paths: &[(SocketAddr, Auth)],
    plan: &Plan<'_>,
) -> Vec<Result<Sequential, String>> {
    let deadline = Instant::now() + plan.max_time;
    let mut lanes: Vec<Lane> = paths
        .iter()
        .map(|(addr, auth)| Lane {
            addr: *addr,
            auth: auth.clone(),
            conn: None,
            totals: Vec::with_capacity(plan.n),
            firsts: Vec::with_capacity(plan.n),
            errors: 0,
            failures: 0,
            failed: None,
        })
        .collect();
    for lane in &mut lanes {
        for _ in 0..plan.warmup {
            lane.send(plan, false).await;
        }
    }
    let per_round = plan.n.div_ceil(plan.rounds.max(1));
    let mut truncated = false;
    for round in 0..plan.rounds.max(1) {
        children.settle(SETTLE_MAX).await;
        let k = lanes.len().max(1);
        for i in 0..lanes.len() {
            let lane = &mut lanes[(i + round) % k];
            for _ in 0..per_round {
                if lane.totals.len() + lane.errors as usize >= plan.n || lane.failed.is_some() {
                    break;
                }
                if Instant::now() >= deadline {
                    truncated = true;
                    break;
                }
                lane.send(plan, true).await;
            }
        }
    }
    lanes
        .into_iter()
        .map(|mut lane| match lane.failed {
            Some(why) => Err(why),
            None => Ok(Sequential {
                total: Percentiles::of(&mut lane.totals),
                first_delta: Percentiles::of(&mut lane.firsts),
                errors: lane.errors,
                truncated,
            }),
        })
        .collect()
}

impl Lane {
    /// One exchange; `measured` ones are recorded. Too many failures end the lane.
    async fn send(&mut self, plan: &Plan<'_>, measured: bool) {
        if self.failed.is_some() {
            return;
        }
        if self.conn.is_none() {
            match Conn::connect_as(self.addr, self.auth.clone()).await {
                Ok(c) => self.conn = Some(c),
                Err(e) => {
                    self.failed = Some(format!("cannot connect: {e:#}"));
                    return;
                }
            }
        }
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let timeout = if plan.streaming {
            STREAM_TIMEOUT
        } else {
            REQUEST_TIMEOUT
        };
        let r = conn
            .exchange("/v1/messages", plan.body.clone(), plan.streaming, timeout)
            .await;
        let ok = matches!(&r, Ok(x) if x.status == StatusCode::OK
            && (!plan.streaming || x.first_delta.is_some()));
        match r {
            Ok(x) if ok => {
                if measured {
                    self.totals.push(x.total);
                    self.firsts.extend(x.first_delta);
                }
                return;
            }
            Ok(_) => {}
            Err(_) => self.conn = None,
        }
        self.errors += u64::from(measured);
        self.failures += 1;
        if self.failures > (plan.n as u64 / 10).max(10) {
            self.failed = Some(format!(
                "too many failed requests to {} ({})",
                self.addr, self.failures
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::client::{CLIENT_KEY, messages_body};
    use fake_upstream::{FakeConfig, FakeUpstream};

    #[tokio::test]
    async fn every_path_gets_its_samples_and_a_dead_one_fails_alone() {
        let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
        // A port nobody listens on.
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let key = Auth::ApiKey(CLIENT_KEY.to_owned());
        let paths = [
            (fake.addr(), key.clone()),
            (dead, key.clone()),
            (fake.addr(), key),
        ];
        let children = Children::default();
        for streaming in [false, true] {
            let body = messages_body(streaming);
            let plan = Plan {
                body: &body,
                streaming,
                warmup: 2,
                n: 23,
                rounds: 4,
                max_time: Duration::from_secs(60),
            };
            let r = interleaved(&children, &paths, &plan).await;
            assert_eq!(r.len(), 3);
            for ok in [&r[0], &r[2]] {
                let s = ok.as_ref().unwrap();
                assert_eq!((s.total.n, s.errors, s.truncated), (23, 0, false));
                assert_eq!(s.first_delta.n, if streaming { 23 } else { 0 });
            }
            assert!(
                r[1].as_ref().unwrap_err().contains("cannot connect"),
                "{:?}",
                r[1]
            );
        }
    }
}
