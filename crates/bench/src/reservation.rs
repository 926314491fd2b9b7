//! The spend-reservation path: what checking and reserving against a spend cap adds to a
//! signed-in person's request, on SQLite and on PostgreSQL.
//!
//! Per store, two Gatehouse processes run against the same fake upstream: one without
//! spend caps (`admin` absent: admission reserves nothing) and one with them, where the
//! benchmark sets a daily user cap (large enough never to block) for one person and none
//! for another. Session tokens are minted with Gatehouse's own signing code, for a minimal
//! loopback issuer ([`crate::discovery`]). Each of the three cases (caps off; caps on, no
//! cap for the caller; caps on, a binding cap) is measured as c=1 sequential non-streaming
//! requests. PostgreSQL runs in a fresh database created (and dropped afterwards) on the
//! server given by `--postgres-url` / `GATEHOUSE_TEST_POSTGRES_URL`; without one it is
//! skipped with a notice.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use http::StatusCode;

use crate::client::{Auth, CLIENT_KEY, Conn, messages_body, parse_url};
use crate::cpu::cpu_ticks;
use crate::discovery::Issuer;
use crate::load::{self, Percentiles, Sequential};
use crate::procs::Children;
use crate::store_ops;

/// The origin Gatehouse is told it is reached at (tokens are minted for it).
pub(crate) const PUBLIC: &str = "http://localhost:1";
pub(crate) const SESSION_SECRET: &str = "bench-session-secret-0123456789abcdefghij";
pub(crate) const WRITE_KEY: &str = "bench-admin-write-key-0123456789abcdef0123";
/// Longest a measured run may take.
const RUN_MAX_TIME: Duration = Duration::from_secs(180);
/// Longest wait for the processes to go quiet before a run.
const SETTLE_MAX: Duration = Duration::from_secs(60);

/// One store's three cases.
#[derive(Debug, Default)]
pub struct StoreRow {
    pub store: &'static str,
    /// Caps off: no reservation at all.
    pub off: Sequential,
    /// Caps on, the caller has no cap: the reservation is still taken (and settled).
    pub uncapped: Sequential,
    /// Caps on, a user cap binds the caller.
    pub capped: Sequential,
    /// c=16 throughput (answers per second): caps off, and caps on with a binding cap.
    pub off_rps: f64,
    pub capped_rps: f64,
    /// CPU per answer during those c=16 runs (µs): the gateway, and the PostgreSQL
    /// server's processes (0 on SQLite), caps off then caps on.
    pub cpu_us: [(f64, f64); 2],
    /// What the store did during the capped caller's c=1 run (its `/metrics`), or why
    /// that was not read.
    pub capped_ops: Option<Result<Vec<store_ops::OpStats>, String>>,
}

#[derive(Debug, Default)]
pub struct Reservations {
    pub rows: Vec<StoreRow>,
    /// Why a store was not measured.
    pub skipped: Vec<String>,
    pub warmup: usize,
    pub n: usize,
    /// Warm-up and measured window of the c=16 runs.
    pub throughput: (Duration, Duration),
    /// The PostgreSQL server's `fsync` and `synchronous_commit`, as measured.
    pub pg_durability: Option<String>,
}

/// Runs the phase; children it starts are stopped before it returns.
pub async fn run(
    children: &mut Children,
    gatehouse: &Path,
    fake_url: &str,
    dir: &Path,
    postgres_url: Option<&str>,
    quick: bool,
) -> anyhow::Result<Reservations> {
    let issuer = Issuer::start().await?;
    let mut out = Reservations {
        warmup: 200,
        n: if quick { 500 } else { 2000 },
        throughput: if quick {
            (Duration::from_millis(500), Duration::from_secs(2))
        } else {
            (Duration::from_secs(1), Duration::from_secs(5))
        },
        ..Reservations::default()
    };
    let sqlite = format!(
        "store: {{sqlite_path: \"{}\"}}",
        dir.join("reservation.db").display()
    );
    let g = Gateways {
        bin: gatehouse,
        fake_url,
        issuer: &issuer.url,
        dir,
    };
    out.rows
        .push(g.measure(children, "sqlite", &sqlite, &out).await?);
    match postgres_url {
        None => {
            let why =
                "PostgreSQL: not measured (no --postgres-url and no GATEHOUSE_TEST_POSTGRES_URL)";
            eprintln!("  {why}");
            out.skipped.push(why.to_owned());
        }
        Some(server) => {
            out.pg_durability = durability(server).await.ok();
            let db = Database::create(server).await?;
            let yaml = format!("store: {{postgres_url: \"{}\"}}", db.url);
            let row = g.measure(children, "postgres", &yaml, &out).await;
            db.drop_it().await;
            out.rows.push(row?);
        }
    }
    Ok(out)
}

pub(crate) struct Gateways<'a> {
    pub bin: &'a Path,
    pub fake_url: &'a str,
    pub issuer: &'a str,
    pub dir: &'a Path,
}

impl Gateways<'_> {
    pub(crate) fn config(&self, store: &str, caps: bool) -> String {
        let admin = if caps {
            format!("admin: {{write_keys: [{{id: bench-admin, key: \"{WRITE_KEY}\"}}]}}\n")
        } else {
            String::new()
        };
        format!(
            "listen: {{host: 127.0.0.1, port: 0, public_url: \"{PUBLIC}\"}}\n\
             {store}\n\
             timeouts: {{shutdown_drain_ms: 2000}}\n\
             upstreams:\n  - {{name: fake, provider: anthropic, base_url: \"{}\", auth: {{api_key: bench-operator-key-not-secret}}}}\n\
             client_keys:\n  - {{id: bench, key: \"{CLIENT_KEY}\"}}\n\
             session: {{jwt_secret: [\"{SESSION_SECRET}\"], ttl_hours: 1}}\n\
             oidc: {{issuer: \"{}\", client_id: bench, client_secret: bench-client-secret, allow_loopback: true}}\n\
             {admin}",
            self.fake_url, self.issuer
        )
    }

    pub(crate) async fn spawn(
        &self,
        children: &mut Children,
        name: &'static str,
        config: &str,
    ) -> anyhow::Result<std::net::SocketAddr> {
        let path = self.dir.join(format!("{name}.yaml"));
        std::fs::write(&path, config)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let args = [
            "--data-dir".to_owned(),
            self.dir.display().to_string(),
            "serve".to_owned(),
            "--config".to_owned(),
            path.display().to_string(),
        ];
        let p = children.spawn(name, self.bin, &args, self.dir).await?;
        parse_url(&p.url)
    }

    async fn measure(
        &self,
        children: &mut Children,
        store: &'static str,
        store_yaml: &str,
        sizes: &Reservations,
    ) -> anyhow::Result<StoreRow> {
        let (off_name, on_name) = match store {
            "sqlite" => ("gatehouse-sqlite-caps-off", "gatehouse-sqlite-caps-on"),
            _ => ("gatehouse-postgres-caps-off", "gatehouse-postgres-caps-on"),
        };
        let result = async {
            let off = self
                .spawn(children, off_name, &self.config(store_yaml, false))
                .await?;
            let on = self
                .spawn(children, on_name, &self.config(store_yaml, true))
                .await?;
            set_cap(on, "bench-capped").await?;
            let capped = Auth::Bearer(token("bench-capped")?);
            let free = Auth::Bearer(token("bench-free")?);
            let body = messages_body(false);
            let mut row = StoreRow {
                store,
                ..StoreRow::default()
            };
            for (case, addr, auth, slot) in [
                ("caps off", off, &free, &mut row.off),
                ("caps on, uncapped caller", on, &free, &mut row.uncapped),
                ("caps on, capped caller", on, &capped, &mut row.capped),
            ] {
                preflight(addr, auth, &body)
                    .await
                    .with_context(|| format!("{store}, {case}"))?;
                let (waited, quiet) = children.settle(SETTLE_MAX).await;
                if !quiet {
                    eprintln!(
                        "  {store}, {case}: processes still busy after {waited:?}; measured anyway"
                    );
                }
                let capped_run = std::ptr::eq(auth, &capped);
                let before = if capped_run {
                    Some(store_ops::scrape(on, WRITE_KEY).await)
                } else {
                    None
                };
                let s = load::sequential_as(
                    addr,
                    auth.clone(),
                    &body,
                    false,
                    sizes.warmup,
                    sizes.n,
                    RUN_MAX_TIME,
                )
                .await?;
                eprintln!(
                    "  {store:<8} {case:<26} p50 {:.1} µs p99 {:.1} µs, {} errors",
                    s.total.p50, s.total.p99, s.errors
                );
                children.check_alive()?;
                *slot = s;
                if let Some(before) = before {
                    row.capped_ops = Some(match (before, store_ops::scrape(on, WRITE_KEY).await) {
                        (Ok(b), Ok(a)) => Ok(store_ops::between(&b, &a)),
                        (Err(e), _) | (_, Err(e)) => Err(format!("{e:#}")),
                    });
                }
            }
            let pid = |addr| children.pid_of_url(&format!("http://{addr}")).unwrap_or(0);
            let (off_pid, on_pid) = (pid(off), pid(on));
            for (i, case, addr, gw_pid, auth) in [
                (0, "caps off", off, off_pid, &free),
                (1, "caps on, capped caller", on, on_pid, &capped),
            ] {
                children.settle(SETTLE_MAX).await;
                let (warmup, measure) = sizes.throughput;
                let (gw0, pg0) = (cpu_ticks(gw_pid).unwrap_or(0), postgres_ticks());
                let t = load::throughput_as(addr, auth.clone(), &body, 16, warmup, measure, &[])
                    .await?;
                let (gw1, pg1) = (cpu_ticks(gw_pid).unwrap_or(0), postgres_ticks());
                let per = |ticks: u64| ticks as f64 * tick_us() / t.completed.max(1) as f64;
                row.cpu_us[i] = (per(gw1.saturating_sub(gw0)), per(pg1.saturating_sub(pg0)));
                eprintln!(
                    "  {store:<8} {case:<26} c=16 {:.0} req/s, {} errors, CPU per answer {:.1} µs (PostgreSQL {:.1} µs)",
                    t.requests_per_sec, t.errors, row.cpu_us[i].0, row.cpu_us[i].1
                );
                children.check_alive()?;
                if i == 0 {
                    row.off_rps = t.requests_per_sec;
                } else {
                    row.capped_rps = t.requests_per_sec;
                }
            }
            anyhow::Ok(row)
        }
        .await;
        children.stop(off_name).await;
        children.stop(on_name).await;
        result
    }
}

/// CPU time, in clock ticks, of every process named `postgres` on the machine (the
/// server given by `--postgres-url` runs here; 0 when there is none).
fn postgres_ticks() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end() == "postgres")
        })
        .filter_map(|pid| cpu_ticks(pid).ok())
        .sum()
}

/// Microseconds per clock tick (`/proc` counts CPU time in `USER_HZ` ticks, 100 a second).
fn tick_us() -> f64 {
    1e6 / 100.0
}

/// A daily user cap for `sub`, far above what the run spends.
pub(crate) async fn set_cap(addr: std::net::SocketAddr, sub: &str) -> anyhow::Result<()> {
    let mut conn = Conn::connect_as(addr, Auth::ApiKey(WRITE_KEY.to_owned())).await?;
    let body = serde_json::json!({
        "scope": {"type": "user", "user_id": sub},
        "amount": "100000000",
        "period": "daily",
    });
    let (status, text) = conn
        .post_collect(
            "/v1/organizations/spend_limits",
            Bytes::from(body.to_string()),
        )
        .await?;
    if status != StatusCode::OK {
        bail!("setting the cap answered {status}: {text}");
    }
    Ok(())
}

pub(crate) fn token(sub: &str) -> anyhow::Result<String> {
    use gatehouse_engine::identity::keys::KeyRing;
    use gatehouse_engine::identity::session::{UserIdentity, mint};
    let who = UserIdentity {
        sub: sub.to_owned(),
        email: Some(format!("{sub}@bench.example")),
        name: None,
        groups: vec![],
    };
    let keys = KeyRing::new(&[gatehouse_engine::secret::Secret::new(SESSION_SECRET)]);
    mint(&keys, PUBLIC, 3600, chrono::Utc::now(), &who)
        .map(|(t, _)| t)
        .context("cannot mint a session token")
}

async fn preflight(addr: std::net::SocketAddr, auth: &Auth, body: &Bytes) -> anyhow::Result<()> {
    let mut conn = Conn::connect_as(addr, auth.clone()).await?;
    let (status, text) = conn.post_collect("/v1/messages", body.clone()).await?;
    if status != StatusCode::OK {
        bail!("preflight request answered {status}: {text}");
    }
    Ok(())
}

/// A database of its own on the given server, dropped after the run.
pub(crate) struct Database {
    server: String,
    name: String,
    pub url: String,
}

impl Database {
    async fn create(server: &str) -> anyhow::Result<Database> {
        Self::create_named(server, &format!("gatehouse_bench_{}", std::process::id())).await
    }

    /// A fresh database called `name` (dropped first if it exists).
    pub(crate) async fn create_named(server: &str, name: &str) -> anyhow::Result<Database> {
        let name = name.to_owned();
        let client = connect(server).await?;
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
            .await?;
        client
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .context("cannot create the benchmark database")?;
        let url = url_with_database(server, &name)?;
        Ok(Database {
            server: server.to_owned(),
            name,
            url,
        })
    }

    pub(crate) async fn drop_it(self) {
        let dropped = async {
            connect(&self.server)
                .await?
                .batch_execute(&format!(
                    "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                    self.name
                ))
                .await?;
            anyhow::Ok(())
        };
        if let Err(e) = dropped.await {
            eprintln!("  could not drop database {}: {e:#}", self.name);
        }
    }
}

/// `fsync=on, synchronous_commit=on` (what the server runs with).
async fn durability(server: &str) -> anyhow::Result<String> {
    let client = connect(server).await?;
    let mut out = Vec::new();
    for name in ["fsync", "synchronous_commit"] {
        let row = client.query_one(&format!("SHOW {name}"), &[]).await?;
        out.push(format!("{name}={}", row.get::<_, String>(0)));
    }
    Ok(out.join(", "))
}

async fn connect(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("cannot connect to the PostgreSQL server given for the benchmark")?;
    tokio::spawn(connection);
    Ok(client)
}

/// The server URL with its database replaced by `db`.
fn url_with_database(server: &str, db: &str) -> anyhow::Result<String> {
    let mut url = url::Url::parse(server)
        .ok()
        .filter(|u| matches!(u.scheme(), "postgres" | "postgresql") && u.has_host())
        .context("the PostgreSQL URL must be postgres://user[:password]@host[:port][/database]")?;
    url.set_path(&format!("/{db}"));
    Ok(url.to_string())
}

impl Reservations {
    /// The BENCHMARKS.md section.
    pub fn markdown(&self) -> String {
        let mut out = String::from("\n## Spend reservation path\n\n");
        out.push_str(
            "Latency a signed-in person's request pays for spend caps: admission takes the \
             request's worst case out of the person's spend lease (a reservation of several \
             requests' worst case, checked against every binding cap in one store transaction \
             when a new one is needed), and each usage row charges the lease after the \
             response.\n\n",
        );
        out.push_str(&self.table());
        out.push_str(
            "\n| store | c=16 caps off (req/s) | c=16 caps on, binding cap (req/s) | caps on ÷ caps off | target | CPU per answer, caps off: gateway + PostgreSQL (µs) | caps on: gateway + PostgreSQL (µs) |\n\
             |---|---:|---:|---:|---|---:|---:|\n",
        );
        for r in &self.rows {
            let ratio = r.capped_rps / r.off_rps.max(1.0);
            let verdict = if ratio >= 0.8 { "pass" } else { "**miss**" };
            let cpu = |(gw, pg): (f64, f64)| format!("{gw:.1} + {pg:.1}");
            let _ = writeln!(
                out,
                "| {} | {:.0} | {:.0} | {ratio:.2}× | ≥ 0.8× ({verdict}) | {} | {} |",
                r.store,
                r.off_rps,
                r.capped_rps,
                cpu(r.cpu_us[0]),
                cpu(r.cpu_us[1])
            );
        }
        out.push_str(
            "\nStore operations during the capped caller's c=1 run, from Gatehouse's own \
             `/metrics` (`gatehouse_store_operation_seconds`, read before and after the run; \
             each operation is timed by its caller, so waiting for the store's thread or pool \
             is included; p50/p99 are the upper bounds of the histogram buckets they fall in). \
             A p99 these times do not explain comes from elsewhere (scheduling, the upstream \
             client).\n\n\
             | store | operation | count | per request | p50 ≤ (µs) | p99 ≤ (µs) |\n\
             |---|---|---:|---:|---:|---:|\n",
        );
        for r in &self.rows {
            match &r.capped_ops {
                None => {}
                Some(Ok(ops)) => out.push_str(&store_ops::rows(r.store, ops, self.n)),
                Some(Err(e)) => {
                    let _ = writeln!(out, "| {} | not read: {e} | | | | |", r.store);
                }
            }
        }
        for s in &self.skipped {
            let _ = writeln!(out, "\n- {s}.");
        }
        let _ = writeln!(
            out,
            "\n- How measured: per store, two `gatehouse serve` processes in front of the same fake \
             upstream, one without spend caps (no `admin` block: nothing is reserved) and one with \
             them, where a daily user cap (never reached) binds one session caller and no cap \
             binds the other. Session tokens are minted for the configured public origin; a \
             loopback OIDC issuer only serves discovery. Each case: one keep-alive connection, \
             {} warm-up then {} sequential non-streaming requests (`max_tokens` 64), \
             nearest-rank percentiles of the whole exchange; c=16: 16 keep-alive connections \
             back to back, {:?} warm-up then answers counted over {:?}; CPU per answer is the \
             gateway's CPU time (`/proc/PID/stat`) and that of every `postgres` process on the \
             machine over the whole c=16 run, divided by every answer in it. PostgreSQL is the server given by \
             `--postgres-url` (a fresh database, dropped afterwards), on the same machine, \
             running with {}.",
            self.warmup,
            self.n,
            self.throughput.0,
            self.throughput.1,
            self.pg_durability.as_deref().unwrap_or("settings unknown")
        );
        out
    }

    /// The table alone (also printed at the end of a run).
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| store | percentile | caps off (µs) | caps on, caller without a cap (µs) | caps on, binding cap (µs) | added by the reservation (µs) |\n\
             |---|---|---:|---:|---:|---:|\n",
        );
        for r in &self.rows {
            for (label, pick) in [
                ("p50", (|p: &Percentiles| p.p50) as fn(&Percentiles) -> f64),
                ("p99", |p: &Percentiles| p.p99),
            ] {
                let (off, free, capped) = (
                    pick(&r.off.total),
                    pick(&r.uncapped.total),
                    pick(&r.capped.total),
                );
                let _ = writeln!(
                    out,
                    "| {} | {label} | {off:.1} | {free:.1} | {capped:.1} | {:+.1} |",
                    r.store,
                    capped - off
                );
            }
        }
        let errors: u64 = self
            .rows
            .iter()
            .map(|r| r.off.errors + r.uncapped.errors + r.capped.errors)
            .sum();
        if errors > 0 {
            let _ = writeln!(out, "\n{errors} requests failed during these runs.");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn database_is_replaced_in_the_url() {
        assert_eq!(
            url_with_database("postgres://u:p@127.0.0.1:5/postgres", "b").unwrap(),
            "postgres://u:p@127.0.0.1:5/b"
        );
        assert_eq!(
            url_with_database("postgresql://u@h?sslmode=disable", "b").unwrap(),
            "postgresql://u@h/b?sslmode=disable"
        );
        assert_eq!(
            url_with_database("postgres://u@h/x?sslmode=disable", "b").unwrap(),
            "postgres://u@h/b?sslmode=disable"
        );
        assert!(url_with_database("host=h user=u", "b").is_err());
    }

    #[test]
    fn configs_differ_only_in_the_admin_block() {
        let g = Gateways {
            bin: Path::new("/x"),
            fake_url: "http://127.0.0.1:9",
            issuer: "http://127.0.0.1:8",
            dir: Path::new("/tmp"),
        };
        let off = g.config("store: {sqlite_path: \"/tmp/r.db\"}", false);
        let on = g.config("store: {sqlite_path: \"/tmp/r.db\"}", true);
        assert!(!off.contains("admin:") && on.contains("admin:"));
        assert_eq!(
            on.replace(&off, ""),
            format!("admin: {{write_keys: [{{id: bench-admin, key: \"{WRITE_KEY}\"}}]}}\n")
        );
    }
}
