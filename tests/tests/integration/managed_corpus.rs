//! The managed-settings half of the drop-in differential test (issue 15): the reference
//! gateway validates `managed` blocks (every `cli`/`code`/`settings` block against Claude
//! Code's settings schema, every `desktop` overlay against Claude Desktop's keys, the
//! `policy_mode: layered` rules) only after it has connected to PostgreSQL, so
//! `config_corpus` (which stops the reference at `config.load`) cannot see those refusals.
//! This test gives each file of `tests/config-corpus-db/` to the reference with a real
//! (fresh) database and to Gatehouse's loader.
//!
//! Same file format as `tests/config-corpus/`: `ok_*.yaml` (both accept) or `bad_*.yaml`
//! whose first line `# path: <p>` names the key path the reference names and Gatehouse's
//! error must name too. Files write `postgres_url: ${CORPUS_POSTGRES_URL}`. The reference
//! refuses with `claude gateway: managed... invalid:` followed by one line per issue; a
//! file it accepts goes on to OIDC discovery, which fails on the corpus's unresolvable
//! issuer host: that is where the test stops it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use gatehouse_tests::postgres::TestDatabase;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::config_corpus::{Verdict, bracketed, gatehouse};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config-corpus-db")
}

fn corpus() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(corpus_dir().join("managed"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    out.sort();
    out
}

/// The issue paths of a reference refusal: `<head> invalid:` then `  <issue>: ...` lines,
/// or whole `managed.policies[i]...: ...` lines (the layered rules).
fn reference_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut head = String::new();
    for line in text.lines() {
        let line = line.strip_prefix("claude gateway: ").unwrap_or(line);
        if let Some(h) = line.strip_suffix(" invalid:") {
            head = h.to_owned();
        } else if let Some(issue) = line.strip_prefix("  ") {
            let key = issue
                .split('"')
                .nth(1)
                .filter(|_| issue.to_lowercase().contains("managed config \""))
                .unwrap_or_else(|| issue.split(':').next().unwrap_or_default());
            out.push(format!("{head}.{}", bracketed(key.trim())));
        } else if line.starts_with("managed.") {
            out.push(line.split([' ', ':']).next().unwrap_or_default().to_owned());
        }
    }
    out
}

async fn reference(file: &Path, env: &HashMap<String, String>, home: &Path) -> Verdict {
    let mut child = tokio::process::Command::new(gatehouse_tests::reference_claude())
        .args(["gateway", "--config"])
        .arg(file)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the reference (claude) is installed by scripts/test.sh");
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut text = String::new();
    let read = async {
        while let Ok(Some(line)) = err.next_line().await {
            if line.contains("getaddrinfo") || line.contains("idp.example.com") {
                return true;
            }
            text.push_str(&line);
            text.push('\n');
        }
        false
    };
    let accepted = tokio::time::timeout(Duration::from_secs(45), read)
        .await
        .unwrap_or_else(|_| panic!("the reference did not decide on {}", file.display()));
    let _ = child.kill().await;
    if accepted {
        return Verdict::Accepted;
    }
    assert!(
        text.contains("claude gateway: managed"),
        "{}: the reference stopped before its managed checks: {text}",
        file.display()
    );
    Verdict::Refused(reference_paths(&text), text)
}

fn compare(
    name: &str,
    want_ok: bool,
    path: Option<&str>,
    theirs: &Verdict,
    ours: &Verdict,
) -> Option<String> {
    match (theirs, ours) {
        (Verdict::Accepted, Verdict::Accepted) if want_ok => None,
        (Verdict::Refused(their_paths, their_text), Verdict::Refused(_, our_text)) if !want_ok => {
            let Some(path) = path else {
                return Some(format!("{name}: a bad_ file needs `# path:`"));
            };
            let named = their_paths.iter().any(|p| {
                p == path
                    || p.starts_with(&format!("{path}."))
                    || p.starts_with(&format!("{path}["))
            });
            if !named {
                return Some(format!(
                    "{name}: the reference names {their_paths:?}, not {path}: {their_text}"
                ));
            }
            (!our_text.contains(path))
                .then(|| format!("{name}: Gatehouse does not name {path}: {our_text}"))
        }
        _ => Some(format!(
            "{name}: expected {}, reference {theirs:?}, Gatehouse {ours:?}",
            if want_ok { "accepted" } else { "refused" }
        )),
    }
}

#[tokio::test]
async fn managed_blocks_are_accepted_or_refused_by_both_at_the_same_path() {
    let files = corpus();
    assert!(files.len() >= 10, "the corpus is there: {}", files.len());
    let db = TestDatabase::create().await;
    let home = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let env = HashMap::from([("CORPUS_POSTGRES_URL".to_owned(), db.url.clone())]);
    // The first run migrates the database; the rest only find it migrated.
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(3));
    let mut runs = Vec::new();
    for file in files {
        let (gate, home, env) = (gate.clone(), home.path().to_owned(), env.clone());
        runs.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.unwrap();
            let theirs = reference(&file, &env, &home).await;
            (file, theirs)
        }));
    }
    let mut problems = Vec::new();
    for run in runs {
        let (file, theirs) = run.await.unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let path = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# path:"))
            .map(|p| bracketed(p.trim()));
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let ours = gatehouse(&text, &env, data.path());
        problems.extend(compare(
            &name,
            name.starts_with("ok_"),
            path.as_deref(),
            &theirs,
            &ours,
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn reference_issue_lines_become_paths() {
    let text = "claude gateway: managed.policies[0].cli invalid:\n  permissions.deny.0: Invalid input\n  bogus: unknown settings key\nmanaged.policies[1].desktop invalid:\n  Managed config \"chatTabEnabled\" is not a valid boolean\n  upstreams: one of gateway.yaml's own keys\nmanaged.policies[2].cli.permissions.deny: \"Read(!x)\" can't be used\n";
    assert_eq!(
        reference_paths(text),
        vec![
            "managed.policies[0].cli.permissions.deny[0]",
            "managed.policies[0].cli.bogus",
            "managed.policies[1].desktop.chatTabEnabled",
            "managed.policies[1].desktop.upstreams",
            "managed.policies[2].cli.permissions.deny",
        ]
    );
}
