//! Configure Claude Code for the local gateway by merging its user settings, with a
//! backup, an undo and drift detection.
//!
//! The file is `$CLAUDE_CONFIG_DIR/settings.json`, else `~/.claude/settings.json`
//! ([`settings_path`]; the caller passes the home directory and the variable in).
//! Gatehouse owns exactly these keys ([`KEYS`]):
//! - `env.ANTHROPIC_BASE_URL`: the gateway's loopback URL;
//! - `apiKeyHelper`: a command that prints the local token from the keychain
//!   (`'<gatehouse binary>' token --local`), so the token is never written to a file;
//! - `env.ANTHROPIC_AUTH_TOKEN` and `env.ANTHROPIC_API_KEY`: removed, because Claude Code
//!   would send them instead of (or beside) the helper's token and the gateway would refuse.
//!
//! Everything else (hooks, plugins, statusLine, permissions, other env vars, unknown keys,
//! key order) is kept: the document is parsed with serde_json's `preserve_order`, changed
//! in place (`shift_remove` for removals) and written back pretty-printed with two-space
//! indents, as Claude Code writes it. Meaning is kept, not whitespace; the backup keeps the
//! exact bytes. Numbers are read exactly (serde_json's `float_roundtrip`), so a float comes
//! back bit for bit. (Integers beyond 64 bits would lose precision; settings have none.)
//!
//! Next to the settings file (beside a symlink, not in the dotfiles repository it points
//! to) Gatehouse keeps two files, both written 0600 on Unix:
//! - `settings.json.gatehouse-backup`: the exact bytes before the first configure (absent
//!   when there was no file). A second configure keeps the first backup.
//! - `settings.json.gatehouse-record.json`: what was written (values of the owned keys and a
//!   SHA-256 of the whole file) and the previous values of exactly those keys. It holds no
//!   Gatehouse secret; a removed `ANTHROPIC_AUTH_TOKEN` is kept there as the backup keeps it.
//!
//! Writes are atomic (temp file in the same directory, then rename) and keep the file's
//! permissions; a new file is 0600. A symlinked settings file is written through the link.
//! Order on configure: backup, record, settings — so a crash leaves a record that undo can
//! still act on.
//!
//! Undo restores the backup (with the settings file's current permissions) when the file
//! is byte-for-byte what Gatehouse wrote (or the file is gone) and nobody edited it between
//! configures; otherwise it reverts only the owned keys that still hold what Gatehouse
//! wrote, and keeps the user's later edits, including their own later changes to those keys.
//!
//! A malformed file (invalid JSON, a top level that is not an object, `env` that is not an
//! object) is never written; the error names the file and the problem. An empty file counts
//! as `{}`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

mod fsio;

/// Suffix of the backup file, appended to the settings file name.
pub const BACKUP_SUFFIX: &str = ".gatehouse-backup";
/// Suffix of the record file, appended to the settings file name.
pub const RECORD_SUFFIX: &str = ".gatehouse-record.json";

/// A settings key Gatehouse owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    BaseUrl,
    ApiKeyHelper,
    AuthToken,
    ApiKey,
    /// `statusLine`: owned only when the user chose Gatehouse's (see [`Target::statusline`]).
    StatusLine,
}

/// The owned keys, in the order they are applied and reported.
pub const KEYS: [Key; 4] = [Key::BaseUrl, Key::ApiKeyHelper, Key::AuthToken, Key::ApiKey];

impl Key {
    /// The dotted name, as shown to the user and kept in the record.
    pub fn name(self) -> &'static str {
        match self {
            Key::BaseUrl => "env.ANTHROPIC_BASE_URL",
            Key::ApiKeyHelper => "apiKeyHelper",
            Key::AuthToken => "env.ANTHROPIC_AUTH_TOKEN",
            Key::ApiKey => "env.ANTHROPIC_API_KEY",
            Key::StatusLine => "statusLine",
        }
    }

    /// `Some(name)` for a key inside `env`, `None` for a top-level key.
    fn env_name(self) -> Option<&'static str> {
        match self {
            Key::BaseUrl => Some("ANTHROPIC_BASE_URL"),
            Key::ApiKeyHelper | Key::StatusLine => None,
            Key::AuthToken => Some("ANTHROPIC_AUTH_TOKEN"),
            Key::ApiKey => Some("ANTHROPIC_API_KEY"),
        }
    }

    fn from_name(name: &str) -> Option<Key> {
        KEYS.into_iter()
            .chain([Key::StatusLine])
            .find(|k| k.name() == name)
    }
}

/// What Gatehouse writes: the loopback URL and the helper command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub base_url: String,
    pub api_key_helper: String,
    /// Gatehouse's `statusLine` (`<gatehouse binary> statusline`), when the user chose it;
    /// `None` leaves whatever status line they have alone.
    pub statusline: Option<Value>,
}

impl Target {
    /// `base_url` must be an http(s) URL (a trailing `/` is dropped); the helper runs
    /// `<gatehouse_binary> token --local`, the path quoted for a POSIX shell.
    pub fn new(base_url: &str, gatehouse_binary: &Path) -> Result<Self, SettingsError> {
        let bad = |reason: String| SettingsError::InvalidTarget(reason);
        let url = url::Url::parse(base_url)
            .map_err(|e| bad(format!("base URL `{base_url}` is not a URL ({e})")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(bad(format!(
                "base URL `{base_url}` must be http(s) with a host"
            )));
        }
        let binary = gatehouse_binary.to_str().ok_or_else(|| {
            bad(format!(
                "the gatehouse binary path {} is not valid UTF-8",
                gatehouse_binary.display()
            ))
        })?;
        if !gatehouse_binary.is_absolute() {
            return Err(bad(format!(
                "the gatehouse binary path {binary} is not absolute"
            )));
        }
        let quoted = shlex::try_quote(binary)
            .map_err(|e| bad(format!("cannot quote the gatehouse binary path: {e}")))?;
        Ok(Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key_helper: format!("{quoted} token --local"),
            statusline: None,
        })
    }

    /// The same target, also putting Gatehouse's status line in: `command` is the line
    /// Claude Code runs (see [`statusline_command`]).
    pub fn with_statusline(mut self, command: String) -> Self {
        self.statusline = Some(serde_json::json!({
            "type": "command",
            "command": command,
            "padding": 0,
        }));
        self
    }

    /// Whether a `statusLine` value is Gatehouse's (it runs `gatehouse-statusline` or
    /// `gatehouse … statusline`).
    pub fn is_ours(statusline: Option<&Value>) -> bool {
        statusline
            .and_then(|v| v.get("command"))
            .and_then(Value::as_str)
            .is_some_and(|c| {
                c.contains("gatehouse-statusline")
                    || (c.contains("gatehouse") && c.ends_with(" statusline"))
            })
    }

    /// The keys this target sets: the four always, `statusLine` when chosen.
    fn keys(&self, record: Option<&Record>) -> Vec<Key> {
        let status = self.statusline.is_some()
            || record.is_some_and(|r| r.keys.iter().any(|k| k.key == Key::StatusLine.name()));
        KEYS.into_iter()
            .chain(status.then_some(Key::StatusLine))
            .collect()
    }

    /// Whether this target changes `key` (a `statusLine` it did not choose is left alone).
    fn touches(&self, key: Key) -> bool {
        key != Key::StatusLine || self.statusline.is_some()
    }

    /// The value Gatehouse wants for `key` (`None`: the key must be absent).
    fn wanted(&self, key: Key) -> Option<Value> {
        match key {
            Key::BaseUrl => Some(Value::String(self.base_url.clone())),
            Key::ApiKeyHelper => Some(Value::String(self.api_key_helper.clone())),
            Key::AuthToken | Key::ApiKey => None,
            Key::StatusLine => self.statusline.clone(),
        }
    }
}

/// Claude Code's user settings file: `$CLAUDE_CONFIG_DIR/settings.json` when the variable
/// is set and not empty, else `<home>/.claude/settings.json`.
pub fn settings_path(home: &Path, claude_config_dir: Option<&Path>) -> PathBuf {
    match claude_config_dir {
        Some(d) if !d.as_os_str().is_empty() => d.join("settings.json"),
        _ => home.join(".claude").join("settings.json"),
    }
}

/// Why the settings could not be configured, checked or undone.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("Claude Code settings file {path}: {problem}; the file was left unchanged")]
    Malformed { path: PathBuf, problem: String },
    #[error("cannot read {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("cannot write {path}: {reason}")]
    Write { path: PathBuf, reason: String },
    #[error(
        "Gatehouse's record {path} is unreadable ({problem}); \
         compare the settings with the backup next to it and remove the record"
    )]
    Record { path: PathBuf, problem: String },
    #[error("cannot configure Claude Code: {0}")]
    InvalidTarget(String),
}

/// A value as it may be shown: never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Shown {
    Absent,
    Value(String),
    /// Present, but not shown (it may hold a credential).
    Hidden,
}

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shown::Absent => f.write_str("absent"),
            Shown::Value(v) => write!(f, "{v:?}"),
            Shown::Hidden => f.write_str("set (value not shown)"),
        }
    }
}

/// A key [`ClaudeSettings::changes`] would change.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub key: Key,
    pub now: Option<Value>,
    pub wanted: Option<Value>,
}

/// One owned key that does not hold what Gatehouse wants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drift {
    pub key: &'static str,
    pub expected: Shown,
    pub found: Shown,
}

impl std::fmt::Display for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: expected {}, found {}",
            self.key, self.expected, self.found
        )
    }
}

/// Whether Claude Code is configured for the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Status {
    /// Gatehouse has not configured this file (or its change was undone).
    NotConfigured,
    Configured,
    /// Configured, but someone changed these keys since (or the wanted values moved).
    Drifted {
        keys: Vec<Drift>,
    },
}

/// What [`ClaudeSettings::configure`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigureOutcome {
    /// The file was written (a backup was taken first when `backup` is set).
    Written { backup: Option<PathBuf> },
    /// The file already held exactly this configuration; nothing was written.
    Unchanged,
}

/// What [`ClaudeSettings::undo`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UndoOutcome {
    /// There was no Gatehouse change to undo.
    NothingToUndo,
    /// The file was as Gatehouse left it: the backup was restored (or the file removed,
    /// when there was none before).
    Restored,
    /// The file had later edits: Gatehouse's keys were reverted; `kept` lists owned keys
    /// the user had changed since, which were left as the user set them.
    Reverted { kept: Vec<&'static str> },
}

/// A slot in the record: a key's value, or its absence (distinct from JSON `null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", content = "value", rename_all = "snake_case")]
enum Slot {
    Absent,
    Present(Value),
}

impl Slot {
    fn of(v: Option<&Value>) -> Self {
        v.map_or(Slot::Absent, |v| Slot::Present(v.clone()))
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyRecord {
    key: String,
    written: Slot,
    previous: Slot,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    version: u32,
    /// Whether the settings file existed before the first configure.
    file_existed: bool,
    /// Whether it had an `env` object then.
    env_existed: bool,
    /// SHA-256 (hex) of the bytes Gatehouse last wrote.
    written_sha256: String,
    /// Whether the backup plus Gatehouse's writes account for the whole file: false once
    /// Gatehouse re-configured a file the user had edited since, so that undo reverts keys
    /// instead of restoring a backup that lacks those edits.
    restorable: bool,
    keys: Vec<KeyRecord>,
}

const RECORD_VERSION: u32 = 1;

/// The status line command for a `gatehouse` binary and a data directory: the small
/// `gatehouse-statusline` beside it when it is there (no GUI libraries to load, so it starts
/// in milliseconds), else `gatehouse statusline`; paths quoted for a POSIX shell.
pub fn statusline_command(
    gatehouse_binary: &Path,
    data_dir: &Path,
) -> Result<String, SettingsError> {
    let quote = |p: &Path| -> Result<String, SettingsError> {
        let text = p.to_str().ok_or_else(|| {
            SettingsError::InvalidTarget(format!("{} is not valid UTF-8", p.display()))
        })?;
        shlex::try_quote(text)
            .map(|q| q.into_owned())
            .map_err(|e| SettingsError::InvalidTarget(format!("cannot quote {text}: {e}")))
    };
    let small = gatehouse_binary.with_file_name("gatehouse-statusline");
    let dir = quote(data_dir)?;
    Ok(if small.is_file() {
        format!("{} --data-dir {dir}", quote(&small)?)
    } else {
        format!("{} --data-dir {dir} statusline", quote(gatehouse_binary)?)
    })
}

/// Claude Code's user settings file and Gatehouse's backup and record beside it.
#[derive(Debug, Clone)]
pub struct ClaudeSettings {
    path: PathBuf,
}

impl ClaudeSettings {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn backup_path(&self) -> PathBuf {
        sibling(&self.path, BACKUP_SUFFIX)
    }

    pub fn record_path(&self) -> PathBuf {
        sibling(&self.path, RECORD_SUFFIX)
    }

    /// The settings document as it is now (`{}` when there is no file).
    pub fn read(&self) -> Result<Map<String, Value>, SettingsError> {
        match fsio::read_optional(&real_path(&self.path))? {
            Some(bytes) => self.parse(&bytes),
            None => Ok(Map::new()),
        }
    }

    /// What [`ClaudeSettings::configure`] would change, without changing it: each key
    /// the target sets whose value differs, with what it holds now and what it would hold
    /// (`None`: absent).
    pub fn changes(&self, target: &Target) -> Result<Vec<Change>, SettingsError> {
        let doc = self.read()?;
        Ok(target
            .keys(None)
            .into_iter()
            .filter(|k| target.touches(*k))
            .filter_map(|key| {
                let now = get(&doc, key).cloned();
                let wanted = target.wanted(key);
                (now != wanted).then_some(Change { key, now, wanted })
            })
            .collect())
    }

    /// Merges the target into the settings (backup first on the first configure).
    pub fn configure(&self, target: &Target) -> Result<ConfigureOutcome, SettingsError> {
        let real = real_path(&self.path);
        let before = fsio::read_optional(&real)?;
        let mut doc = match &before {
            Some(bytes) => self.parse(bytes)?,
            None => Map::new(),
        };
        let record = self.read_record()?;
        let keys = target.keys(record.as_ref());
        let before_sha = before.as_deref().map(|b| hex::encode(Sha256::digest(b)));
        let (file_existed, env_existed, restorable, previous) = match &record {
            Some(r) => (
                r.file_existed,
                r.env_existed,
                r.restorable && before_sha.as_deref() == Some(r.written_sha256.as_str()),
                previous_of(r, &keys, &doc),
            ),
            None => (
                before.is_some(),
                doc.contains_key("env"),
                true,
                keys.iter().map(|k| Slot::of(get(&doc, *k))).collect(),
            ),
        };
        for key in keys.iter().copied().filter(|k| target.touches(*k)) {
            set(&mut doc, key, target.wanted(key));
        }
        let after = render(&doc, &self.path)?;
        let sha = hex::encode(Sha256::digest(&after));
        if before_sha.as_deref() == Some(sha.as_str())
            && record.as_ref().is_some_and(|r| r.written_sha256 == sha)
        {
            return Ok(ConfigureOutcome::Unchanged);
        }
        let mut backup = None;
        if record.is_none()
            && let Some(bytes) = &before
        {
            fsio::write_atomic(&self.backup_path(), bytes, None)?;
            backup = Some(self.backup_path());
        }
        let new_record = Record {
            version: RECORD_VERSION,
            file_existed,
            env_existed,
            written_sha256: sha,
            restorable,
            keys: keys
                .iter()
                .zip(previous)
                .map(|(k, previous)| KeyRecord {
                    key: k.name().to_owned(),
                    // What the key holds now: Gatehouse's value, or the user's where the
                    // target left it alone.
                    written: Slot::of(get(&doc, *k)),
                    previous,
                })
                .collect(),
        };
        let mut record_bytes =
            serde_json::to_vec_pretty(&new_record).map_err(|e| SettingsError::Write {
                path: self.record_path(),
                reason: e.to_string(),
            })?;
        record_bytes.push(b'\n');
        fsio::write_atomic(&self.record_path(), &record_bytes, None)?;
        let mode = if before.is_some() {
            fsio::mode_of(&real)
        } else {
            None
        };
        fsio::write_atomic(&real, &after, mode)?;
        Ok(ConfigureOutcome::Written { backup })
    }

    /// Undoes Gatehouse's change: restores the backup, or reverts only Gatehouse's keys
    /// when the file was edited since.
    pub fn undo(&self) -> Result<UndoOutcome, SettingsError> {
        let Some(record) = self.read_record()? else {
            return Ok(UndoOutcome::NothingToUndo);
        };
        let real = real_path(&self.path);
        let current = fsio::read_optional(&real)?;
        let unchanged = current
            .as_ref()
            .is_some_and(|b| hex::encode(Sha256::digest(b)) == record.written_sha256);
        let outcome = match current {
            Some(bytes) if !(unchanged && record.restorable) => {
                let kept = self.revert_keys(&record, &bytes, &real)?;
                UndoOutcome::Reverted { kept }
            }
            // Deleted since, and the backup no longer matches what the user had: leave it.
            None if !record.restorable => UndoOutcome::Reverted { kept: Vec::new() },
            _ => {
                self.restore(&record, &real)?;
                UndoOutcome::Restored
            }
        };
        fsio::remove_optional(&self.backup_path())?;
        fsio::remove_optional(&self.record_path())?;
        Ok(outcome)
    }

    /// Compares the owned keys with what Gatehouse wants now.
    pub fn status(&self, target: &Target) -> Result<Status, SettingsError> {
        let real = real_path(&self.path);
        let doc = match fsio::read_optional(&real)? {
            Some(bytes) => self.parse(&bytes)?,
            None => Map::new(),
        };
        if self.read_record()?.is_none() {
            return Ok(Status::NotConfigured);
        }
        let keys: Vec<Drift> = KEYS
            .into_iter()
            .chain(target.statusline.is_some().then_some(Key::StatusLine))
            .filter_map(|key| {
                let wanted = target.wanted(key);
                let found = get(&doc, key);
                (found != wanted.as_ref()).then(|| Drift {
                    key: key.name(),
                    expected: match wanted {
                        Some(Value::String(s)) => Shown::Value(s),
                        Some(_) => Shown::Hidden,
                        None => Shown::Absent,
                    },
                    found: show(key, found),
                })
            })
            .collect();
        Ok(if keys.is_empty() {
            Status::Configured
        } else {
            Status::Drifted { keys }
        })
    }

    /// Reverts the owned keys that still hold what Gatehouse wrote; returns the others.
    fn revert_keys(
        &self,
        record: &Record,
        bytes: &[u8],
        real: &Path,
    ) -> Result<Vec<&'static str>, SettingsError> {
        let mut doc = self.parse(bytes)?;
        let mut kept = Vec::new();
        for kr in &record.keys {
            let Some(key) = Key::from_name(&kr.key) else {
                continue;
            };
            if Slot::of(get(&doc, key)) != kr.written {
                kept.push(key.name());
                continue;
            }
            let previous = match &kr.previous {
                Slot::Absent => None,
                Slot::Present(v) => Some(v.clone()),
            };
            set(&mut doc, key, previous);
        }
        if !record.env_existed
            && doc
                .get("env")
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
        {
            doc.shift_remove("env");
        }
        let after = render(&doc, &self.path)?;
        fsio::write_atomic(real, &after, fsio::mode_of(real))?;
        Ok(kept)
    }

    fn restore(&self, record: &Record, real: &Path) -> Result<(), SettingsError> {
        if !record.file_existed {
            return fsio::remove_optional(real);
        }
        let backup = self.backup_path();
        let bytes = fsio::read_optional(&backup)?.ok_or_else(|| SettingsError::Read {
            path: backup.clone(),
            reason: "the backup is missing; the settings were left as they are".into(),
        })?;
        fsio::write_atomic(real, &bytes, fsio::mode_of(real))
    }

    fn parse(&self, bytes: &[u8]) -> Result<Map<String, Value>, SettingsError> {
        parse_settings(bytes).map_err(|problem| SettingsError::Malformed {
            path: self.path.clone(),
            problem,
        })
    }

    fn read_record(&self) -> Result<Option<Record>, SettingsError> {
        let path = self.record_path();
        let Some(bytes) = fsio::read_optional(&path)? else {
            return Ok(None);
        };
        let record: Record = serde_json::from_slice(&bytes).map_err(|e| SettingsError::Record {
            path: path.clone(),
            problem: e.to_string(),
        })?;
        if record.version != RECORD_VERSION {
            return Err(SettingsError::Record {
                path,
                problem: format!("unknown version {}", record.version),
            });
        }
        Ok(Some(record))
    }
}

/// The previous slots of a record, in `keys`' order; a key it lacks (a status line chosen
/// only now) had what the document holds before this configure.
fn previous_of(r: &Record, keys: &[Key], doc: &Map<String, Value>) -> Vec<Slot> {
    keys.iter()
        .map(|k| {
            r.keys
                .iter()
                .find(|kr| kr.key == k.name())
                .map_or_else(|| Slot::of(get(doc, *k)), |kr| kr.previous.clone())
        })
        .collect()
}

/// Parses a settings file: an object whose `env`, when present, is an object.
pub fn parse_settings(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8 text ({e})"))?;
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON ({e})"))?;
    let Value::Object(doc) = value else {
        return Err(format!("the top level is {}, not an object", kind(&value)));
    };
    if let Some(env) = doc.get("env")
        && !env.is_object()
    {
        return Err(format!("`env` is {}, not an object", kind(env)));
    }
    Ok(doc)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn get(doc: &Map<String, Value>, key: Key) -> Option<&Value> {
    match key.env_name() {
        Some(name) => doc.get("env")?.as_object()?.get(name),
        None => doc.get(key.name()),
    }
}

/// Sets (keeping the key's position) or removes (keeping the others' order) an owned key.
fn set(doc: &mut Map<String, Value>, key: Key, value: Option<Value>) {
    let (map, name) = match key.env_name() {
        Some(name) => {
            if value.is_none() && !doc.contains_key("env") {
                return;
            }
            let env = doc
                .entry("env")
                .or_insert_with(|| Value::Object(Map::new()));
            match env.as_object_mut() {
                Some(m) => (m, name),
                // parse_settings rejects a non-object `env` before any change.
                None => return,
            }
        }
        None => (&mut *doc, key.name()),
    };
    match value {
        Some(v) => {
            map.insert(name.to_owned(), v);
        }
        None => {
            map.shift_remove(name);
        }
    }
}

fn show(key: Key, found: Option<&Value>) -> Shown {
    let Some(v) = found else {
        return Shown::Absent;
    };
    match key {
        // A URL is shown without any user name or password in it; anything else is hidden.
        Key::BaseUrl => match v.as_str().map(|s| (s, url::Url::parse(s))) {
            Some((s, Ok(mut u))) => {
                if u.username().is_empty() && u.password().is_none() {
                    Shown::Value(s.to_owned())
                } else {
                    let _ = u.set_username("");
                    let _ = u.set_password(None);
                    Shown::Value(u.to_string())
                }
            }
            _ => Shown::Hidden,
        },
        // A helper command or a token may hold a credential; so may a status line command.
        Key::ApiKeyHelper | Key::AuthToken | Key::ApiKey | Key::StatusLine => Shown::Hidden,
    }
}

fn render(doc: &Map<String, Value>, path: &Path) -> Result<Vec<u8>, SettingsError> {
    let mut out = serde_json::to_vec_pretty(doc).map_err(|e| SettingsError::Write {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    out.push(b'\n');
    Ok(out)
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

/// The file a write should replace: the target of a symlink, else the path itself.
fn real_path(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
        }
        _ => path.to_owned(),
    }
}

#[cfg(test)]
mod tests;
