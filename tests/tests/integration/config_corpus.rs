//! The drop-in differential test (issues 15 and 34): every file of `tests/config-corpus/`
//! goes through the pinned reference's `claude gateway --check config --config F` (Claude
//! Code 2.1.337, [`gatehouse_tests::reference_claude`]) and through Gatehouse's loader and
//! startup checks (what `gatehouse check-config` runs). Both must give the same verdict,
//! and on a refused file Gatehouse must name every path the reference names (the same
//! path, or a more specific one under it).
//!
//! Corpus files are named `ok_*.yaml` (the reference accepts) or `bad_*.yaml` (the
//! reference refuses), or `unsupported_*.yaml`: the known gaps, in one place — the
//! reference accepts them and Gatehouse refuses them with `not supported yet: <path>`. A
//! `bad_` file starts with one or more `# path: <p>` lines: key paths the reference names
//! (`a.b[0].c` or `a.b.0.c`, or a prefix of it), each of which Gatehouse's refusal must
//! name too — with several, both must list every problem of the file at once. A line
//! `# env: NAME=value` sets a variable for both; `${CORPUS}` is the corpus directory.
//!
//! `--check config` validates the whole file, managed policies included, and exits: 0 with
//! `<path>: no errors found. …`, or 1 with `claude gateway: ` and a JSON issue list (or,
//! for a managed block, a line naming the block). `config_coverage` adds a generated
//! invalid case for every reference key path and runs it through [`differ`] too.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_engine::Config;
use gatehouse_engine::config::LoadContext;
use gatehouse_engine::deps::{Environment, NoCredentialStore};

pub(crate) fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config-corpus")
}

/// Every corpus file, sorted.
pub(crate) fn corpus() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![corpus_dir()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "yaml") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A corpus file's header: the expected paths and the environment.
pub(crate) struct Header {
    pub(crate) paths: Vec<String>,
    pub(crate) env: HashMap<String, String>,
}

pub(crate) fn header(text: &str) -> Header {
    let mut h = Header {
        paths: Vec::new(),
        env: HashMap::from([(
            "CORPUS".to_owned(),
            corpus_dir().to_string_lossy().into_owned(),
        )]),
    };
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        if let Some(p) = line.strip_prefix("# path:") {
            h.paths.push(bracketed(p.trim()));
        } else if let Some((k, v)) = line.strip_prefix("# env:").and_then(|e| e.split_once('=')) {
            h.env.insert(k.trim().to_owned(), v.trim().to_owned());
        }
    }
    h
}

/// `a.0.b` (the reference's dotted form) as `a[0].b`.
pub(crate) fn bracketed(path: &str) -> String {
    let mut out = String::new();
    for part in path.split('.') {
        if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(part);
        }
    }
    out
}

/// The header's variables and the real file system.
pub(crate) struct CorpusEnv(pub(crate) HashMap<String, String>);

impl Environment for CorpusEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
    fn read_file(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }
}

/// What one side said about a file.
#[derive(Debug)]
pub(crate) enum Verdict {
    Accepted,
    /// Refused; the paths it named and its whole message.
    Refused(Vec<String>, String),
}

/// Gatehouse: load and validate, then the startup checks `check-config` runs.
pub(crate) fn gatehouse(text: &str, env: &HashMap<String, String>, data: &Path) -> Verdict {
    let env = CorpusEnv(env.clone());
    let ctx = LoadContext {
        env: &env,
        credentials: &NoCredentialStore,
        default_data_dir: data.to_owned(),
    };
    match Config::from_yaml(text, &ctx).and_then(|c| gatehouse_engine::check_config(&c)) {
        Ok(_) => Verdict::Accepted,
        Err(e) => Verdict::Refused(
            e.issues().into_iter().map(|i| i.path).collect(),
            e.to_string(),
        ),
    }
}

/// A reference issue's path (`["upstreams", 0, "auth"]`) as Gatehouse writes paths.
fn joined(path: &serde_json::Value) -> String {
    let mut out = String::new();
    for part in path.as_array().into_iter().flatten() {
        match part {
            serde_json::Value::Number(n) => out.push_str(&format!("[{n}]")),
            other => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(other.as_str().unwrap_or_default());
            }
        }
    }
    out
}

/// The reference's `--check config` on `file`.
pub(crate) async fn reference(file: &Path, env: &HashMap<String, String>, home: &Path) -> Verdict {
    let run = tokio::process::Command::new(gatehouse_tests::reference_claude())
        .args(["gateway", "--check", "config", "--config"])
        .arg(file)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .envs(env)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap_or_else(|_| panic!("the reference did not decide on {}", file.display()))
        .expect("the reference is installed by scripts/test.sh (tests/e2e)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => {
            assert!(
                text.contains("no errors found"),
                "{}: {text}",
                file.display()
            );
            Verdict::Accepted
        }
        Some(1) => {
            let json = text
                .find("claude gateway: [")
                .and_then(|i| serde_json::from_str::<serde_json::Value>(&text[i + 16..]).ok());
            let paths = json
                .as_ref()
                .and_then(|j| j.as_array())
                .map(|issues| issues.iter().map(|i| joined(&i["path"])).collect())
                .unwrap_or_else(|| managed_paths(&text));
            Verdict::Refused(paths, text)
        }
        other => panic!(
            "the reference exited {other:?} on {}: {text}",
            file.display()
        ),
    }
}

/// The paths of a managed block's refusal, which the reference prints as text:
/// `claude gateway: managed.policies[0].cli invalid:` (or `managed settings invalid:`, the
/// legacy file) and then one indented line per issue — `a.0.b: message`, or for a Desktop
/// overlay `Managed config "X" …`, `Failed to parse managed config "X" …`, `X[i] dropped: …`
/// and `X entry [i] dropped — …`.
fn managed_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block = None;
    for line in text.lines() {
        // `claude gateway: <block> invalid:` opens the list; a later block, unindented.
        let opener = line
            .strip_prefix("claude gateway: ")
            .or_else(|| (!line.starts_with(' ') && line.ends_with(" invalid:")).then_some(line));
        if let Some(rest) = opener {
            block = rest.strip_suffix(" invalid:").map(|b| match b {
                "managed settings" => "managed.settings".to_owned(),
                b => bracketed(b),
            });
            continue;
        }
        let (Some(b), Some(item)) = (&block, line.strip_prefix("  ")) else {
            continue;
        };
        let quoted = ["Managed config \"", "Failed to parse managed config \""]
            .iter()
            .find_map(|p| item.strip_prefix(p))
            .and_then(|r| r.split('"').next());
        let key = match quoted {
            Some(k) => k.to_owned(),
            None => match item.split_once(" entry [") {
                Some((k, i)) => format!("{k}[{}]", i.split(']').next().unwrap_or_default()),
                None => match item.split_once(" dropped") {
                    Some((k, _)) => k.to_owned(),
                    None => item.split_once(": ").map_or("", |(k, _)| k).to_owned(),
                },
            },
        };
        if key == "." {
            out.push(b.clone());
        } else if !key.is_empty() && !key.contains(' ') {
            out.push(format!("{b}.{}", bracketed(&key)));
        }
    }
    out
}

/// What is wrong when `theirs` (the reference) and `ours` disagree on a file: `want_ok`
/// is the file's expected verdict (`None`: whatever the reference says), `header` the
/// paths its `# path:` lines name.
pub(crate) fn differ(
    name: &str,
    want_ok: Option<bool>,
    header: &[String],
    theirs: &Verdict,
    ours: &Verdict,
) -> Vec<String> {
    let mut problems = Vec::new();
    match (theirs, ours) {
        (Verdict::Accepted, Verdict::Accepted) if want_ok != Some(false) => {}
        (Verdict::Refused(their_paths, their_text), Verdict::Refused(our_paths, our_text))
            if want_ok != Some(true) =>
        {
            // The file's root (`[]`, e.g. an unknown top-level key) is under every path. The
            // reference names a policy's `settings:` block by its alias, `cli`.
            let under = |p: &String, of: &str| {
                let (p, of) = (
                    p.replace(".settings.", ".cli."),
                    of.replace(".settings.", ".cli."),
                );
                of.is_empty()
                    || p == of
                    || p.starts_with(&format!("{of}."))
                    || p.starts_with(&format!("{of}["))
            };
            for path in header {
                if !their_paths.iter().any(|p| under(p, path))
                    && !their_text.contains(path.as_str())
                {
                    problems.push(format!(
                        "{name}: the reference names {their_paths:?}, not {path}: {their_text}"
                    ));
                }
                if !our_text.contains(path.as_str()) {
                    problems.push(format!(
                        "{name}: Gatehouse does not name {path}: {our_text}"
                    ));
                }
            }
            // Every path the reference names, Gatehouse names too (or one under it).
            for path in their_paths {
                if !our_paths.iter().any(|p| under(p, path)) {
                    problems.push(format!(
                        "{name}: the reference names {path}, Gatehouse only {our_paths:?}: {our_text}"
                    ));
                }
            }
        }
        _ => problems.push(format!(
            "{name}: expected {}, reference {theirs:?}, Gatehouse {ours:?}",
            match want_ok {
                Some(true) => "accepted",
                Some(false) => "refused",
                None => "the same verdict",
            }
        )),
    }
    problems
}

#[tokio::test]
async fn every_corpus_file_is_accepted_or_refused_by_both_at_the_same_path() {
    let files = corpus();
    assert!(files.len() >= 20, "the corpus is there: {}", files.len());
    let home = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let gate = Arc::new(tokio::sync::Semaphore::new(4));
    let mut runs = Vec::new();
    for file in files {
        let (gate, home) = (gate.clone(), home.path().to_owned());
        runs.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.unwrap();
            let text = std::fs::read_to_string(&file).unwrap();
            let h = header(&text);
            let theirs = reference(&file, &h.env, &home).await;
            (file, text, h, theirs)
        }));
    }
    let (mut problems, mut agreed, mut total) = (Vec::new(), 0, 0);
    for run in runs {
        let (file, text, h, theirs) = run.await.unwrap();
        let name = file
            .strip_prefix(corpus_dir())
            .unwrap()
            .display()
            .to_string();
        let ours = gatehouse(&text, &h.env, data.path());
        let file_name = file.file_name().unwrap().to_string_lossy().into_owned();
        total += 1;
        if file_name.starts_with("unsupported_") {
            match (&theirs, &ours) {
                (Verdict::Accepted, Verdict::Refused(_, text))
                    if text.contains("not supported yet") =>
                {
                    agreed += 1;
                }
                _ => problems.push(format!(
                    "{name}: a known gap should be accepted by the reference and refused as not supported yet by Gatehouse; reference {theirs:?}, Gatehouse {ours:?}"
                )),
            }
            continue;
        }
        if file_name.starts_with("bad_") && h.paths.is_empty() {
            problems.push(format!("{name}: a bad_ file needs `# path:`"));
        }
        let found = differ(
            &name,
            Some(file_name.starts_with("ok_")),
            &h.paths,
            &theirs,
            &ours,
        );
        agreed += usize::from(found.is_empty());
        problems.extend(found);
    }
    eprintln!("config corpus: {agreed} of {total} files agree with the reference");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Seed 000's structure example (`examples/reference/seed-000.yaml`) loads unchanged in
/// Gatehouse, with its secret files and variables provided; the reference accepts the
/// same file with the files placed in a temporary directory.
#[tokio::test]
async fn the_seed_example_loads_unchanged_in_both() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/reference/seed-000.yaml");
    let text = std::fs::read_to_string(&example).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["gw.corp.example".to_owned()]).unwrap();
    let files = [
        ("/etc/claude-gateway/tls.crt", cert.cert.pem()),
        (
            "/etc/claude-gateway/tls.key",
            cert.signing_key.serialize_pem(),
        ),
        (
            "/run/secrets/gateway_session_v2",
            "session-secret-v2-0123456789abcdefghij".to_owned(),
        ),
        (
            "/run/secrets/gateway_session_v1",
            "session-secret-v1-0123456789abcdefghij".to_owned(),
        ),
        (
            "/run/secrets/oidc_client_secret",
            "oidc-client-secret".to_owned(),
        ),
        (
            "/run/secrets/anthropic_api_key",
            "sk-ant-api-seed-example".to_owned(),
        ),
        (
            "/run/secrets/spend_admin_write_key",
            "admin-write-key-0123456789abcdef0123456789".to_owned(),
        ),
    ];
    let vars = HashMap::from([
        (
            "GATEWAY_POSTGRES_URL".to_owned(),
            "postgres://gh@127.0.0.1:1/gh".to_owned(),
        ),
        (
            "OTEL_AUTH_HEADER".to_owned(),
            "Bearer otel-token".to_owned(),
        ),
    ]);
    let mut env = gatehouse_engine::deps::MapEnvironment::default();
    for (k, v) in &vars {
        env = env.with_var(k, v);
    }
    for (path, contents) in &files {
        env = env.with_file(path, contents);
    }
    let data = tempfile::tempdir().unwrap();
    let ctx = LoadContext {
        env: &env,
        credentials: &NoCredentialStore,
        default_data_dir: data.path().to_owned(),
    };
    let config = Config::from_yaml(&text, &ctx).unwrap_or_else(|e| panic!("seed example: {e}"));
    gatehouse_engine::check_config(&config).unwrap();
    assert_eq!(config.upstreams.len(), 2);

    let dir = tempfile::tempdir().unwrap();
    let mut moved = text.clone();
    for (path, contents) in &files {
        let local = dir.path().join(Path::new(path).file_name().unwrap());
        std::fs::write(&local, contents).unwrap();
        moved = moved.replace(path, &local.to_string_lossy());
    }
    let file = dir.path().join("gateway.yaml");
    std::fs::write(&file, moved).unwrap();
    let home = tempfile::tempdir().unwrap();
    match reference(&file, &vars, home.path()).await {
        Verdict::Accepted => {}
        other => panic!("the reference refused the seed example: {other:?}"),
    }
}
