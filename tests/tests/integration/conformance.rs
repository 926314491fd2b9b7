//! The conformance matrix with the real Claude Code (issue 32): for every upstream kind, the
//! pinned Claude Code CLI runs one scripted multi-turn session through an in-process
//! Gatehouse to two strict fakes of that kind (`FakeConfig::strict`: each refuses what its
//! real provider refuses, in its words, and has a small context window). The session reads a
//! text file and runs a command (the fake scripts the tool calls), with thinking on (Claude
//! Code's default for its default model), and reads a PNG (the image goes up inside the tool
//! result); the first upstream then fails once (529) so a request moves; Claude Code reads a
//! file large enough that its Read tool asks `count_tokens` first, gets a long log pasted,
//! and reads a long file, which overflows the window: the upstream answers `prompt is too
//! long` and Claude Code compacts and carries on. Every turn must succeed and the usage rows
//! must be what the fakes reported. The matrix (kind × capability: ✓ and how Gatehouse
//! shaped it, or ✗ and why) is written to `docs/conformance.md` and between the README's
//! `conformance` markers; the test fails when the committed copies differ unless
//! `GATEHOUSE_WRITE_CONFORMANCE=1` (then it writes them). Cells that fail today are listed in [`KNOWN_GAPS`] with the
//! gateway-side reason; any other failing cell fails the test.
//!
//! The strict fakes themselves are validated by the providers' official SDKs (`sdks`); what
//! each cell makes of a session is in `evidence`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use chrono::Utc;
use fake_upstream::{FakeConfig, FakeUpstream, Fault, ToolUse};
use gatehouse_engine::store::UsageRecord;
use gatehouse_tests::claude_session::ClaudeSession;
use gatehouse_tests::matrix::{Matrix, keep};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, load};
use serde_json::json;

mod evidence;
mod sdks;

use evidence::{Ran, Seen, Session};

/// The upstream kinds, as `provider:` names them.
const KINDS: [&str; 8] = [
    "anthropic",
    "bedrock",
    "mantle",
    "anthropicAws",
    "vertex",
    "foundry",
    "anthropicGoogleCloud",
    "openai",
];

/// The matrix's columns, in order.
const COLUMNS: [&str; 8] = [
    "tools (Read, Bash)",
    "thinking",
    "image (Read of a PNG)",
    "long input",
    "count_tokens",
    "failover",
    "betas & body keys",
    "usage rows",
];

/// Cells that fail today (kind, columns), with the gateway-side reason; the test fails on
/// any other failing cell, and on a listed one that passes (take it off the list).
/// (Bedrock's betas, Mantle's model id in the answer, Vertex's betas and DeepSeek's
/// `reasoning_content` after compaction were listed here until the gateway shaped them.)
const KNOWN_GAPS: &[(&str, &[&str], &str)] = &[];

/// The fakes' context window, in estimated tokens (body bytes / 4). Claude Code's own
/// request is about 12,500 of them, the medium file about 7,000, the pasted log and the
/// long file about 10,000 each: the long file overflows; after compaction (which Claude
/// Code sends without the long file) the retry holds the summary, the medium file Claude
/// Code restores and the long file, and fits.
const WINDOW: u64 = 36_000;
/// The OpenAI-compatible upstream's model: DeepSeek-style reasoning, text only.
const TEXT_MODEL: &str = "deepseek-reasoner";
/// The OpenAI-compatible upstream's model that reads images (`routing.fallback_models`).
const VISION_MODEL: &str = "fake-vision";
/// The step before which the first upstream fails once.
const FAILOVER_STEP: usize = 3;
/// Kinds run at the same time.
const PARALLEL: usize = 4;
const README_BEGIN: &str = "<!-- conformance:begin -->";
const README_END: &str = "<!-- conformance:end -->";
/// A 4×4 red PNG.
const PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg==";
const NOTES: &str = "The secret word is GATEHOUSE-NOTES.\n";
const MARKER_OUTPUT: &str = "gatehouse-ok";

/// One turn of the script: its prompt (followed by a pasted text of about 40 KB made from
/// `paste`, when given) and the tool call the fakes make for it.
struct Step {
    prompt: &'static str,
    paste: Option<u64>,
    /// The tool, and the file Read reads (in the working directory) or the command Bash
    /// runs.
    tool: Option<(&'static str, &'static str)>,
}

const STEPS: [Step; 6] = [
    Step {
        prompt: "Read notes.txt and tell me the secret word.",
        paste: None,
        tool: Some(("Read", "notes.txt")),
    },
    Step {
        prompt: "Run the marker command with Bash.",
        paste: None,
        tool: Some(("Bash", "echo gatehouse-ok")),
    },
    Step {
        prompt: "Look at pixel.png and describe it.",
        paste: None,
        tool: Some(("Read", "pixel.png")),
    },
    Step {
        prompt: "Read medium.txt.",
        paste: None,
        tool: Some(("Read", "medium.txt")),
    },
    Step {
        prompt: "Keep this log in mind:\n",
        paste: Some(3),
        tool: None,
    },
    Step {
        prompt: "Now read long.txt as well.",
        paste: None,
        tool: Some(("Read", "long.txt")),
    },
];
const STEP_TOOLS: usize = 1;
const STEP_IMAGE: usize = 2;
/// Claude Code's Read asks `count_tokens` for a file of more than about 6,250 tokens.
const STEP_COUNT: usize = 3;
/// The pasted log fits the window; the long file read after it does not.
const STEP_PASTE: usize = 4;
const STEP_LONG: usize = 5;

/// A text of `lines` lines of twelve words each (about 75 bytes a line), from a seed.
fn long_text(seed: u64, lines: usize) -> String {
    const WORDS: [&str; 10] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    ];
    let mut x = seed;
    let mut out = Vec::new();
    for _ in 0..lines {
        let words: Vec<&str> = (0..12)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                WORDS[((x >> 33) % 10) as usize]
            })
            .collect();
        out.push(words.join(" "));
    }
    out.join("\n")
}

/// The upstream list item of `kind` named `name` at the fake `url`.
fn upstream_yaml(kind: &str, name: &str, url: &str) -> String {
    let aws = "auth: {aws_access_key_id: AKIDCONFORMANCE01, aws_secret_access_key: conformance-aws-secret}";
    let body = match kind {
        "anthropic" => {
            format!(
                "provider: anthropic, base_url: \"{url}\", auth: {{api_key: \"{OPERATOR_KEY}\"}}"
            )
        }
        "bedrock" => format!("provider: bedrock, region: us-east-1, base_url: \"{url}\", {aws}"),
        "mantle" => format!(
            "provider: mantle, region: us-east-1, base_url: \"{url}/anthropic\", models: [claude-opus-5-5, claude-haiku-4-5], {aws}"
        ),
        "anthropicAws" => format!(
            "provider: anthropicAws, region: us-west-2, workspace_id: wrkspc_conformance, base_url: \"{url}\", auth: {{api_key: conformance-platform-key}}"
        ),
        "vertex" => format!(
            "provider: vertex, region: us-east5, project_id: proj-1, base_url: \"{url}/v1\", auth: {{access_token: ya29.conformance}}"
        ),
        "foundry" => format!(
            "provider: foundry, resource: corp-ai, base_url: \"{url}/anthropic\", auth: {{api_key: conformance-foundry-key}}"
        ),
        "anthropicGoogleCloud" => format!(
            "provider: anthropicGoogleCloud, project_id: proj-1, workspace_id: wrk-1, base_url: \"{url}/v1/projects/proj-1/locations/global/workspaces/wrk-1/invoke\", auth: {{access_token: ya29.conformance}}"
        ),
        "openai" => format!(
            "provider: openai, base_url: \"{url}/v1\", auth: {{api_key: conformance-openai-key}}"
        ),
        other => panic!("unknown kind {other}"),
    };
    format!("  - {{name: {name}, {body}}}")
}

/// The gateway's YAML: two upstreams of `kind` in order, health off (so the one failure
/// moves one request, and where later ones go shows whether the conversation sticks). The
/// OpenAI-compatible kind serves Claude Code's model as `TEXT_MODEL`, declared without
/// vision, and a vision model for images; its window is left to the upstream to enforce.
fn gateway_yaml(kind: &str, first: &str, second: &str, db: &Path) -> String {
    let (shaping, models) = if kind == "openai" {
        (
            format!(
                "  fallback_models: {{images: claude-sonnet-4-6}}\n  capabilities:\n    - {{model: {TEXT_MODEL}, vision: false}}\n    - {{model: {VISION_MODEL}, vision: true}}\n"
            ),
            format!(
                "models:\n  - {{id: claude-opus-5-5, upstream_model: {{first: {TEXT_MODEL}, second: {TEXT_MODEL}}}}}\n  - {{id: claude-sonnet-4-6, upstream_model: {{first: {VISION_MODEL}, second: {VISION_MODEL}}}}}\n"
            ),
        )
    } else {
        (String::new(), String::new())
    };
    format!(
        "listen: {{host: 127.0.0.1, port: 0}}\nstore: {{sqlite_path: \"{}\"}}\nupstreams:\n{}\n{}\nclient_keys: [{{id: tester, key: \"{CLIENT_KEY}\"}}]\nrouting:\n  health: {{enabled: false}}\n{shaping}{models}",
        db.display(),
        upstream_yaml(kind, "first", first),
        upstream_yaml(kind, "second", second),
    )
}

/// A strict fake for `kind`; the second upstream reports other token counts, so a usage
/// row shows which one answered.
fn fake_config(kind: &str, second: bool, tools: Vec<ToolUse>) -> FakeConfig {
    FakeConfig {
        reply_text: "Done.".into(),
        output_tokens: if second { 11 } else { 7 },
        input_tokens: if second { 41 } else { 31 },
        strict: true,
        context_window: Some(WINDOW),
        text_only_models: if kind == "openai" {
            vec![TEXT_MODEL.into()]
        } else {
            Vec::new()
        },
        tool_uses_every_turn: true,
        tool_uses: tools,
        ..FakeConfig::default()
    }
}

fn step_tools(step: &Step, work: &Path, i: usize) -> Vec<ToolUse> {
    let Some((tool, arg)) = step.tool else {
        return Vec::new();
    };
    let input = match tool {
        "Bash" => json!({"command": arg, "description": "Print the marker"}),
        _ => json!({"file_path": work.join(arg)}),
    };
    vec![ToolUse {
        id: format!("toolu_conformance_{i}"),
        name: tool.into(),
        input,
    }]
}

async fn run_kind(kind: &'static str) -> Session {
    let started = Instant::now();
    let first = FakeUpstream::start(fake_config(kind, false, Vec::new()))
        .await
        .unwrap();
    let second = FakeUpstream::start(fake_config(kind, true, Vec::new()))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = gateway_yaml(
        kind,
        &first.url(),
        &second.url(),
        &dir.path().join("gatehouse.db"),
    );
    let config = load(&yaml, dir.path());
    let gw = TestGateway::start_config(config, first, dir).await;
    let mut session = ClaudeSession::new(&gw.handle.base_url(), CLIENT_KEY, &[]);
    session.write_file("notes.txt", NOTES.as_bytes());
    session.write_file("medium.txt", long_text(1, 380).as_bytes());
    session.write_file("long.txt", long_text(2, 530).as_bytes());
    let png = base64::engine::general_purpose::STANDARD
        .decode(PIXEL_PNG)
        .unwrap();
    session.write_file("pixel.png", &png);
    let work = session.work_dir().to_owned();
    let mut ran = Vec::new();
    let mut failover_at = 0;
    for (i, step) in STEPS.iter().enumerate() {
        let tools = step_tools(step, &work, i);
        gw.fake.set_config(fake_config(kind, false, tools.clone()));
        second.set_config(fake_config(kind, true, tools));
        if i == FAILOVER_STEP {
            failover_at = gw.fake.requests().len();
            gw.fake.push_fault(Fault::Status {
                status: 529,
                retry_after: None,
                error_type: None,
                message: None,
            });
        }
        let before = (gw.fake.requests().len(), second.requests().len());
        let started = Utc::now();
        let prompt = match step.paste {
            Some(seed) => format!("{}{}", step.prompt, long_text(seed, 530)),
            None => step.prompt.to_owned(),
        };
        let turn = session.turn(&prompt, "Read,Bash").await;
        ran.push(Ran {
            turn,
            first: (before.0, gw.fake.requests().len()),
            second: (before.1, second.requests().len()),
            started,
            ended: Utc::now(),
        });
    }
    let rows = settled_rows(&gw).await;
    Session {
        kind,
        ran,
        first: Seen::of(&gw.fake),
        second: Seen::of(&second),
        rows,
        failover_at,
        elapsed: started.elapsed(),
    }
}

/// The usage rows once the recorder has written them all (no new row for 500 ms), oldest
/// first.
async fn settled_rows(gw: &TestGateway) -> Vec<UsageRecord> {
    let store = gw.handle.store();
    let mut last = usize::MAX;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let rows = store.recent_usage(10_000).await.unwrap();
        if rows.len() == last || Instant::now() > deadline {
            let mut rows = rows;
            rows.sort_by_key(|r| r.created_at);
            return rows;
        }
        last = rows.len();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn workspace_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

/// `docs/conformance.md`: how the table is made, the table, and the known gaps.
fn document(table: &str) -> String {
    let mut gaps = String::new();
    for (kind, columns, why) in KNOWN_GAPS {
        gaps += &format!("- **`{kind}`** ({}): {why}\n", columns.join(", "));
    }
    if gaps.is_empty() {
        gaps = "None.\n".into();
    }
    format!(
        "# Conformance with Claude Code\n\n\
         Generated by `tests/tests/integration/conformance.rs`; do not edit. To refresh it and \
         the README's copy: `GATEHOUSE_WRITE_CONFORMANCE=1 cargo nextest run -p gatehouse-tests \
         -E 'test(conformance::)'`.\n\n\
         For each upstream kind the pinned Claude Code CLI runs one scripted session through \
         Gatehouse to two strict fakes of that kind, which refuse what the real provider \
         refuses, in its words (thinking signatures, tool ids, Bedrock's and Vertex's betas and \
         body keys, DeepSeek's `reasoning_content`, a text-only model's images) and have a \
         context window of {WINDOW} estimated tokens. The session: Read a text file and run a \
         command with Bash, thinking on (Claude Code's default for its default model); Read a \
         PNG (the image goes up in the tool result); the first upstream then answers one \
         request with 529 (health checks off, so where the next requests go shows where the \
         conversation lives); Read a 28 KB file (Claude Code asks `count_tokens` first); paste \
         a 40 KB log; Read a 40 KB file, which overflows the window (the upstream answers \
         `prompt is too long`, Claude Code compacts and carries on). Every turn must succeed, \
         and every request Gatehouse answered must have one usage row with the tokens the \
         fake reported (none for refusals and `count_tokens`). The OpenAI-compatible upstream \
         serves Claude Code's model as `{TEXT_MODEL}` (DeepSeek-style reasoning, text only; \
         `routing.capabilities` says so) and `claude-sonnet-4-6` as `{VISION_MODEL}` \
         (`routing.fallback_models.images`).\n\n\
         {table}\n\
         ✓ passes (the note says how Gatehouse shaped the request); ✗ fails (the note is what \
         the upstream or Claude Code answered, digits as N).\n\n\
         ## Known gaps\n\n{gaps}"
    )
}

#[tokio::test]
async fn claude_code_conformance_matrix() {
    let started = Instant::now();
    let limit = Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, kind) in KINDS.into_iter().enumerate() {
        let limit = limit.clone();
        tasks.spawn(async move {
            let _permit = limit.acquire_owned().await.unwrap();
            (i, run_kind(kind).await)
        });
    }
    let mut sessions: Vec<(usize, Session)> = Vec::new();
    while let Some(done) = tasks.join_next().await {
        sessions.push(done.unwrap());
    }
    sessions.sort_by_key(|(i, _)| *i);
    let matrix = Matrix {
        corner: "upstream kind".into(),
        columns: COLUMNS.iter().map(|c| (*c).to_owned()).collect(),
        rows: sessions
            .iter()
            .map(|(_, s)| (format!("`{}`", s.kind), s.cells()))
            .collect(),
    };
    let table = matrix.markdown();
    eprintln!(
        "{table}\nconformance matrix: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mut problems = Vec::new();
    for (_, s) in &sessions {
        let kind = format!("`{}`", s.kind);
        let failing: Vec<&str> = matrix
            .failures()
            .into_iter()
            .filter(|(row, _, _)| *row == kind)
            .map(|(_, column, _)| column)
            .collect();
        if !failing.is_empty() {
            eprintln!("{}", s.details());
        }
        for column in &failing {
            if !KNOWN_GAPS
                .iter()
                .any(|(k, c, _)| *k == s.kind && c.contains(column))
            {
                problems.push(format!("{} × {column} fails", s.kind));
            }
        }
        for (k, columns, _) in KNOWN_GAPS.iter().filter(|(k, _, _)| *k == s.kind) {
            for c in columns.iter().filter(|c| !failing.contains(c)) {
                problems.push(format!("{k} × {c} passes now: take it off KNOWN_GAPS"));
            }
        }
    }
    let write = std::env::var("GATEHOUSE_WRITE_CONFORMANCE").is_ok_and(|v| v == "1");
    let kept = [
        keep(
            &workspace_file("docs/conformance.md"),
            None,
            &document(&table),
            write,
        ),
        keep(
            &workspace_file("README.md"),
            Some((README_BEGIN, README_END)),
            &table,
            write,
        ),
    ];
    problems.extend(
        kept.into_iter().filter_map(Result::err).map(|e| {
            format!("{e}\n(GATEHOUSE_WRITE_CONFORMANCE=1 writes what the test generated)")
        }),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
