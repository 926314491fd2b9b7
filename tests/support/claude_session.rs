//! One multi-turn Claude Code session in print mode: a fresh home and working directory,
//! the first turn `claude -p`, every later one `claude -p --continue` in the same directory
//! (so the CLI resumes its own transcript, compactions included). Each turn is bounded and
//! reported as Claude Code's JSON result says it went.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::e2e_bin;

/// The longest one turn may take.
const TURN_TIMEOUT: Duration = Duration::from_secs(120);

/// How one turn went.
#[derive(Clone, Debug)]
pub struct Turn {
    /// Exit 0 and a result that is not an error.
    pub ok: bool,
    /// The result text (Claude Code's answer, or its error).
    pub result: String,
    /// Model round trips Claude Code counted for the turn.
    pub num_turns: u64,
    /// Whatever the CLI printed, for a failure message.
    pub output: String,
}

/// A Claude Code session against a gateway.
pub struct ClaudeSession {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    env: Vec<(String, String)>,
    turns: usize,
}

impl ClaudeSession {
    /// A session through the gateway at `base_url` with the client key `key`; `env` is
    /// added to the CLI's clean environment.
    pub fn new(base_url: &str, key: &str, env: &[(&str, &str)]) -> ClaudeSession {
        let mut all = vec![
            ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
            ("TERM".to_owned(), "dumb".to_owned()),
            ("ANTHROPIC_BASE_URL".to_owned(), base_url.to_owned()),
            ("ANTHROPIC_AUTH_TOKEN".to_owned(), key.to_owned()),
            (
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_owned(),
                "1".to_owned(),
            ),
            ("CLAUDE_CODE_MAX_RETRIES".to_owned(), "0".to_owned()),
        ];
        all.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        ClaudeSession {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
            env: all,
            turns: 0,
        }
    }

    /// The session's working directory (where its files go).
    pub fn work_dir(&self) -> &Path {
        self.work.path()
    }

    /// A file in the working directory, written with `bytes`; its absolute path.
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.work.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Runs one turn with `prompt`; `tools` is `--allowedTools`.
    pub async fn turn(&mut self, prompt: &str, tools: &str) -> Turn {
        let claude = e2e_bin("claude");
        assert!(
            claude.exists(),
            "{} is missing: run scripts/test.sh",
            claude.display()
        );
        let mut cmd = tokio::process::Command::new(&claude);
        cmd.args([
            "-p",
            prompt,
            "--output-format",
            "json",
            "--allowedTools",
            tools,
        ]);
        if self.turns > 0 {
            cmd.arg("--continue");
        }
        cmd.current_dir(self.work.path())
            .env_clear()
            .env("HOME", self.home.path())
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        self.turns += 1;
        let out = match tokio::time::timeout(TURN_TIMEOUT, cmd.output()).await {
            Ok(out) => out.expect("claude runs"),
            Err(_) => {
                return Turn {
                    ok: false,
                    result: format!("no answer within {} s", TURN_TIMEOUT.as_secs()),
                    num_turns: 0,
                    output: String::new(),
                };
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let output = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let Ok(v) = serde_json::from_str::<serde_json::Value>(stdout.trim()) else {
            return Turn {
                ok: false,
                result: format!("no JSON result (exit {:?})", out.status.code()),
                num_turns: 0,
                output,
            };
        };
        Turn {
            ok: out.status.success() && v["is_error"] == false,
            result: v["result"].as_str().unwrap_or_default().to_owned(),
            num_turns: v["num_turns"].as_u64().unwrap_or(0),
            output,
        }
    }
}
