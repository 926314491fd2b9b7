//! Usage export: CSV or JSON of usage rows for a range of days (the viewer's, UTC unless
//! told otherwise), raw or grouped by day, model, project or session. The same code
//! serves the window (`GET
//! /gatehouse/app/usage/export`) and `gatehouse usage export`, against the running
//! instance or its database when it is stopped.
//!
//! Raw rows are read a bounded page at a time and written out as they come; grouped rows
//! come from the usage rollup. A CSV cell that a spreadsheet would run as a formula
//! (`=`, `+`, `-`, `@`, tab, carriage return first) is prefixed with `'`.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};
use gatehouse_engine::insight::Days;
use gatehouse_engine::store::rollup::RollupSums;
use gatehouse_engine::store::{RowQuery, Store, UsageRecord};
use serde_json::{Value, json};
use tokio::sync::mpsc::Sender;

use super::AppError;
use super::insight::{MAX_DAYS, ProjectRef};
use crate::transcripts::TranscriptIndex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Raw,
    Day,
    Model,
    Project,
    Session,
}

impl Group {
    pub fn name(self) -> &'static str {
        match self {
            Group::Raw => "raw",
            Group::Day => "day",
            Group::Model => "model",
            Group::Project => "project",
            Group::Session => "session",
        }
    }
}

/// What to export: UTC days `since..=until`.
#[derive(Debug, Clone)]
pub struct Query {
    pub since: NaiveDate,
    pub until: NaiveDate,
    pub format: Format,
    pub group: Group,
    /// Whose days `since` and `until` are (the viewer's offset from UTC).
    pub local: Days,
}

impl Query {
    /// From the query's words (`since`, `until` as `YYYY-MM-DD`, days of `local`; `format`;
    /// `group`), the last 30 days by default.
    pub fn parse(
        now: DateTime<Utc>,
        local: Days,
        since: Option<&str>,
        until: Option<&str>,
        format: Option<&str>,
        group: Option<&str>,
    ) -> Result<Query, AppError> {
        let date = |name: &str, v: &str| {
            NaiveDate::parse_from_str(v, "%Y-%m-%d").map_err(|_| {
                AppError::BadInput(format!("{name} must be a date as YYYY-MM-DD, not {v:?}"))
            })
        };
        let today = (now + Duration::minutes(i64::from(local.offset_minutes))).date_naive();
        let until = until
            .map(|v| date("until", v))
            .transpose()?
            .unwrap_or(today);
        let since = since
            .map(|v| date("since", v))
            .transpose()?
            .unwrap_or(until - Duration::days(29));
        if since > until {
            return Err(AppError::BadInput("since must not be after until".into()));
        }
        if (until - since).num_days() >= MAX_DAYS {
            return Err(AppError::BadInput(format!(
                "an export covers at most {MAX_DAYS} days"
            )));
        }
        let format = match format.unwrap_or("csv") {
            "csv" => Format::Csv,
            "json" => Format::Json,
            other => {
                return Err(AppError::BadInput(format!(
                    "format must be csv or json, not {other:?}"
                )));
            }
        };
        let group = match group.unwrap_or("raw") {
            "raw" => Group::Raw,
            "day" => Group::Day,
            "model" => Group::Model,
            "project" => Group::Project,
            "session" => Group::Session,
            other => {
                return Err(AppError::BadInput(format!(
                    "group must be raw, day, model, project or session, not {other:?}"
                )));
            }
        };
        Ok(Query {
            since,
            until,
            format,
            group,
            local,
        })
    }

    /// `gatehouse-usage-<group>-<since>-<until>.<csv|json>`.
    pub fn file_name(&self) -> String {
        let ext = match self.format {
            Format::Csv => "csv",
            Format::Json => "json",
        };
        format!(
            "gatehouse-usage-{}-{}-{}.{ext}",
            self.group.name(),
            self.since,
            self.until
        )
    }

    pub fn content_type(&self) -> &'static str {
        match self.format {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Json => "application/json",
        }
    }

    /// The local days as numbers (days since 1970-01-01 there), first and last.
    fn days(&self) -> (i64, i64) {
        let n = |d: NaiveDate| i64::from(d.num_days_from_ce()) - 719_163;
        (n(self.since), n(self.until))
    }

    /// The range as times: from the first day's start to the end of the last.
    fn range(&self) -> (DateTime<Utc>, DateTime<Utc>) {
        let (first, last) = self.days();
        (self.local.start(first), self.local.start(last + 1))
    }
}

pub use gatehouse_engine::admin::csv::cell as csv_cell;

/// Micro-USD as dollars with six places.
pub fn usd(micro: u64) -> String {
    format!("{}.{:06}", micro / 1_000_000, micro % 1_000_000)
}

const RAW_COLUMNS: [&str; 16] = [
    "at",
    "request_id",
    "session_id",
    "agent_id",
    "request_class",
    "project",
    "model",
    "upstream",
    "upstream_model",
    "status",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "cost_usd",
];

fn raw_json(r: &UsageRecord, index: &TranscriptIndex) -> Value {
    let project = r
        .tags
        .session_id
        .as_deref()
        .map(|s| ProjectRef::of(index, s).name);
    json!({
        "at": r.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "request_id": r.request_id,
        "session_id": r.tags.session_id,
        "agent_id": r.tags.agent_id,
        "request_class": r.tags.request_class,
        "project": project,
        "model": r.model,
        "upstream": r.upstream,
        "upstream_model": r.upstream_model,
        "status": r.status,
        "input_tokens": r.input_tokens,
        "output_tokens": r.output_tokens,
        "cache_read_tokens": r.cache_read_tokens,
        "cache_write_5m_tokens": r.cache_write_5m_tokens,
        "cache_write_1h_tokens": r.cache_write_1h_tokens,
        "cost_usd": usd(r.cost_micro_usd),
    })
}

use gatehouse_engine::admin::csv::line as csv_line;

/// Sends the export to `out`, a piece at a time (a raw export page by page); stops when
/// the receiver is gone.
pub async fn write(
    store: &dyn Store,
    index: &TranscriptIndex,
    q: &Query,
    out: &Sender<Vec<u8>>,
) -> Result<(), AppError> {
    if q.group == Group::Raw {
        return write_raw(store, index, q, out).await;
    }
    let (columns, rows) = grouped(store, index, q).await?;
    let body = match q.format {
        Format::Csv => {
            let mut s = format!("{}\r\n", columns.join(","));
            for r in &rows {
                s.push_str(&csv_line(&columns, r));
            }
            s.into_bytes()
        }
        Format::Json => serde_json::to_vec_pretty(&rows).unwrap_or_default(),
    };
    let _ = out.send(body).await;
    Ok(())
}

async fn write_raw(
    store: &dyn Store,
    index: &TranscriptIndex,
    q: &Query,
    out: &Sender<Vec<u8>>,
) -> Result<(), AppError> {
    let (from, to) = q.range();
    let mut pages = Pager::new(from, to, None);
    let mut first = true;
    let head = match q.format {
        Format::Csv => format!("{}\r\n", RAW_COLUMNS.join(",")),
        Format::Json => "[".to_owned(),
    };
    if out.send(head.into_bytes()).await.is_err() {
        return Ok(());
    }
    while let Some(page) = pages.next(store).await? {
        let mut chunk = String::new();
        for r in &page {
            let v = raw_json(r, index);
            match q.format {
                Format::Csv => chunk.push_str(&csv_line(&RAW_COLUMNS, &v)),
                Format::Json => {
                    chunk.push_str(if first { "\n" } else { ",\n" });
                    chunk.push_str(&v.to_string());
                }
            }
            first = false;
        }
        if !chunk.is_empty() && out.send(chunk.into_bytes()).await.is_err() {
            return Ok(());
        }
    }
    if q.format == Format::Json {
        let _ = out.send(b"\n]\n".to_vec()).await;
    }
    Ok(())
}

/// The grouped rows (from the rollup) and their columns.
async fn grouped(
    store: &dyn Store,
    index: &TranscriptIndex,
    q: &Query,
) -> Result<(Vec<&'static str>, Vec<Value>), AppError> {
    let (first, last) = q.days();
    let rows = store
        .usage_rollup(
            q.local.first_hour(first),
            q.local.first_hour(last + 1) - 1,
            None,
        )
        .await?;
    let mut groups: BTreeMap<Vec<String>, RollupSums> = BTreeMap::new();
    for r in &rows {
        let key = match q.group {
            Group::Day => vec![q.local.label(q.local.of_hour(r.key.hour))],
            Group::Model => vec![r.key.model.clone()],
            Group::Project if r.key.session_id.is_empty() => vec!["(no session)".to_owned()],
            Group::Project => vec![ProjectRef::of(index, &r.key.session_id).name],
            Group::Session if r.key.session_id.is_empty() => continue,
            Group::Session => vec![
                r.key.session_id.clone(),
                ProjectRef::of(index, &r.key.session_id).name,
            ],
            Group::Raw => continue,
        };
        groups.entry(key).or_default().merge(&r.sums);
    }
    let key_columns: Vec<&'static str> = match q.group {
        Group::Day => vec!["day"],
        Group::Model => vec!["model"],
        Group::Project => vec!["project"],
        Group::Session => vec!["session_id", "project"],
        Group::Raw => vec![],
    };
    let mut columns = key_columns.clone();
    columns.extend([
        "requests",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost_usd",
    ]);
    let out = groups
        .into_iter()
        .map(|(key, s)| {
            let mut v = json!({
                "requests": s.requests,
                "input_tokens": s.input_tokens,
                "output_tokens": s.output_tokens,
                "cache_read_tokens": s.cache_read_tokens,
                "cache_write_tokens": s.cache_write_tokens,
                "cost_usd": usd(s.cost_micro_usd),
            });
            if let Some(m) = v.as_object_mut() {
                for (c, k) in key_columns.iter().zip(key) {
                    m.insert((*c).to_owned(), Value::String(k));
                }
            }
            v
        })
        .collect();
    Ok((columns, out))
}

/// Usage rows of a time range, oldest first, read a bounded page at a time.
pub struct Pager {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    session_id: Option<String>,
    done: bool,
}

impl Pager {
    const PAGE: usize = 5_000;

    pub fn new(from: DateTime<Utc>, to: DateTime<Utc>, session_id: Option<String>) -> Pager {
        Pager {
            from,
            to,
            session_id,
            done: false,
        }
    }

    /// The next rows, `None` at the end. A full page is handed out up to (not including)
    /// its last millisecond, where the next page starts, so no row comes twice or is
    /// skipped (unless more than a page shares one millisecond: those come once, cut).
    pub async fn next(
        &mut self,
        store: &dyn gatehouse_engine::store::Store,
    ) -> Result<Option<Vec<gatehouse_engine::store::UsageRecord>>, AppError> {
        if self.done {
            return Ok(None);
        }
        let mut page = store
            .usage_between(RowQuery {
                from: self.from,
                to: self.to,
                session_id: self.session_id.clone(),
                newest_first: false,
                limit: Self::PAGE,
            })
            .await?;
        if page.len() < Self::PAGE {
            self.done = true;
            return Ok(Some(page));
        }
        let last = page.last().map(|r| r.created_at).unwrap_or(self.to);
        if last > self.from {
            page.retain(|r| r.created_at < last);
            self.from = last;
        } else {
            self.from += Duration::milliseconds(1);
        }
        Ok(Some(page))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic, clippy::unwrap_used)]
    use super::*;

    #[test]
    fn formulas_are_defused_and_cells_quoted() {
        assert_eq!(csv_cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_cell("+1"), "'+1");
        assert_eq!(csv_cell("-2"), "'-2");
        assert_eq!(csv_cell("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_cell("\tx"), "'\tx");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("plain"), "plain");
        assert_eq!(usd(1_234_567), "1.234567");
        assert_eq!(usd(5), "0.000005");
    }

    #[test]
    fn queries_are_checked() {
        let now = DateTime::parse_from_rfc3339("2026-12-06T10:00:00Z")
            .map(|d| d.with_timezone(&Utc))
            .unwrap_or_default();
        let utc = Days::default();
        let q = Query::parse(now, utc, None, None, None, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (q.since.to_string(), q.until.to_string()),
            ("2026-11-07".into(), "2026-12-06".into())
        );
        assert_eq!(
            q.file_name(),
            "gatehouse-usage-raw-2026-11-07-2026-12-06.csv"
        );
        for bad in [
            (Some("2026-13-01"), None, None, None),
            (Some("2026-12-07"), Some("2026-12-06"), None, None),
            (None, None, Some("xml"), None),
            (None, None, None, Some("person")),
            (Some("2020-01-01"), None, None, None),
        ] {
            assert!(
                Query::parse(now, utc, bad.0, bad.1, bad.2, bad.3).is_err(),
                "{bad:?}"
            );
        }
    }
}
