//! The book (`docs/`, an mdBook) is tested (issue 37): the generated configuration and CLI
//! references equal what their generators make of the code now, every YAML block loads in
//! `gatehouse check-config` (fragments completed over [`BASE`], skips listed in
//! [`SKIPPED`]), every runnable shell block runs, every internal link, image and anchor
//! resolves, and `mdbook build` prints no warning. `GATEHOUSE_BLESS=1` rewrites the
//! generated pages instead of failing. How to mark blocks: `docs/contributing/docs.md`.
//!
//! The `gatehouse` binary is the one beside this test binary (`target/<profile>/gatehouse`,
//! default features); a workspace test run builds it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_ref;
mod config_ref;
mod markdown;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use markdown::Page;

/// The base a `yaml,fragment` block is laid over (its top-level keys replace these): the
/// upstreams the book's examples name, a client key, and a loopback listener.
const BASE: &str = r#"
listen: {host: 127.0.0.1, port: 8080}
upstreams:
  - {name: anthropic, provider: anthropic, auth: {api_key: "${ANTHROPIC_API_KEY}"}}
  - {name: bedrock, provider: bedrock, region: us-east-1}
  - {name: vertex, provider: vertex, region: us-east5, project_id: example-project}
  - {name: deepseek, provider: openai, base_url: "https://api.deepseek.com/v1", auth: {api_key: "${DEEPSEEK_API_KEY}"}}
  - {name: ollama, provider: openai, base_url: "http://127.0.0.1:11434/v1"}
client_keys:
  - {id: ci, key: "${GATEHOUSE_CLIENT_KEY}"}
"#;

/// `yaml,no-check` blocks: (page, why it cannot be checked here). Every such block must be
/// listed, and every entry must still match one.
const SKIPPED: &[(&str, &str)] = &[(
    "server/postgres.md",
    "PostgreSQL over TLS: check-config reads the sslrootcert file the example names",
)];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn docs() -> PathBuf {
    workspace().join("docs")
}

/// The page's path under `docs/`, with `/` separators.
fn name(page: &Page) -> String {
    let rel = page.path.strip_prefix(docs()).unwrap_or(&page.path);
    rel.to_string_lossy().replace('\\', "/")
}

fn bless() -> bool {
    std::env::var("GATEHOUSE_BLESS").is_ok_and(|v| v == "1")
}

/// Compares the committed page with `generated`, or writes it under `GATEHOUSE_BLESS=1`.
fn keep(page: &str, generated: &str) {
    let path = docs().join(page);
    if bless() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "the end".to_owned(), |n| format!("line {}", n + 1));
        panic!(
            "docs/{page} differs from what its generator makes now (first at {line}).\n\
             Regenerate: GATEHOUSE_BLESS=1 cargo nextest run -p gatehouse-tests --test docs"
        );
    }
}

#[test]
fn config_reference_is_generated_from_the_schema() {
    let out = Command::new(gatehouse_tests::gatehouse_bin())
        .arg("config-schema")
        .output()
        .unwrap();
    assert!(out.status.success());
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    keep("reference/config.md", &config_ref::render(&schema));
}

#[test]
fn cli_reference_is_generated_from_help() {
    keep(
        "reference/cli.md",
        &cli_ref::render(&gatehouse_tests::gatehouse_bin()),
    );
}

/// A dummy value for every `${NAME}` in `text` (long enough for any key rule; a URL for
/// `*_URL`), and the switch for loopback URLs.
fn env_for(text: &str) -> HashMap<String, String> {
    let mut env = HashMap::from([("CLAUDE_GATEWAY_ALLOW_LOOPBACK".to_owned(), "1".to_owned())]);
    for part in text.split("${").skip(1) {
        let Some(end) = part.find('}') else { continue };
        let var = &part[..end];
        if !var.is_empty() && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            let value = if var.ends_with("_URL") {
                "https://docs-test.example.com".to_owned()
            } else {
                format!("docs-test-{}-0123456789abcdef0123456789abcdef", var.len())
            };
            env.insert(var.to_owned(), value);
        }
    }
    env
}

/// `text` with each `${file:/path}` pointed at a file of `dir` holding a dummy secret, so
/// an example's secret files need not exist here.
fn with_secret_files(text: &str, dir: &Path) -> String {
    let mut out = String::new();
    let mut rest = text;
    let mut n = 0;
    while let Some(at) = rest.find("${file:") {
        let Some(end) = rest[at..].find('}') else {
            break;
        };
        n += 1;
        let secret = dir.join(format!("secret-{n}"));
        std::fs::write(&secret, "docs-test-secret-0123456789abcdef0123456789abcdef").unwrap();
        out += &rest[..at];
        out += &format!("${{file:{}}}", secret.display());
        rest = &rest[at + end + 1..];
    }
    out + rest
}

/// `gatehouse check-config` on `text`; the error names the page and line.
fn check_config(text: &str, at: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.yaml");
    let text = &with_secret_files(text, dir.path());
    std::fs::write(&file, text).unwrap();
    let out = Command::new(gatehouse_tests::gatehouse_bin())
        .arg("--data-dir")
        .arg(dir.path())
        .arg("check-config")
        .arg(&file)
        .envs(env_for(text))
        .output()
        .unwrap();
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{at}: check-config refused the block:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        text
    ))
}

/// The fragment's top-level keys laid over [`BASE`].
fn complete(fragment: &str) -> String {
    let mut base: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(BASE).unwrap();
    let part: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(fragment).unwrap();
    for (k, v) in part {
        base.insert(k, v);
    }
    serde_yaml_ng::to_string(&base).unwrap()
}

#[test]
fn every_yaml_block_loads_in_check_config() {
    let mut problems = Vec::new();
    let mut skipped = Vec::new();
    let mut checked = 0;
    for page in markdown::pages(&docs()) {
        for block in markdown::blocks(&page.text) {
            let mut info = block.info.split(',');
            if info.next() != Some("yaml") {
                continue;
            }
            let at = format!("docs/{}:{}", name(&page), block.line);
            let kind: Vec<&str> = info.collect();
            let result = match kind.first().copied() {
                None => check_config(&block.body, &at),
                Some(k) if k.starts_with("file=") => check_config(&block.body, &at),
                Some("fragment") => check_config(&complete(&block.body), &at),
                Some("no-check") => {
                    skipped.push(name(&page));
                    continue;
                }
                Some(other) => Err(format!("{at}: unknown yaml block kind `{other}`")),
            };
            checked += 1;
            problems.extend(result.err());
        }
    }
    let listed: Vec<String> = SKIPPED.iter().map(|(p, _)| (*p).to_owned()).collect();
    skipped.sort();
    assert_eq!(
        skipped, listed,
        "yaml,no-check blocks must be listed in SKIPPED"
    );
    assert!(checked >= 10, "only {checked} yaml blocks found");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn every_runnable_shell_block_runs() {
    let path = format!(
        "{}:{}",
        gatehouse_tests::gatehouse_bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut problems = Vec::new();
    let mut ran = 0;
    for page in markdown::pages(&docs()) {
        let blocks = markdown::blocks(&page.text);
        let files: Vec<(&str, &str)> = blocks
            .iter()
            .filter_map(|b| {
                let file = b.info.split(',').find_map(|i| i.strip_prefix("file="))?;
                Some((file, b.body.as_str()))
            })
            .collect();
        for block in &blocks {
            let mut info = block.info.split(',');
            let lang = info.next().unwrap_or("");
            if !["sh", "bash", "shell", "console"].contains(&lang) {
                continue;
            }
            let at = format!("docs/{}:{}", name(&page), block.line);
            match info.next() {
                Some("no-run") => continue,
                None => {}
                Some(other) => {
                    problems.push(format!("{at}: unknown shell block mark `{other}`"));
                    continue;
                }
            }
            let dir = tempfile::tempdir().unwrap();
            let mut env_text = block.body.clone();
            for (file, body) in &files {
                std::fs::write(dir.path().join(file), body).unwrap();
                env_text += body;
            }
            // `timeout`: a block that waits for a server that never comes fails, not hangs.
            let out = Command::new("timeout")
                .args(["60", "bash", "-euo", "pipefail", "-c", &block.body])
                .current_dir(dir.path())
                .env("PATH", &path)
                .env("HOME", dir.path())
                .envs(env_for(&env_text))
                .output()
                .unwrap();
            ran += 1;
            if !out.status.success() {
                problems.push(format!(
                    "{at}: exit {:?}\n{}\n{}{}",
                    out.status.code(),
                    block.body,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    assert!(ran >= 2, "only {ran} runnable shell blocks found");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn every_internal_link_and_image_resolves() {
    let pages = markdown::pages(&docs());
    let anchors: HashMap<PathBuf, Vec<String>> = pages
        .iter()
        .map(|p| (p.path.clone(), markdown::anchors(&p.text)))
        .collect();
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in &pages {
        for link in markdown::links(&page.text) {
            let t = &link.target;
            if t.contains("://") || t.starts_with("mailto:") || t.is_empty() {
                continue;
            }
            checked += 1;
            let at = format!("docs/{}:{}: {t}", name(page), link.line);
            let (file, anchor) = t.split_once('#').unwrap_or((t, ""));
            let target = if file.is_empty() {
                page.path.clone()
            } else {
                page.path.parent().unwrap().join(file)
            };
            let Ok(target) = target.canonicalize() else {
                problems.push(format!("{at}: no such file"));
                continue;
            };
            if !target.starts_with(docs().canonicalize().unwrap()) {
                problems.push(format!("{at}: outside the book (include it instead)"));
                continue;
            }
            if anchor.is_empty() {
                continue;
            }
            let known = anchors
                .iter()
                .find(|(p, _)| p.canonicalize().is_ok_and(|p| p == target));
            match known {
                Some((_, ids)) if ids.iter().any(|id| id == anchor) => {}
                Some(_) => problems.push(format!("{at}: no heading with that anchor")),
                None => problems.push(format!("{at}: an anchor into a file that is not a page")),
            }
        }
    }
    assert!(checked >= 50, "only {checked} links found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_page_is_in_the_summary() {
    let summary = std::fs::read_to_string(docs().join("SUMMARY.md")).unwrap();
    let listed: Vec<String> = markdown::links(&summary)
        .into_iter()
        .map(|l| l.target)
        .collect();
    let missing: Vec<String> = markdown::pages(&docs())
        .iter()
        .map(name)
        .filter(|n| n != "SUMMARY.md" && !listed.contains(n))
        .collect();
    assert!(
        missing.is_empty(),
        "pages not in docs/SUMMARY.md: {missing:?}"
    );
}

/// The mdbook CLI: on PATH, else where `cargo install` (scripts/setup.sh) puts it.
fn mdbook() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("mdbook"))
            .find(|p| p.is_file())
    });
    let home = std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo/bin/mdbook"));
    on_path
        .or(home.filter(|p| p.is_file()))
        .expect("mdbook is missing: scripts/setup.sh installs the pinned version")
}

#[test]
fn the_book_builds_without_warnings() {
    let dest = tempfile::tempdir().unwrap();
    let out = Command::new(mdbook())
        .arg("build")
        .arg(docs())
        .arg("--dest-dir")
        .arg(dest.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(out.status.success(), "mdbook build failed:\n{log}");
    assert!(bad.is_empty(), "mdbook build warned:\n{log}");
    assert!(dest.path().join("reference/config.html").is_file());
}

#[test]
fn the_readme_links_resolve() {
    let readme = workspace().join("README.md");
    let text = std::fs::read_to_string(&readme).unwrap();
    let pages = markdown::pages(&docs());
    let mut problems = Vec::new();
    for link in markdown::links(&text) {
        let t = &link.target;
        if t.contains("://") {
            continue;
        }
        let (file, anchor) = t.split_once('#').unwrap_or((t, ""));
        let Ok(target) = workspace().join(file).canonicalize() else {
            problems.push(format!("README.md:{}: {t}: no such file", link.line));
            continue;
        };
        let page = pages
            .iter()
            .find(|p| p.path.canonicalize().is_ok_and(|p| p == target));
        if let (false, Some(page)) = (anchor.is_empty(), page)
            && !markdown::anchors(&page.text).iter().any(|a| a == anchor)
        {
            problems.push(format!("README.md:{}: {t}: no such heading", link.line));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The sources of the UI tests that write `docs/screenshots/` under
/// `GATEHOUSE_SCREENSHOTS=1` (Playwright scripts, the tray's desktop session).
fn ui_test_sources() -> String {
    let mut text = String::new();
    for dir in ["tests/e2e", "tests/desktop", "src-tauri/tests"] {
        for entry in std::fs::read_dir(workspace().join(dir)).unwrap() {
            let p = entry.unwrap().path();
            if p.extension()
                .is_some_and(|e| ["mjs", "sh", "rs", "py"].iter().any(|x| e == *x))
            {
                text += &std::fs::read_to_string(&p).unwrap_or_default();
            }
        }
    }
    text
}

/// A screenshot name a UI test writes: literally (`'dashboard.png'`), or as the console
/// script's `console-${name}.png` with `name` quoted in it.
fn written_by_a_ui_test(sources: &str, file: &str) -> bool {
    let quoted = |s: &str| {
        ["'", "\"", "`"]
            .iter()
            .any(|q| sources.contains(&format!("{q}{s}{q}")))
    };
    let stem = file.trim_end_matches(".png");
    quoted(file)
        || stem
            .strip_prefix("console-")
            .is_some_and(|name| sources.contains("`console-${name}.png`") && quoted(name))
}

#[test]
fn every_picture_is_a_screenshot_the_ui_tests_take() {
    let sources = ui_test_sources();
    let shots = docs().join("screenshots");
    let mut problems = Vec::new();
    let mut pictures = 0;
    for page in markdown::pages(&docs()) {
        for link in markdown::links(&page.text) {
            if !link.target.ends_with(".png") {
                continue;
            }
            pictures += 1;
            let file = page.path.parent().unwrap().join(&link.target);
            let at = format!("docs/{}:{}: {}", name(&page), link.line, link.target);
            let in_shots = file
                .canonicalize()
                .is_ok_and(|f| f.parent() == shots.canonicalize().ok().as_deref());
            let file_name = file.file_name().unwrap().to_string_lossy().into_owned();
            if !in_shots {
                problems.push(format!("{at}: pictures live in docs/screenshots/"));
            } else if !written_by_a_ui_test(&sources, &file_name) {
                problems.push(format!("{at}: no UI test writes {file_name}"));
            }
        }
    }
    assert!(pictures >= 10, "only {pictures} pictures found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
