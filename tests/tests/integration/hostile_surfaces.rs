//! The hostile-input suite's newer surfaces, counted into the same figure by
//! `hostile::hostile_inputs_are_answered_right_without_panics_or_secrets`:
//!
//! - the tray's app API and status line: hostile `x-claude-code-session-id` (and agent id,
//!   user-agent, model) values on inference, which must be dropped from the tags and never
//!   break the Projects, Sessions, charts or status-line views; a `~/.claude/projects` with
//!   symbolic links out of it (project dir, transcript, subagents dir, `/dev/zero`), a
//!   50 MB one-line transcript (sparse on disk), non-UTF-8 bytes and names, `..` names,
//!   deep nesting, a FIFO and hostile `cwd` values, which the transcript index must read
//!   bounded and quickly without following a link; `gatehouse-statusline`'s logic given
//!   hostile stdin JSON;
//! - usage export: every CSV cell a spreadsheet would run as a formula (`=`, `+`, `-`, `@`,
//!   tab, carriage return first) comes out with a `'` before it, whatever carried it in
//!   (model ids, session ids, project names read from transcripts);
//! - Gatehouse-run `web_fetch` / `web_search`: metadata, loopback, unspecified and private
//!   addresses in every spelling (decimal, octal, hex, IPv4 in IPv6, a name resolving to
//!   loopback) and behind redirects, proved unreached by a listener that records every
//!   connection; an oversized page (cut, never buffered whole: the page's server counts
//!   what it was made to send), slow pages (the time limit), and SearXNG answers that are
//!   huge, malformed, not JSON, of the wrong types, slow or refused.
//!
//! Each input is one line of the tally: right or wrong (with why), and every answer's text
//! is searched for pieces of the secrets in play. The team console's surface is in
//! `hostile_console`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use fake_upstream::{FakeConfig, FakeUpstream};
use futures_util::StreamExt;
use gatehouse_desktop::app::App;
use gatehouse_desktop::transcripts::{self, Limits};
use gatehouse_engine::deps::{CredentialStore, MapEnvironment};
use gatehouse_tests::desktop::{Desk, desktop_deps};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway};
use serde_json::{Value, json};

use super::hostile::{request, send};

/// The inputs of one surface: how many, how many answered right, which did not (and why),
/// and how many answers carried a piece of a secret.
#[derive(Default)]
pub(crate) struct Tally {
    pub tried: usize,
    pub right: usize,
    pub leaks: usize,
    pub wrong: Vec<String>,
    pieces: Vec<String>,
}

impl Tally {
    pub(crate) fn new(secrets: &[&str]) -> Tally {
        Tally {
            pieces: pieces(secrets),
            ..Tally::default()
        }
    }

    /// One input: right when `ok` and `text` (everything the input got back) holds no
    /// piece of a secret.
    pub(crate) fn input(&mut self, name: &str, ok: bool, why: impl std::fmt::Display, text: &str) {
        self.tried += 1;
        let leaked = self.pieces.iter().any(|p| text.contains(p.as_str()));
        self.leaks += usize::from(leaked);
        if ok && !leaked {
            self.right += 1;
        } else {
            let why = why.to_string();
            let why: String = why.chars().take(400).collect();
            self.wrong.push(format!(
                "{name}: {why}{}",
                if leaked { " (leak)" } else { "" }
            ));
        }
    }

    pub fn add(&mut self, other: Tally) {
        self.tried += other.tried;
        self.right += other.right;
        self.leaks += other.leaks;
        self.wrong.extend(other.wrong);
    }
}

/// Every 12-character window of each secret.
fn pieces(secrets: &[&str]) -> Vec<String> {
    secrets
        .iter()
        .filter(|s| s.len() >= 12)
        .flat_map(|s| {
            let c: Vec<char> = s.chars().collect();
            c.windows(12).map(String::from_iter).collect::<Vec<_>>()
        })
        .collect()
}

/// A first character a spreadsheet runs as a formula.
fn formula_start(cell: &str) -> bool {
    cell.starts_with(['=', '+', '-', '@', '\t', '\r'])
}

/// The cells of a CSV text (RFC 4180: quoted cells may hold commas, quotes and line ends).
fn csv_cells(text: &str) -> Option<Vec<Vec<String>>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut cell = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') if cell.is_empty() => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => cell.push(c),
        }
    }
    if quoted {
        return None;
    }
    if !cell.is_empty() || !row.is_empty() {
        row.push(cell);
        rows.push(row);
    }
    Some(rows)
}

// ---------------------------------------------------------------------------------------
// The tray: transcripts, app API, status line, export.
// ---------------------------------------------------------------------------------------

const GOOD: &str = "0b5e1c2a-0000-4c1e-9a11-00000000000a";
const LINKED_DIR: &str = "0b5e1c2a-0000-4c1e-9a11-00000000000b";
const LINKED_FILE: &str = "0b5e1c2a-0000-4c1e-9a11-00000000000c";
const DEV_ZERO: &str = "0b5e1c2a-0000-4c1e-9a11-00000000000d";
const LINKED_SUBAGENTS: &str = "0b5e1c2a-0000-4c1e-9a11-00000000000e";
const HUGE: &str = "0b5e1c2a-0000-4c1e-9a11-00000000000f";
const BYTES: &str = "0b5e1c2a-0000-4c1e-9a11-000000000010";
const DEEP: &str = "0b5e1c2a-0000-4c1e-9a11-000000000011";
const FIFO: &str = "0b5e1c2a-0000-4c1e-9a11-000000000012";
const REL_CWD: &str = "0b5e1c2a-0000-4c1e-9a11-000000000013";
const CTRL_CWD: &str = "0b5e1c2a-0000-4c1e-9a11-000000000014";
const LONG_CWD: &str = "0b5e1c2a-0000-4c1e-9a11-000000000015";
const NESTED_SUB: &str = "0b5e1c2a-0000-4c1e-9a11-000000000016";
/// Sessions whose project names a spreadsheet would run (`/work/<name>`).
const FORMULA_PROJECTS: [(&str, &str); 4] = [
    (
        "0b5e1c2a-0000-4c1e-9a11-000000000020",
        "=HYPERLINK(\"https:evil.example\",\"x\")",
    ),
    (
        "0b5e1c2a-0000-4c1e-9a11-000000000021",
        "@SUM(1+1)*cmd|' -C calc'!A0",
    ),
    ("0b5e1c2a-0000-4c1e-9a11-000000000022", "+1+1"),
    ("0b5e1c2a-0000-4c1e-9a11-000000000023", "-2+3"),
];

fn line(id: &str, cwd: &str) -> String {
    format!(
        "{}\n",
        json!({"type": "user", "sessionId": id, "cwd": cwd, "message": {"role": "user", "content": "hi"}})
    )
}

fn write(path: &Path, text: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `<claude>/projects` as a hostile machine may have it; what lies outside is under
/// `outside`.
fn hostile_projects(claude: &Path, outside: &Path) {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;
    let projects = claude.join("projects");
    let shop = projects.join("-work-shop");
    write(
        &shop.join(format!("{GOOD}.jsonl")),
        line(GOOD, "/work/shop"),
    );
    for (id, name) in FORMULA_PROJECTS {
        write(
            &projects
                .join(format!("-work-f{}", &id[id.len() - 2..]))
                .join(format!("{id}.jsonl")),
            line(id, &format!("/work/{name}")),
        );
    }
    // Links out of the directory: a project dir, a transcript, a subagents dir, a device.
    write(
        &outside
            .join("secretproj")
            .join(format!("{LINKED_DIR}.jsonl")),
        line(LINKED_DIR, "/outside/secretproj"),
    );
    symlink(outside.join("secretproj"), projects.join("-work-linked")).unwrap();
    write(
        &outside.join("leak.jsonl"),
        line(LINKED_FILE, "/outside/leak"),
    );
    symlink(
        outside.join("leak.jsonl"),
        shop.join(format!("{LINKED_FILE}.jsonl")),
    )
    .unwrap();
    symlink("/dev/zero", shop.join(format!("{DEV_ZERO}.jsonl"))).unwrap();
    write(
        &outside.join("subs").join("agent-a1.jsonl"),
        line(LINKED_SUBAGENTS, "/outside/subs"),
    );
    std::fs::create_dir_all(shop.join(LINKED_SUBAGENTS)).unwrap();
    symlink(
        outside.join("subs"),
        shop.join(LINKED_SUBAGENTS).join("subagents"),
    )
    .unwrap();
    // 50 MB of one line, its cwd in it: sparse past the first kilobyte.
    let huge = projects.join("-work-huge").join(format!("{HUGE}.jsonl"));
    write(
        &huge,
        format!(
            r#"{{"sessionId":"{HUGE}","cwd":"/work/huge","pad":"{}"#,
            "a".repeat(1000)
        ),
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&huge)
        .unwrap()
        .set_len(50 << 20)
        .unwrap();
    // Non-UTF-8 bytes in a line, a whole line of them, a file and a dir named by them.
    let bytes = projects.join("-work-bytes");
    let mut raw = format!(r#"{{"sessionId":"{BYTES}","cwd":"/work/b"#).into_bytes();
    raw.extend_from_slice(b"\xff\xfe\"}\n\xc3\x28\xa0\xa1\xff\n");
    write(&bytes.join(format!("{BYTES}.jsonl")), raw);
    write(
        &bytes.join(std::ffi::OsStr::from_bytes(b"\xff\xfe.jsonl")),
        line("0b5e1c2a-0000-4c1e-9a11-0000000000ff", "/work/bytes-name"),
    );
    write(
        &projects
            .join(std::ffi::OsStr::from_bytes(b"-work-\xff"))
            .join("x.jsonl"),
        line("0b5e1c2a-0000-4c1e-9a11-0000000000fe", "/work/bytes-dir"),
    );
    // `..` in names and ids.
    let dots = projects.join("-work-dots");
    write(&dots.join("..evil.jsonl"), line("../../etc/passwd", "/etc"));
    write(&dots.join("a..b.jsonl"), line("..", "/"));
    write(&dots.join("...jsonl"), line("../x", "/"));
    // Deep nesting: a transcript 100 directories down, one below `subagents/`.
    let mut deep = projects.join("-work-deep");
    for _ in 0..100 {
        deep.push("d");
    }
    write(
        &deep.join(format!("{DEEP}.jsonl")),
        line(DEEP, "/work/deep"),
    );
    write(
        &projects
            .join("-work-deep")
            .join(NESTED_SUB)
            .join("subagents")
            .join("x")
            .join("y")
            .join("agent-1.jsonl"),
        line(NESTED_SUB, "/work/nested"),
    );
    // A FIFO named as a transcript: opening it would wait for a writer forever.
    let fifo = shop.join(format!("{FIFO}.jsonl"));
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // Hostile cwd values: relative, a control character, 10 KB.
    let cwds = projects.join("-work-cwds");
    write(
        &cwds.join(format!("{REL_CWD}.jsonl")),
        line(REL_CWD, "work/rel"),
    );
    write(
        &cwds.join(format!("{CTRL_CWD}.jsonl")),
        line(CTRL_CWD, "/work/a\u{7}\u{1b}[31mb"),
    );
    write(
        &cwds.join(format!("{LONG_CWD}.jsonl")),
        line(LONG_CWD, &format!("/{}", "w".repeat(10_000))),
    );
}

/// The transcript index over the hostile `projects`, case by case.
async fn transcript_index(t: &mut Tally, claude: &Path) {
    let dir = claude.to_owned();
    let started = Instant::now();
    let index = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::task::spawn_blocking(move || transcripts::scan(&dir, &Limits::default())),
    )
    .await;
    let took = started.elapsed();
    let Ok(Ok(index)) = index else {
        t.input(
            "transcript scan",
            false,
            format!("no index after {took:?}"),
            "",
        );
        return;
    };
    let path = |id: &str| index.project_of(id).and_then(|p| p.path.clone());
    let name = |id: &str| index.project_of(id).map(|p| p.name.clone());
    let quick = took < Duration::from_secs(5);
    t.input(
        "transcripts: a plain session beside the hostile ones",
        path(GOOD).as_deref() == Some("/work/shop"),
        format!("{:?}", index.project_of(GOOD)),
        "",
    );
    for (case, id) in [
        ("transcripts: symlinked project dir", LINKED_DIR),
        ("transcripts: symlinked transcript", LINKED_FILE),
        ("transcripts: transcript linked to /dev/zero", DEV_ZERO),
        ("transcripts: symlinked subagents dir", LINKED_SUBAGENTS),
        ("transcripts: FIFO named as a transcript", FIFO),
        ("transcripts: transcript 100 dirs deep", DEEP),
        ("transcripts: below subagents/x/y", NESTED_SUB),
    ] {
        let p = path(id).unwrap_or_default();
        t.input(
            case,
            quick && !p.starts_with("/outside") && !p.contains("deep") && !p.contains("nested"),
            format!("{:?} after {took:?}", index.project_of(id)),
            "",
        );
    }
    t.input(
        "transcripts: 50 MB one-line transcript",
        quick && path(HUGE).as_deref() != Some("/work/huge"),
        format!("{:?} after {took:?}", index.project_of(HUGE)),
        "",
    );
    t.input(
        "transcripts: non-UTF-8 bytes and names",
        path(BYTES).is_none_or(|p| !p.contains('\u{fffd}'))
            && index
                .project_of("0b5e1c2a-0000-4c1e-9a11-0000000000ff")
                .is_none()
            && index
                .project_of("0b5e1c2a-0000-4c1e-9a11-0000000000fe")
                .is_none(),
        format!("{:?}", index.project_of(BYTES)),
        "",
    );
    t.input(
        "transcripts: `..` in file names and ids",
        ["../../etc/passwd", "..", "../x", "..evil", "a..b", "."]
            .iter()
            .all(|id| index.project_of(id).is_none()),
        "a `..` id was indexed",
        "",
    );
    for (case, id) in [
        ("transcripts: relative cwd", REL_CWD),
        ("transcripts: cwd with control characters", CTRL_CWD),
        ("transcripts: 10 KB cwd", LONG_CWD),
    ] {
        t.input(
            case,
            path(id).is_none() && name(id).is_none_or(|n| !n.contains('\u{7}')),
            format!("{:?}", index.project_of(id)),
            "",
        );
    }
}

/// One hostile tag case: `(name, header lines, model, the session id that may be kept)`.
type TagCase = (
    &'static str,
    Vec<(String, String)>,
    String,
    Option<&'static str>,
);

/// Hostile tag headers on inference through the tray's gateway.
fn hostile_tags() -> Vec<TagCase> {
    let sid = |v: &str| vec![("x-claude-code-session-id".to_owned(), v.to_owned())];
    let haiku = "claude-haiku-4-5".to_owned();
    vec![
        (
            "session id: 129 characters",
            sid(&"a".repeat(129)),
            haiku.clone(),
            None,
        ),
        (
            "session id: 8 KB",
            sid(&"b".repeat(8_000)),
            haiku.clone(),
            None,
        ),
        (
            "session id: ../../etc/passwd",
            sid("../../etc/passwd"),
            haiku.clone(),
            None,
        ),
        (
            "session id: encoded traversal",
            sid("..%2F..%2Fetc"),
            haiku.clone(),
            None,
        ),
        ("session id: tab inside", sid("a\tb"), haiku.clone(), None),
        (
            "session id: control character",
            sid("a\u{1}b"),
            haiku.clone(),
            None,
        ),
        (
            "session id: escape sequence",
            sid("\u{1b}[31mred"),
            haiku.clone(),
            None,
        ),
        (
            "session id: UTF-8",
            sid("séance-ü-会话"),
            haiku.clone(),
            None,
        ),
        (
            "session id: right-to-left override",
            sid("\u{202e}gpj.exe"),
            haiku.clone(),
            None,
        ),
        (
            "session id: SQL quote",
            sid("x' OR '1'='1"),
            haiku.clone(),
            None,
        ),
        (
            "session id: SQL statement",
            sid("1;DROP TABLE usage_rows;--"),
            haiku.clone(),
            None,
        ),
        (
            "session id: formula",
            sid("=HYPERLINK(\"http://evil\")"),
            haiku.clone(),
            None,
        ),
        (
            "session id: @ formula",
            sid("@SUM(A1)"),
            haiku.clone(),
            None,
        ),
        ("session id: empty", sid(""), haiku.clone(), None),
        ("session id: spaces only", sid("   "), haiku.clone(), None),
        (
            "session id: leading dash (kept, defused in the export)",
            sid("-1-cmd"),
            haiku.clone(),
            Some("-1-cmd"),
        ),
        (
            "session id: twice",
            vec![
                ("x-claude-code-session-id".to_owned(), GOOD.to_owned()),
                ("x-claude-code-session-id".to_owned(), "../x".to_owned()),
            ],
            haiku.clone(),
            Some(GOOD),
        ),
        (
            "agent ids: traversal and 200 characters",
            vec![
                ("x-claude-code-session-id".to_owned(), GOOD.to_owned()),
                ("x-claude-code-agent-id".to_owned(), "../../etc".to_owned()),
                ("x-claude-code-parent-agent-id".to_owned(), "p".repeat(200)),
                (
                    "x-claude-code-request-class".to_owned(),
                    "'; DROP".to_owned(),
                ),
            ],
            haiku.clone(),
            Some(GOOD),
        ),
        (
            "user-agent: formula token",
            vec![("user-agent".to_owned(), "=1+2 (evil)".to_owned())],
            haiku.clone(),
            None,
        ),
        // Sessions whose transcripts are links or hostile files: kept as ids, no project.
        (
            "session of a linked project dir",
            sid(LINKED_DIR),
            haiku.clone(),
            Some(LINKED_DIR),
        ),
        (
            "session of a linked transcript",
            sid(LINKED_FILE),
            haiku.clone(),
            Some(LINKED_FILE),
        ),
        (
            "session of the 50 MB transcript",
            sid(HUGE),
            haiku.clone(),
            Some(HUGE),
        ),
        ("session of the FIFO", sid(FIFO), haiku.clone(), Some(FIFO)),
        (
            "session of a formula project",
            sid(FORMULA_PROJECTS[0].0),
            haiku.clone(),
            Some(FORMULA_PROJECTS[0].0),
        ),
        (
            "session of an @ project",
            sid(FORMULA_PROJECTS[1].0),
            haiku.clone(),
            Some(FORMULA_PROJECTS[1].0),
        ),
        (
            "session of a + project",
            sid(FORMULA_PROJECTS[2].0),
            haiku.clone(),
            Some(FORMULA_PROJECTS[2].0),
        ),
        (
            "session of a - project",
            sid(FORMULA_PROJECTS[3].0),
            haiku.clone(),
            Some(FORMULA_PROJECTS[3].0),
        ),
        // Model ids a caller controls, as they may reach the export's model columns.
        (
            "model: =formula",
            sid(GOOD),
            "=HYPERLINK(\"http://evil\",\"x\")".into(),
            Some(GOOD),
        ),
        ("model: +formula", sid(GOOD), "+1+1".into(), Some(GOOD)),
        ("model: -formula", sid(GOOD), "-2+3".into(), Some(GOOD)),
        ("model: @formula", sid(GOOD), "@SUM(A1)".into(), Some(GOOD)),
        ("model: tab first", sid(GOOD), "\tx".into(), Some(GOOD)),
        (
            "model: carriage return first",
            sid(GOOD),
            "\rx".into(),
            Some(GOOD),
        ),
    ]
}

/// The tray: transcripts, hostile tags on inference, its views, the status line and the
/// export.
pub(crate) async fn tray() -> Tally {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let claude = dir.path().join("claude");
    let outside = dir.path().join("outside");
    hostile_projects(&claude, &outside);
    let env = MapEnvironment::default()
        .with_var("GATEHOUSE_ANTHROPIC_BASE_URL", &fake.url())
        .with_var(
            "GATEHOUSE_BOOTSTRAP_FILE",
            dir.path().join("no-bootstrap.json").to_str().unwrap(),
        )
        .with_var("CLAUDE_CONFIG_DIR", claude.to_str().unwrap());
    let (deps, parts) = desktop_deps(dir.path(), env);
    let data_dir = deps.data_dir.clone();
    let app = App::start(deps).await.unwrap();
    let desk = Desk::new(&app);
    let (status, _) = desk
        .post(
            "providers",
            json!({"kind": "anthropic", "api_key": OPERATOR_KEY}),
        )
        .await;
    assert_eq!(status, 200);
    let local = parts
        .keychain
        .get("gatehouse", "local-token")
        .unwrap()
        .unwrap();
    let local = local.expose().to_owned();
    let status_token = std::fs::read_to_string(data_dir.join(gatehouse_statusline::FILE))
        .ok()
        .and_then(|s| serde_json::from_str::<Value>(&s).ok())
        .and_then(|v| v["token"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let mut t = Tally::new(&[OPERATOR_KEY, &local, &desk.token, &status_token]);

    transcript_index(&mut t, &claude).await;

    // Hostile tags on inference, each request marked by its own (well-formed) agent id so
    // its row can be found: the tags it stored must be only the well-formed ones.
    let addr: SocketAddr = app
        .base_url()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let cases = hostile_tags();
    let mut answered = Vec::new();
    for (i, (name, headers, model, _)) in cases.iter().enumerate() {
        let body = json!({"model": model, "max_tokens": 16,
                          "messages": [{"role": "user", "content": "hi"}]})
        .to_string();
        let marker = format!("hostile-{i}");
        let auth = format!("Bearer {local}");
        let mut h: Vec<(&str, &str)> = vec![
            ("authorization", &auth),
            ("content-type", "application/json"),
        ];
        if !headers.iter().any(|(k, _)| k == "x-claude-code-agent-id") {
            h.push(("x-claude-code-agent-id", &marker));
        }
        for (k, v) in headers {
            h.push((k, v));
        }
        let (status, answer) =
            send(addr, &request("POST", "/v1/messages", &h, body.as_bytes())).await;
        answered.push((status, String::from_utf8_lossy(&answer).into_owned(), *name));
    }
    // The rows the answered requests left (written in batches after the answers).
    let expected_rows = answered.iter().filter(|a| a.0 == 200).count();
    let mut rows = Vec::new();
    for _ in 0..100 {
        rows = app.store().recent_usage(10_000).await.unwrap();
        if rows.len() >= expected_rows {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (i, ((status, text, name), (_, headers, _, kept))) in
        answered.iter().zip(&cases).enumerate()
    {
        let marker = format!("hostile-{i}");
        let own_agent = !headers.iter().any(|(k, _)| k == "x-claude-code-agent-id");
        let row = rows.iter().find(|r| {
            if own_agent {
                r.tags.agent_id.as_deref() == Some(marker.as_str())
            } else {
                r.tags.agent_id.is_none()
                    && r.tags.parent_agent_id.is_none()
                    && r.tags.session_id.as_deref() == Some(GOOD)
                    && r.tags.request_class.is_none()
            }
        });
        let (ok, why) = match (*status, row) {
            // Refused at the edge (a control character in a header) or by the model check.
            (400 | 404, _) => (true, String::new()),
            (200, Some(r)) => (
                r.tags.session_id.as_deref() == *kept
                    && r.tags.client.as_deref().is_none_or(|c| !c.contains(' '))
                    && r.tags
                        .agent_id
                        .as_deref()
                        .is_none_or(transcripts::valid_session_id),
                format!("stored {:?}", r.tags),
            ),
            (200, None) => (false, "no usage row".into()),
            (s, _) => (
                false,
                format!("status {s}: {}", text.lines().last().unwrap_or_default()),
            ),
        };
        t.input(name, ok, why, text);
    }
    // The same ids stored as they are: nothing hostile survived anywhere.
    let bad_id = rows.iter().find(|r| {
        [
            &r.tags.session_id,
            &r.tags.agent_id,
            &r.tags.parent_agent_id,
        ]
        .iter()
        .filter_map(|v| v.as_deref())
        .any(|v| !gatehouse_engine::metering::tags::valid_id(v.as_bytes()))
    });
    t.input(
        "stored tags are all well-formed",
        bad_id.is_none(),
        format!("{bad_id:?}"),
        "",
    );

    // The views over those rows: they answer, quickly, and name nothing outside.
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let mut views: Vec<(String, &'static [u16])> = vec![
        ("insight/projects?days=30".into(), &[200]),
        ("insight/sessions?days=30&limit=500".into(), &[200]),
        ("insight/charts?days=7".into(), &[200]),
        (format!("insight/sessions/{GOOD}"), &[200]),
        (format!("insight/sessions/{LINKED_DIR}"), &[200]),
        (format!("insight/sessions/{HUGE}"), &[200]),
        (
            "insight/sessions/..%2F..%2Fetc%2Fpasswd".into(),
            &[400, 404],
        ),
        (
            format!("insight/sessions/{}", "a".repeat(5_000)),
            &[400, 404, 414],
        ),
        ("insight/sessions/%00".into(), &[400, 404]),
        ("insight/sessions/%E2%80%AEx".into(), &[400, 404]),
    ];
    for q in [
        "'; DROP TABLE usage_rows;--",
        "%",
        "_",
        "\u{0}",
        &"q".repeat(5_000),
        "..",
        "=1+2",
    ] {
        views.push((format!("insight/sessions?q={}", enc(q)), &[200, 400]));
    }
    for (path, right) in views {
        let started = Instant::now();
        let (status, body) = desk.call(reqwest::Method::GET, &path, None).await;
        let text = body.to_string();
        let outside_named = text.contains("/outside") || text.contains("secretproj");
        let ok = right.contains(&status)
            && started.elapsed() < Duration::from_secs(10)
            && !outside_named;
        let name: String = path.chars().take(60).collect();
        t.input(
            &format!("view {name}"),
            ok,
            format!("{status}: {}", &text[..text.len().min(300)]),
            &text,
        );
    }

    // The status line route with hostile session ids: a line's figures, never an error.
    for id in [
        "../../etc/passwd",
        &"s".repeat(10_000),
        "%00",
        "\u{202e}x",
        "x' OR '1'='1",
        LINKED_FILE,
        "",
    ] {
        let r = desk
            .http
            .get(format!("{}/gatehouse/app/statusline", app.base_url()))
            .query(&[("session_id", id)])
            .bearer_auth(&status_token)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        // A 10 KB id makes the request target too long: refused at the edge.
        let ok = (status == 414 && id.len() > 8_192)
            || (status == 200
                && v["today_cost_micro_usd"].is_u64()
                && (id == LINKED_FILE || v["session_cost_micro_usd"].is_null()));
        let name: String = id.chars().take(30).collect();
        t.input(
            &format!("status line route, session {name:?}"),
            ok,
            format!("{status}: {text}"),
            &text,
        );
    }

    // gatehouse-statusline's logic (what the binary runs after its bounded stdin read)
    // against this tray, with hostile status JSON.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let nested_obj = format!(
        r#"{{"session_id":{}"x"{}}}"#,
        r#"{"a":"#.repeat(10_000),
        "}".repeat(10_000)
    );
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        (
            "statusline stdin: 1 MB session id",
            format!(r#"{{"session_id":"{}"}}"#, "\u{202e}<x>".repeat(100_000)).into_bytes(),
        ),
        (
            "statusline stdin: non-UTF-8",
            b"\xff\xfe{\"session_id\":\"\xc3\x28\"}".to_vec(),
        ),
        ("statusline stdin: 100,000-deep arrays", deep.into_bytes()),
        (
            "statusline stdin: 10,000-deep objects",
            nested_obj.into_bytes(),
        ),
        (
            "statusline stdin: session id a number",
            br#"{"session_id":12345678901234567890123}"#.to_vec(),
        ),
        (
            "statusline stdin: session id an object",
            br#"{"session_id":{"$ne":null},"model":7}"#.to_vec(),
        ),
        (
            "statusline stdin: session id traversal",
            br#"{"session_id":"../../etc/passwd"}"#.to_vec(),
        ),
        ("statusline stdin: JSON null", b"null".to_vec()),
        ("statusline stdin: empty", Vec::new()),
        (
            "statusline stdin: a session of a linked transcript",
            format!(r#"{{"session_id":"{LINKED_FILE}"}}"#).into_bytes(),
        ),
    ];
    for (name, input) in inputs {
        let data = data_dir.clone();
        let started = Instant::now();
        let out = tokio::task::spawn_blocking(move || {
            let bounded = &input[..input.len().min(gatehouse_statusline::MAX_STDIN as usize)];
            gatehouse_statusline::line(&data, bounded)
        })
        .await;
        let took = started.elapsed();
        let (ok, why, text) = match out {
            Ok(l) => (
                !l.is_empty()
                    && !l.contains('\n')
                    && l != gatehouse_statusline::FALLBACK
                    && l.contains("today")
                    && took < gatehouse_statusline::DEADLINE + Duration::from_millis(500),
                format!("{l:?} after {took:?}"),
                l,
            ),
            Err(e) => (false, format!("{e}"), String::new()),
        };
        t.input(name, ok, why, &text);
    }

    // The export, every grouping: each cell a spreadsheet would run is defused, and the
    // hostile values that reached it are there, defused.
    // What a caller's values put in the cells: the stored models and session ids that
    // start like a formula (a model id only when the gateway served it; session ids as
    // tags.rs keeps them), and the project names the transcripts give.
    let armed_in = |v: &str| formula_start(v).then(|| format!("'{v}"));
    let models: Vec<String> = rows.iter().filter_map(|r| armed_in(&r.model)).collect();
    let sessions: Vec<String> = rows
        .iter()
        .filter_map(|r| r.tags.session_id.as_deref().and_then(armed_in))
        .collect();
    let projects: Vec<String> = FORMULA_PROJECTS
        .iter()
        .map(|(_, n)| format!("'{n}"))
        .collect();
    let raw: Vec<String> = [&models[..], &sessions[..], &projects[..]].concat();
    let by_session: Vec<String> = [&sessions[..], &projects[..]].concat();
    let none: Vec<String> = Vec::new();
    for (query, must_hold) in [
        ("format=csv&group=raw", &raw),
        ("format=csv&group=model", &models),
        ("format=csv&group=project", &projects),
        ("format=csv&group=session", &by_session),
        ("format=csv&group=day", &none),
        ("format=json&group=raw", &none),
    ] {
        let r = desk
            .http
            .get(format!(
                "{}/gatehouse/app/usage/export?{query}",
                app.base_url()
            ))
            .header("x-gatehouse-app-token", &desk.token)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        let (ok, why) = if query.starts_with("format=json") {
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            (
                status == 200 && v.as_array().is_some_and(|a| a.len() >= expected_rows),
                format!("{status}: {} rows", v.as_array().map_or(0, Vec::len)),
            )
        } else {
            match csv_cells(&text) {
                None => (false, "not CSV".to_owned()),
                Some(rows) => {
                    let armed: Vec<&String> =
                        rows.iter().flatten().filter(|c| formula_start(c)).collect();
                    let missing: Vec<&String> = must_hold
                        .iter()
                        .filter(|m| !rows.iter().flatten().any(|c| c == *m))
                        .collect();
                    let outside = text.contains("/outside") || text.contains("secretproj");
                    (
                        status == 200 && armed.is_empty() && missing.is_empty() && !outside,
                        format!(
                            "{status}: armed {armed:?}, missing {missing:?}, outside {outside}"
                        ),
                    )
                }
            }
        };
        t.input(&format!("export {query}"), ok, why, &text);
    }

    // The tray is still whole.
    let (status, _) = desk.call(reqwest::Method::GET, "state", None).await;
    assert_eq!(status, 200);
    app.shutdown().await;
    t
}

// ---------------------------------------------------------------------------------------
// Gatehouse-run web_fetch and web_search.
// ---------------------------------------------------------------------------------------

/// A listener on every interface (IPv6 and IPv4 where it can).
async fn any_interface() -> tokio::net::TcpListener {
    match tokio::net::TcpListener::bind("[::]:0").await {
        Ok(l) => l,
        Err(_) => tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap(),
    }
}

/// A listener that answers every connection with a small page and counts them: no
/// forbidden URL may ever reach it.
async fn recorder() -> (u16, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let hits = Arc::new(AtomicUsize::new(0));
    let listener = any_interface().await;
    let port = listener.local_addr().unwrap().port();
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 22\r\nconnection: close\r\n\r\nrecorder secret: 12345")
                    .await;
            });
        }
    });
    (port, hits)
}

/// Pages for the fetch and search cases, on every interface: `/to?u=` redirects to `u`,
/// `/loop` to itself, `/big` streams 64 MB (what it was made to send is counted),
/// `/slow` sends its head and then a byte a second, `/slowhead` waits before its head,
/// `/binary` is not text, `/search` is a hostile SearXNG chosen by `q`.
async fn pages() -> (u16, Arc<AtomicUsize>) {
    #[derive(Clone)]
    struct S {
        sent: Arc<AtomicUsize>,
    }
    async fn to(Query(q): Query<Vec<(String, String)>>) -> Response {
        let u = q
            .iter()
            .find(|(k, _)| k == "u")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        (StatusCode::FOUND, [(header::LOCATION, u)], "").into_response()
    }
    async fn big(State(s): State<S>) -> Response {
        let chunk = bytes::Bytes::from(vec![b'a'; 64 * 1024]);
        let stream = futures_util::stream::iter(0..1024).map(move |_| {
            s.sent.fetch_add(chunk.len(), Ordering::SeqCst);
            Ok::<_, std::io::Error>(chunk.clone())
        });
        (
            [(header::CONTENT_TYPE, "text/plain")],
            axum::body::Body::from_stream(stream),
        )
            .into_response()
    }
    async fn slow() -> Response {
        let stream = futures_util::stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Some((Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"a")), ()))
        });
        (
            [(header::CONTENT_TYPE, "text/plain")],
            axum::body::Body::from_stream(stream),
        )
            .into_response()
    }
    async fn search(Query(q): Query<Vec<(String, String)>>) -> Response {
        let q = q
            .iter()
            .find(|(k, _)| k == "q")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let json_ct = [(header::CONTENT_TYPE, "application/json")];
        match q.as_str() {
            "huge" => {
                // 8 MB of results: over the 4 MB the search reads.
                let one = json!({"url": "https://example.com/x", "title": "t", "content": "c".repeat(1000)});
                let results = vec![one; 8_000];
                (json_ct, json!({"results": results}).to_string()).into_response()
            }
            "malformed" => (json_ct, r#"{"results":[{"url":"https://a.example/","title":"#).into_response(),
            "html" => ([(header::CONTENT_TYPE, "text/html")], "<html><body>SearXNG error</body></html>").into_response(),
            "types" => (json_ct, r#"{"results":"none","number_of_results":"many"}"#).into_response(),
            "fields" => (
                json_ct,
                r#"{"results":[{"url":5,"title":["t"],"content":{"a":1},"publishedDate":[]},{"url":"javascript:alert(1)"},{"url":"file:///etc/passwd"},{"url":"https://ok.example/","title":"\u0000\u001b[31m","content":null}]}"#,
            )
                .into_response(),
            "deep" => (json_ct, format!(r#"{{"results":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000))).into_response(),
            "bytes" => (json_ct, b"{\"results\":[{\"url\":\"https://a.example/\xff\xfe\",\"title\":\"\xc3\x28\"}]}".to_vec()).into_response(),
            "refused" => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
            "limited" => (StatusCode::TOO_MANY_REQUESTS, "slow down").into_response(),
            "redirect" => (StatusCode::FOUND, [(header::LOCATION, "http://169.254.169.254/")], "").into_response(),
            "slow" => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                (json_ct, r#"{"results":[]}"#).into_response()
            }
            _ => (json_ct, r#"{"results":[]}"#).into_response(),
        }
    }
    let sent = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route("/to", get(to))
        .route(
            "/loop",
            get(|| async {
                (StatusCode::FOUND, [(header::LOCATION, "/loop")], "").into_response()
            }),
        )
        .route("/big", get(big))
        .route("/slow", get(slow))
        .route(
            "/slowhead",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        )
        .route(
            "/binary",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/octet-stream")],
                    vec![0u8, 159, 146, 150],
                )
            }),
        )
        .route(
            "/latin1",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html; charset=iso-8859-1")],
                    b"<title>\xe9t\xe9</title><p>\xff\xfe caf\xe9</p>".to_vec(),
                )
            }),
        )
        .route("/search", get(search))
        .with_state(S { sent: sent.clone() });
    let listener = any_interface().await;
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, sent)
}

/// This machine's address on its default route (no packet is sent), if it has one that
/// is neither loopback nor link-local: a page there is reachable without allowing
/// loopback.
fn interface_ip() -> Option<IpAddr> {
    let sock = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    ["192.0.2.1:9", "10.255.255.1:9", "8.8.8.8:53"]
        .iter()
        .find_map(|to| sock.connect(to).ok().and_then(|()| sock.local_addr().ok()))
        .map(|a| a.ip())
        .filter(|ip| {
            !ip.is_loopback()
                && !ip.is_unspecified()
                && !matches!(ip, IpAddr::V4(v4) if v4.is_link_local())
        })
}

fn tools_yaml(fake_url: &str, db: &Path, tools: &str) -> String {
    format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - name: compat
    provider: openai
    base_url: "{fake_url}/v1"
    auth: {{api_key: "{OPERATOR_KEY}"}}
models:
  - {{id: claude-sonnet-4-6, upstream_model: {{compat: fake-searcher}}}}
client_keys:
  - {{id: tester, key: "{CLIENT_KEY}"}}
server_tools:
{tools}
"#,
        db = db.display()
    )
}

async fn tools_gateway(tools: String) -> TestGateway {
    TestGateway::start_with(FakeConfig::default(), |url: &str, db: &Path| {
        tools_yaml(url, db, &tools)
    })
    .await
}

/// One tool turn through the gateway: the status, the tool's result block and the whole
/// answer's text.
async fn tool_turn(gw: &TestGateway, tool: &str, text: &str) -> (u16, Value, String, Duration) {
    let (ty, name) = match tool {
        "web_fetch" => ("web_fetch_20250910", "web_fetch"),
        _ => ("web_search_20250305", "web_search"),
    };
    let started = Instant::now();
    let r = gw
        .messages(json!({
            "model": "claude-sonnet-4-6", "max_tokens": 256,
            "tools": [{"type": ty, "name": name, "max_uses": 2}],
            "tool_choice": {"type": "tool", "name": name},
            "messages": [{"role": "user", "content": text}],
        }))
        .header("anthropic-beta", "web-fetch-2025-09-10")
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body = r.text().await.unwrap_or_default();
    let took = started.elapsed();
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let result = v["content"]
        .as_array()
        .and_then(|c| {
            c.iter().find(|b| {
                matches!(
                    b["type"].as_str(),
                    Some("web_fetch_tool_result" | "web_search_tool_result")
                )
            })
        })
        .cloned()
        .unwrap_or(Value::Null);
    (status, result, body, took)
}

/// The error code of a tool result, if it is an error.
fn error_code(result: &Value) -> Option<&str> {
    result["content"]["error_code"].as_str()
}

/// Gatehouse-run `web_fetch` and `web_search` against forbidden addresses, oversized and
/// slow pages and a hostile SearXNG.
pub(crate) async fn server_tools() -> Tally {
    let mut t = Tally::new(&[OPERATOR_KEY, CLIENT_KEY]);
    let (rec, hits) = recorder().await;
    let (pg, sent) = pages().await;

    // Loopback not allowed (private networks are, so a page on this machine's own
    // address can redirect): every spelling of loopback, metadata and the rest refused,
    // the recorder never reached.
    let strict = tools_gateway(
        "  web_fetch: {enabled: true, max_bytes: 1000, timeout_ms: 1500, allow_private_networks: true}\n  allow_loopback: false\n"
            .into(),
    )
    .await;
    let mut forbidden: Vec<String> = [
        "http://127.0.0.1:{R}/",
        "http://localhost:{R}/",
        "http://LOCALHOST.:{R}/",
        "http://0.0.0.0:{R}/",
        "http://0:{R}/",
        "http://2130706433:{R}/",
        "http://0x7f.1:{R}/",
        "http://0x7f000001:{R}/",
        "http://0177.0.0.1:{R}/",
        "http://127.1:{R}/",
        "http://[::1]:{R}/",
        "http://[::]:{R}/",
        "http://[::ffff:127.0.0.1]:{R}/",
        "http://[::127.0.0.1]:{R}/",
        "http://[::ffff:0:127.0.0.1]:{R}/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/latest/meta-data/",
        "http://[::ffff:a9fe:a9fe]/latest/meta-data/",
        "http://[64:ff9b::169.254.169.254]/",
        "http://[2002:a9fe:a9fe::1]/",
        "http://2852039166/latest/meta-data/",
        "http://0xa9fea9fe/latest/meta-data/",
        "http://0251.0376.0251.0376/latest/meta-data/",
        "http://169.254.169.254.:80/",
        "http://100.100.100.200/latest/meta-data/",
        "http://[fe80::1]/",
        "http://224.0.0.1/",
        "http://255.255.255.255/",
        "http://user:pw@127.0.0.1:{R}/",
        "file:///etc/passwd",
        "gopher://127.0.0.1:{R}/_GET",
        "ftp://127.0.0.1:{R}/",
    ]
    .iter()
    .map(|u| u.replace("{R}", &rec.to_string()))
    .collect();
    let host = interface_ip();
    let start = match host {
        Some(IpAddr::V4(v4)) => format!("http://{v4}:{pg}"),
        Some(IpAddr::V6(v6)) => format!("http://[{v6}]:{pg}"),
        None => format!("http://127.0.0.1:{pg}"),
    };
    for target in [
        format!("http://127.0.0.1:{rec}/"),
        format!("http://localhost:{rec}/"),
        format!("http://0.0.0.0:{rec}/"),
        format!("http://[::1]:{rec}/"),
        format!("http://2130706433:{rec}/"),
        format!("http://[::ffff:127.0.0.1]:{rec}/"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://[fd00:ec2::254]/".to_owned(),
        "file:///etc/passwd".to_owned(),
    ] {
        forbidden.push(format!("{start}/to?u={target}"));
    }
    forbidden.push(format!("{start}/to?u={start}/to?u=http://127.0.0.1:{rec}/"));
    for url in &forbidden {
        let (status, result, body, took) =
            tool_turn(&strict, "web_fetch", &format!("Read {url} now")).await;
        let code = error_code(&result);
        // Refused before any connection; a name that does not resolve here (`localhost.`
        // on a resolver without it) is not reachable either way, and the recorder checks
        // that nothing connected.
        let ok = status == 200
            && (matches!(code, Some("url_not_allowed" | "invalid_tool_input"))
                || (url.contains("LOCALHOST.") && code == Some("url_not_accessible")))
            && !body.contains("recorder secret");
        t.input(
            &format!("web_fetch {url}"),
            ok,
            format!(
                "{status} {code:?} after {took:?}: {}",
                &body[..body.len().min(300)]
            ),
            &body,
        );
    }
    // A page on this machine's address is reachable (the redirect cases above were real).
    if host.is_some() {
        let (status, result, body, _) =
            tool_turn(&strict, "web_fetch", &format!("Read {start}/latin1 now")).await;
        t.input(
            "web_fetch: this machine's own address (private networks allowed)",
            status == 200 && result["content"]["type"] == "web_fetch_result",
            format!("{status} {result}"),
            &body,
        );
    }
    let reached = hits.load(Ordering::SeqCst);
    t.input(
        "the recorder was never reached",
        reached == 0,
        format!("{reached} connections"),
        "",
    );

    // Loopback allowed (the pages are on it), private networks not, a small page and a
    // short time limit, and a hostile SearXNG.
    let lax = tools_gateway(format!(
        "  web_search: {{searxng_url: \"http://127.0.0.1:{pg}/\", timeout_ms: 1000}}\n  web_fetch: {{enabled: true, max_bytes: 1000, timeout_ms: 1000}}\n  allow_loopback: true\n"
    ))
    .await;
    let page = |p: &str| format!("http://127.0.0.1:{pg}{p}");
    // Refused: private networks, metadata behind a loopback redirect, redirect loops.
    for (url, codes) in [
        ("http://10.1.2.3/".to_owned(), &["url_not_allowed"][..]),
        ("http://192.168.0.1/".to_owned(), &["url_not_allowed"][..]),
        ("http://100.64.0.1/".to_owned(), &["url_not_allowed"][..]),
        (
            "http://[fd12:3456::1]/".to_owned(),
            &["url_not_allowed"][..],
        ),
        (
            "http://[::ffff:10.0.0.1]/".to_owned(),
            &["url_not_allowed"][..],
        ),
        (page("/to?u=http://10.1.2.3/"), &["url_not_allowed"][..]),
        (
            page("/to?u=http://169.254.169.254/latest/meta-data/"),
            &["url_not_allowed"][..],
        ),
        (
            page("/to?u=http://[fd00:ec2::254]/"),
            &["url_not_allowed"][..],
        ),
        (page("/to?u=http://2852039166/"), &["url_not_allowed"][..]),
        (page("/loop"), &["url_not_accessible"][..]),
        (page("/binary"), &["unsupported_content_type"][..]),
    ] {
        let (status, result, body, took) =
            tool_turn(&lax, "web_fetch", &format!("Read {url} now")).await;
        let code = error_code(&result);
        t.input(
            &format!("web_fetch {url}"),
            status == 200 && code.is_some_and(|c| codes.contains(&c)),
            format!(
                "{status} {code:?} after {took:?}: {}",
                &body[..body.len().min(300)]
            ),
            &body,
        );
    }
    // An oversized page: cut to max_bytes, and never read whole.
    let (status, result, body, took) =
        tool_turn(&lax, "web_fetch", &format!("Read {} now", page("/big"))).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let made = sent.load(Ordering::SeqCst);
    let text = result["content"]["content"]["source"]["data"]
        .as_str()
        .unwrap_or_default();
    t.input(
        "web_fetch: 64 MB page",
        status == 200
            && text.len() <= 1_100
            && text.contains("cut at 1000 bytes")
            && made < 16 << 20,
        format!(
            "{status} {} text bytes, the page sent {made} bytes, after {took:?}",
            text.len()
        ),
        &body,
    );
    // Slow pages: the time limit (1 s) holds.
    for p in ["/slow", "/slowhead"] {
        let (status, result, body, took) =
            tool_turn(&lax, "web_fetch", &format!("Read {} now", page(p))).await;
        let code = error_code(&result);
        t.input(
            &format!("web_fetch: {p} page"),
            status == 200 && code == Some("url_not_accessible") && took < Duration::from_secs(4),
            format!("{status} {code:?} after {took:?}"),
            &body,
        );
    }
    // A page in Latin-1 with stray bytes: a clean result.
    let (status, result, body, _) =
        tool_turn(&lax, "web_fetch", &format!("Read {} now", page("/latin1"))).await;
    t.input(
        "web_fetch: non-UTF-8 page",
        status == 200 && result["content"]["type"] == "web_fetch_result",
        format!("{status} {result}"),
        &body,
    );
    // A hostile SearXNG: a clean result or a clean error each time, within the limit.
    for (q, ok_results) in [
        ("huge", false),
        ("malformed", false),
        ("html", false),
        ("types", false),
        ("fields", true),
        ("deep", false),
        ("bytes", false),
        ("refused", false),
        ("limited", false),
        ("redirect", false),
        ("slow", false),
    ] {
        let (status, result, body, took) =
            tool_turn(&lax, "web_search", &format!("query: {q}")).await;
        let clean = match &result["content"] {
            Value::Array(hits) => {
                ok_results
                    && hits.iter().all(|h| {
                        h["url"]
                            .as_str()
                            .is_some_and(|u| u.starts_with("http://") || u.starts_with("https://"))
                    })
            }
            Value::Object(e) => e.get("error_code").and_then(Value::as_str).is_some(),
            _ => false,
        };
        t.input(
            &format!("web_search: SearXNG answers {q}"),
            status == 200 && clean && took < Duration::from_secs(4),
            format!("{status} after {took:?}: {result}"),
            &body,
        );
    }
    let reached = hits.load(Ordering::SeqCst);
    t.input(
        "the recorder was still never reached",
        reached == 0,
        format!("{reached} connections"),
        "",
    );
    t
}
