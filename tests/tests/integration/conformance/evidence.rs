//! What a kind's session shows: the requests each fake saw and refused, the turns, the
//! usage rows; and from them each cell of the matrix.

use std::time::Duration;

use chrono::{DateTime, Utc};
use fake_upstream::{FakeUpstream, RecordedRequest, Refusal};
use gatehouse_engine::store::UsageRecord;
use gatehouse_tests::claude_session::Turn;
use gatehouse_tests::matrix::Cell;
use serde_json::Value;

use super::{
    FAILOVER_STEP, MARKER_OUTPUT, STEP_COUNT, STEP_IMAGE, STEP_LONG, STEP_PASTE, STEP_TOOLS, STEPS,
    TEXT_MODEL, fake_config,
};

/// What one fake saw.
pub(super) struct Seen {
    pub(super) requests: Vec<RecordedRequest>,
    pub(super) refusals: Vec<Refusal>,
}

impl Seen {
    pub(super) fn of(fake: &FakeUpstream) -> Seen {
        Seen {
            requests: fake.requests(),
            refusals: fake.refusals(),
        }
    }

    fn refused(&self, index: usize) -> bool {
        self.refusals.iter().any(|r| r.request_index == index)
    }
}

/// One step as it ran: the turn and the fakes' request indices before and after it.
pub(super) struct Ran {
    pub(super) turn: Turn,
    pub(super) first: (usize, usize),
    pub(super) second: (usize, usize),
    pub(super) started: DateTime<Utc>,
    pub(super) ended: DateTime<Utc>,
}

/// A kind's whole session.
pub(super) struct Session {
    pub(super) kind: &'static str,
    pub(super) ran: Vec<Ran>,
    pub(super) first: Seen,
    pub(super) second: Seen,
    pub(super) rows: Vec<UsageRecord>,
    /// The first upstream's request count when its failure was queued.
    pub(super) failover_at: usize,
    pub(super) elapsed: Duration,
}

fn is_count(path: &str) -> bool {
    path.ends_with("/count_tokens")
        || path.ends_with("/count-tokens")
        || path.ends_with("count-tokens:rawPredict")
}

fn is_inference(path: &str) -> bool {
    is_count(path)
        || path.ends_with("/messages")
        || path.ends_with("/invoke")
        || path.ends_with("/invoke-with-response-stream")
        || path.ends_with(":rawPredict")
        || path.ends_with(":streamRawPredict")
        || path.ends_with("/chat/completions")
}

/// A failure note: digits as `N` (token counts and paths vary from run to run), one line,
/// at most 120 characters.
fn tidy(text: &str) -> String {
    let mut out = String::new();
    let mut in_digits = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(if c == '\n' { ' ' } else { c });
        }
    }
    let out = out.trim();
    match out.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &out[..i]),
        None => out.to_owned(),
    }
}

/// The text of a Messages tool result or an OpenAI tool message.
fn tool_outputs(req: &RecordedRequest) -> Vec<String> {
    let mut out = Vec::new();
    for m in req.body["messages"].as_array().into_iter().flatten() {
        if m["role"] == "tool" {
            out.push(m["content"].to_string());
        }
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                out.push(b["content"].to_string());
            }
        }
    }
    out
}

/// Whether a request carries an image (a block anywhere, or an OpenAI `image_url` part).
fn carries_image(req: &RecordedRequest) -> bool {
    let text = req.body["messages"].to_string();
    text.contains("\"type\":\"image\"") || text.contains("\"type\":\"image_url\"")
}

impl Session {
    fn both(&self) -> impl Iterator<Item = (&'static str, &Seen)> {
        [("first", &self.first), ("second", &self.second)].into_iter()
    }

    /// The requests a step made, on both upstreams.
    fn step_requests(&self, step: usize) -> Vec<&RecordedRequest> {
        let r = &self.ran[step];
        let a = &self.first.requests[r.first.0..r.first.1];
        let b = &self.second.requests[r.second.0..r.second.1];
        a.iter().chain(b).collect()
    }

    /// The refusals of a step's requests.
    fn step_refusals(&self, step: usize) -> Vec<&Refusal> {
        let r = &self.ran[step];
        let a = self
            .first
            .refusals
            .iter()
            .filter(|x| (r.first.0..r.first.1).contains(&x.request_index));
        let b = self
            .second
            .refusals
            .iter()
            .filter(|x| (r.second.0..r.second.1).contains(&x.request_index));
        a.chain(b).collect()
    }

    fn all_requests(&self) -> impl Iterator<Item = &RecordedRequest> {
        self.first.requests.iter().chain(&self.second.requests)
    }

    /// Why a step failed: its last refusal (the one Claude Code could not get past), else
    /// Claude Code's result.
    fn why(&self, step: usize) -> String {
        if let Some(r) = self.step_refusals(step).last() {
            return format!("{}: {}", r.status, tidy(&r.message));
        }
        let turn = &self.ran[step].turn;
        tidy(&format!("turn failed: {}", turn.result))
    }

    fn tools(&self) -> Cell {
        for step in 0..=STEP_TOOLS {
            if !self.ran[step].turn.ok {
                return Cell::fail(self.why(step));
            }
        }
        let seen = |marker: &str| {
            self.all_requests()
                .any(|r| tool_outputs(r).iter().any(|o| o.contains(marker)))
        };
        if !seen("GATEHOUSE-NOTES") || !seen(MARKER_OUTPUT) {
            return Cell::fail("a tool's output never reached the upstream");
        }
        Cell::pass("")
    }

    fn thinking(&self) -> Cell {
        let signature_refusal = self
            .both()
            .flat_map(|(_, s)| &s.refusals)
            .find(|r| r.message.contains("signature") || r.message.contains("`thinking`"));
        if let Some(r) = signature_refusal {
            return Cell::fail(format!("{}: {}", r.status, tidy(&r.message)));
        }
        let asked = self
            .all_requests()
            .filter_map(|r| r.body["thinking"]["type"].as_str())
            .next();
        let assistant = |r: &RecordedRequest| -> Vec<Value> {
            r.body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["role"] == "assistant")
                .cloned()
                .collect()
        };
        if self.kind == "openai" {
            let handed_back = self.all_requests().any(|r| {
                assistant(r).iter().any(|m| {
                    m["tool_calls"].is_array()
                        && m["reasoning_content"]
                            .as_str()
                            .is_some_and(|t| !t.is_empty())
                })
            });
            return if handed_back {
                Cell::pass("thinking ↔ `reasoning_content`")
            } else {
                Cell::fail("no `reasoning_content` handed back")
            };
        }
        let Some(asked) = asked else {
            return Cell::fail("Claude Code asked for no thinking");
        };
        let handed_back = self.all_requests().any(|r| {
            assistant(r).iter().any(|m| {
                m["content"].as_array().is_some_and(|c| {
                    c.iter().any(|b| {
                        b["type"] == "thinking"
                            && b["signature"].as_str().is_some_and(|s| !s.is_empty())
                    })
                })
            })
        });
        if handed_back {
            Cell::pass(format!("{asked}; signed blocks handed back"))
        } else {
            Cell::fail(format!("{asked}; no signed thinking block handed back"))
        }
    }

    fn image(&self) -> Cell {
        if !self.ran[STEP_IMAGE].turn.ok {
            return Cell::fail(self.why(STEP_IMAGE));
        }
        let answered: Vec<&RecordedRequest> = self
            .step_requests(STEP_IMAGE)
            .into_iter()
            .filter(|r| carries_image(r))
            .collect();
        let Some(last) = answered.last() else {
            return Cell::fail("the image never reached an upstream");
        };
        match last.body["model"].as_str() {
            Some(model) if self.kind == "openai" && model != TEXT_MODEL => {
                Cell::pass(format!("image → {model}"))
            }
            _ => Cell::pass(""),
        }
    }

    fn long_input(&self) -> Cell {
        for step in [STEP_PASTE, STEP_LONG] {
            if !self.ran[step].turn.ok {
                return Cell::fail(self.why(step));
            }
        }
        let refusals = self.step_refusals(STEP_LONG);
        let upstream_overflow = refusals.iter().any(|r| {
            r.message.contains("prompt is too long") || r.message.contains("maximum context length")
        });
        let r = &self.ran[STEP_LONG];
        let gateway_overflow = self.rows.iter().any(|row| {
            row.status == 400
                && row.upstream.is_none()
                && (r.started..=r.ended).contains(&row.created_at)
        });
        match (upstream_overflow, gateway_overflow) {
            (true, _) => Cell::pass("prompt is too long → compacted"),
            (false, true) => Cell::pass("Gatehouse: prompt is too long → compacted"),
            (false, false) => Cell::fail("the window was never reached (no compaction)"),
        }
    }

    fn count_tokens(&self) -> Cell {
        let counts: Vec<&UsageRecord> = self
            .rows
            .iter()
            .filter(|r| r.endpoint == "count_tokens")
            .collect();
        if counts.is_empty() {
            return Cell::fail("Claude Code sent no count_tokens");
        }
        if let Some(bad) = counts.iter().find(|r| r.status != 200) {
            let refused = self
                .step_refusals(STEP_COUNT)
                .into_iter()
                .next()
                .map(|r| format!(": {}", tidy(&r.message)))
                .unwrap_or_default();
            return Cell::fail(format!("{}{refused}", bad.status));
        }
        if !self.ran[STEP_COUNT].turn.ok {
            return Cell::fail(self.why(STEP_COUNT));
        }
        if counts
            .iter()
            .all(|r| r.route_reason.contains("estimated locally"))
        {
            Cell::pass("estimated locally")
        } else {
            Cell::pass("")
        }
    }

    fn failover(&self) -> Cell {
        let step = &self.ran[FAILOVER_STEP];
        if !step.turn.ok {
            return Cell::fail(self.why(FAILOVER_STEP));
        }
        let faulted = (self.failover_at..self.first.requests.len())
            .find(|&i| is_inference(&self.first.requests[i].path) && !self.first.refused(i));
        if faulted.is_none() {
            return Cell::fail("the first upstream was never asked again");
        }
        let after: Vec<&UsageRecord> = self
            .rows
            .iter()
            .filter(|r| r.created_at >= step.started && r.status == 200)
            .collect();
        let Some(moved) = after
            .iter()
            .position(|r| r.upstream.as_deref() == Some("second"))
        else {
            return Cell::fail("no answer came from the second upstream");
        };
        let stays = after[moved..]
            .iter()
            .all(|r| r.upstream.as_deref() == Some("second"));
        if stays {
            Cell::pass("529 → second upstream; the conversation stays there")
        } else {
            Cell::pass("529 → second upstream; later requests back on the first")
        }
    }

    fn betas(&self) -> Cell {
        let refused = self.both().flat_map(|(_, s)| &s.refusals).find(|r| {
            [
                "invalid beta flag",
                "Unexpected value(s)",
                "extraneous key",
                "Extra inputs",
            ]
            .iter()
            .any(|p| r.message.contains(p))
        });
        match refused {
            None => Cell::pass(""),
            Some(r) => Cell::fail(format!("{}: {}", r.status, tidy(&r.message))),
        }
    }

    /// Every request Gatehouse answered has one row, with the tokens the fake reported.
    fn usage(&self) -> Cell {
        match self.usage_mismatch() {
            None => Cell::pass(""),
            Some(why) => Cell::fail(why),
        }
    }

    fn usage_mismatch(&self) -> Option<String> {
        if let Some(r) = self.rows.iter().find(|r| r.principal != "key:tester") {
            return Some(format!("a row for {}", r.principal));
        }
        for (name, seen) in self.both() {
            let second = name == "second";
            let cfg = fake_config(self.kind, second, Vec::new());
            let faulted = if second {
                None
            } else {
                (self.failover_at..seen.requests.len())
                    .find(|&i| is_inference(&seen.requests[i].path) && !seen.refused(i))
            };
            let answered = |count: bool| {
                seen.requests
                    .iter()
                    .enumerate()
                    .filter(|(i, r)| {
                        is_inference(&r.path)
                            && is_count(&r.path) == count
                            && !seen.refused(*i)
                            && Some(*i) != faulted
                    })
                    .count()
            };
            let rows = |endpoint: &str| -> Vec<&UsageRecord> {
                self.rows
                    .iter()
                    .filter(|r| {
                        r.status == 200
                            && r.endpoint == endpoint
                            && r.upstream.as_deref() == Some(name)
                    })
                    .collect()
            };
            let messages = rows("messages");
            if messages.len() != answered(false) {
                return Some(format!(
                    "{} rows for {} answers of the {name} upstream",
                    messages.len(),
                    answered(false)
                ));
            }
            let want = if self.kind == "openai" {
                (100, 9, 20)
            } else {
                (u64::from(cfg.input_tokens), u64::from(cfg.output_tokens), 0)
            };
            if let Some(r) = messages
                .iter()
                .find(|r| (r.input_tokens, r.output_tokens, r.cache_read_tokens) != want)
            {
                return Some(format!(
                    "a row of the {name} upstream has ({}, {}, {}) tokens, the fake reported {want:?}",
                    r.input_tokens, r.output_tokens, r.cache_read_tokens
                ));
            }
            if self.kind != "openai" {
                let counts = rows("count_tokens");
                if counts.len() != answered(true) {
                    return Some(format!(
                        "{} count rows for {} counts of the {name} upstream",
                        counts.len(),
                        answered(true)
                    ));
                }
                // `count_tokens` is free: its rows carry no tokens.
                if let Some(r) = counts.iter().find(|r| r.input_tokens + r.output_tokens > 0) {
                    return Some(format!("a count row carries {} tokens", r.input_tokens));
                }
            }
        }
        let refusals = self.first.refusals.len() + self.second.refusals.len();
        let refused_rows = self.rows.iter().filter(|r| r.status == 400).count();
        if refused_rows < refusals {
            return Some(format!(
                "{refused_rows} rows for {refusals} refused requests"
            ));
        }
        if let Some(r) = self
            .rows
            .iter()
            .find(|r| r.status != 200 && r.input_tokens + r.output_tokens > 0)
        {
            return Some(format!("a {} row carries tokens", r.status));
        }
        None
    }

    pub(super) fn cells(&self) -> Vec<Cell> {
        vec![
            self.tools(),
            self.thinking(),
            self.image(),
            self.long_input(),
            self.count_tokens(),
            self.failover(),
            self.betas(),
            self.usage(),
        ]
    }

    /// What a failing cell's engineer needs: every refusal with an excerpt of what was
    /// refused, and every failed turn's output.
    pub(super) fn details(&self) -> String {
        let mut out = format!("== {} ({:.1} s)\n", self.kind, self.elapsed.as_secs_f64());
        for (i, r) in self.ran.iter().enumerate() {
            out += &format!(
                "  step {i} `{}`: ok={} turns={} result={}\n",
                STEPS[i].prompt,
                r.turn.ok,
                r.turn.num_turns,
                tidy(&r.turn.result)
            );
            for (name, seen, (from, to)) in [
                ("first", &self.first, r.first),
                ("second", &self.second, r.second),
            ] {
                for (j, req) in seen.requests[from..to].iter().enumerate() {
                    let messages = req.body["messages"].as_array();
                    let last = messages
                        .and_then(|m| m.iter().rev().find(|m| m["role"] != "system"))
                        .map(|m| tidy(&m.to_string()).chars().take(90).collect::<String>())
                        .unwrap_or_default();
                    out += &format!(
                        "    {name}#{} {} {} bytes, {} messages, refused={}: {last}\n",
                        from + j,
                        req.path,
                        req.body_bytes,
                        messages.map_or(0, Vec::len),
                        seen.refused(from + j)
                    );
                }
            }
        }
        for (name, seen) in self.both() {
            for r in &seen.refusals {
                let req = &seen.requests[r.request_index];
                let keys: Vec<&String> = req
                    .body
                    .as_object()
                    .map(|o| o.keys().collect())
                    .unwrap_or_default();
                let betas = req
                    .headers
                    .iter()
                    .find(|(k, _)| k == "anthropic-beta")
                    .map(|(_, v)| v.as_str())
                    .unwrap_or("");
                out += &format!(
                    "  {name} refused {} {} ({} bytes; keys {keys:?}; anthropic_beta {}; header betas {betas}): {}\n",
                    r.status, req.path, req.body_bytes, req.body["anthropic_beta"], r.message
                );
            }
        }
        for row in &self.rows {
            out += &format!(
                "  row {} {} {:?} {} in={} out={} read={} {} {}\n",
                row.endpoint,
                row.status,
                row.upstream,
                row.model,
                row.input_tokens,
                row.output_tokens,
                row.cache_read_tokens,
                row.usage_source,
                row.route_reason
            );
        }
        out
    }
}
