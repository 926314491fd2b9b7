//! Which project a Claude Code session belongs to, read from Claude Code's own transcript
//! index on this machine.
//!
//! Claude Code (the CLI) writes one transcript per session under
//! `<config dir>/projects/<encoded cwd>/<session id>.jsonl`, where the config dir is
//! `$CLAUDE_CONFIG_DIR` or `~/.claude` ([`config_dir`]) and the encoded cwd is the working
//! directory with every character that is not ASCII alphanumeric replaced by `-`. Each
//! line is a JSON object; conversation entries carry `sessionId` and `cwd`. Subagent
//! transcripts may sit in `<encoded cwd>/<session id>/subagents/agent-<id>.jsonl` and
//! belong to that session.
//!
//! [`scan`] maps session ids to a [`Project`]: the `cwd` found in the first lines of a
//! transcript, else a `cwd` of a sibling transcript whose encoding matches the directory
//! name, else the directory name alone. [`Cached`] keeps one scan for a while so the tray
//! can ask often.
//!
//! What it reads: directory names, file names and metadata under `projects`, and the first
//! [`Limits::max_bytes_per_file`] bytes of each transcript, of which it keeps only the
//! `cwd` and `sessionId` fields. What it never does: write, create or lock anything, follow
//! a symbolic link (a linked `projects` dir, project dir, session dir or file is skipped;
//! files are opened with `O_NOFOLLOW` where the flag's value is known and checked to be
//! the regular file that was listed), keep or send any other content, read the process
//! environment, fail or panic: whatever cannot be read or does not look right is skipped.
//!
//! Limits: at most [`Limits::max_dirs`] directories and [`Limits::max_files`] files per
//! scan, newest first (by modification time); lines longer than [`Limits::max_line`]
//! are skipped without being buffered; session ids must be 1..=128 characters of
//! `[A-Za-z0-9_-]`; a `cwd` must be an absolute path of at most 4096 bytes without control
//! characters. Subagent directories nested below `subagents/` are not walked. A directory
//! swapped for a link between its check and its listing is not caught (std has no
//! `openat`), nor is a hard link (it can only name a file the user could read anyway).
//! Scanning is blocking file IO: call it off the async runtime (e.g. `spawn_blocking`).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;

/// The longest session id accepted.
pub const MAX_SESSION_ID: usize = 128;
/// The longest `cwd` accepted, in bytes.
pub const MAX_CWD: usize = 4096;
/// Claude Code shortens encoded directory names longer than this (and appends a hash).
const MAX_ENCODED: usize = 200;
/// The most distinct `sessionId` values kept from one file.
const MAX_IDS_PER_FILE: usize = 8;
const TRANSCRIPT_EXT: &str = ".jsonl";

/// The project a session ran in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The session's working directory as Claude Code recorded it; `None` when only the
    /// transcript directory's (encoded, lossy) name is known.
    pub path: Option<String>,
    /// The last component of `path` (the whole path for a root such as `/`), or the
    /// transcript directory's name when `path` is `None`.
    pub name: String,
}

impl Project {
    fn from_cwd(cwd: &str) -> Project {
        let name = Path::new(cwd)
            .file_name()
            .and_then(OsStr::to_str)
            .unwrap_or(cwd);
        Project {
            path: Some(cwd.to_owned()),
            name: name.to_owned(),
        }
    }

    fn from_dir_name(dir_name: &str) -> Project {
        Project {
            path: None,
            name: dir_name.to_owned(),
        }
    }
}

/// Session id → project, as found by one [`scan`].
#[derive(Debug, Clone, Default)]
pub struct TranscriptIndex {
    sessions: HashMap<String, Project>,
}

impl TranscriptIndex {
    /// The project of a session, if its transcript was found.
    pub fn project_of(&self, session_id: &str) -> Option<&Project> {
        self.sessions.get(session_id)
    }

    /// How many session ids are known.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session id is known.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

/// Bounds on one [`scan`]; when one is reached the rest is skipped, newest first kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Directories listed in total: project dirs, then `<session>/subagents` dirs.
    pub max_dirs: usize,
    /// Transcript files opened in total.
    pub max_files: usize,
    /// Directory entries looked at in total (files of any kind included).
    pub max_entries: usize,
    /// Bytes read from the start of each file to find a `cwd`.
    pub max_bytes_per_file: u64,
    /// Longest line parsed, in bytes; longer lines are skipped.
    pub max_line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_dirs: 2_000,
            max_files: 50_000,
            max_entries: 200_000,
            max_bytes_per_file: 256 * 1024,
            max_line: 64 * 1024,
        }
    }
}

/// Claude Code's config dir: `CLAUDE_CONFIG_DIR` when set and not empty, else
/// `<home>/.claude`. `None` when neither is known, or when `CLAUDE_CONFIG_DIR` is relative
/// (Claude Code resolves it against its own working directory, which is not ours).
pub fn config_dir(env_claude_config_dir: Option<&OsStr>, home: Option<&Path>) -> Option<PathBuf> {
    match env_claude_config_dir.filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            dir.is_absolute().then_some(dir)
        }
        None => home
            .filter(|h| !h.as_os_str().is_empty())
            .map(|h| h.join(".claude")),
    }
}

/// Whether `id` can be a session id: 1..=[`MAX_SESSION_ID`] of `[A-Za-z0-9_-]`.
pub fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_SESSION_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Reads `<config_dir>/projects` within `limits`. Never fails: an index of what could be
/// read (empty when there is no `projects` dir, or it is a symbolic link).
pub fn scan(config_dir: &Path, limits: &Limits) -> TranscriptIndex {
    let mut scan = Scan {
        limits,
        budget: Budget {
            dirs: limits.max_dirs,
            files: limits.max_files,
            entries: limits.max_entries,
        },
        found: HashMap::new(),
    };
    let projects = config_dir.join("projects");
    if is_real_dir(&projects) {
        let mut dirs: Vec<Child> = scan
            .list(&projects)
            .into_iter()
            .filter(|c| c.is_dir)
            .collect();
        newest_first(&mut dirs);
        for dir in dirs {
            if !scan.budget.take_dir() {
                break;
            }
            scan.project_dir(&projects.join(&dir.name), &dir.name);
        }
    }
    TranscriptIndex {
        sessions: scan
            .found
            .into_iter()
            .map(|(id, found)| (id, found.project))
            .collect(),
    }
}

/// Keeps one [`scan`] and serves it until it is older than `max_age` (or the config dir
/// changes). A lookup of an unknown (well-formed) session id rescans sooner, once the scan
/// is `miss_retry` old, so a new session shows up without rescanning on every request.
/// A scan runs under the lock: concurrent callers wait for it rather than scan twice.
#[derive(Debug)]
pub struct Cached {
    limits: Limits,
    max_age: Duration,
    miss_retry: Duration,
    last: Mutex<Option<LastScan>>,
}

#[derive(Debug)]
struct LastScan {
    config_dir: PathBuf,
    at: Instant,
    index: Arc<TranscriptIndex>,
}

impl Cached {
    /// A cache that has not scanned yet.
    pub fn new(limits: Limits, max_age: Duration, miss_retry: Duration) -> Cached {
        Cached {
            limits,
            max_age,
            miss_retry,
            last: Mutex::new(None),
        }
    }

    /// The index for `config_dir`, scanned now when there is none, it is `max_age` old, or
    /// it was scanned for another dir.
    pub fn get(&self, config_dir: &Path, now: Instant) -> Arc<TranscriptIndex> {
        self.get_within(config_dir, now, self.max_age)
    }

    /// The project of `session_id`; see [`Cached`] for when it rescans. An id that is not
    /// well-formed ([`valid_session_id`]) is never looked up and never causes a scan.
    pub fn project_of(&self, config_dir: &Path, session_id: &str, now: Instant) -> Option<Project> {
        if !valid_session_id(session_id) {
            return None;
        }
        let index = self.get(config_dir, now);
        match index.project_of(session_id) {
            Some(project) => Some(project.clone()),
            None if self.miss_retry < self.max_age => self
                .get_within(config_dir, now, self.miss_retry)
                .project_of(session_id)
                .cloned(),
            None => None,
        }
    }

    fn get_within(
        &self,
        config_dir: &Path,
        now: Instant,
        max_age: Duration,
    ) -> Arc<TranscriptIndex> {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(l) = last.as_ref()
            && l.config_dir == config_dir
            && is_fresh(now.saturating_duration_since(l.at), max_age)
        {
            return Arc::clone(&l.index);
        }
        let index = Arc::new(scan(config_dir, &self.limits));
        *last = Some(LastScan {
            config_dir: config_dir.to_owned(),
            at: now,
            index: Arc::clone(&index),
        });
        index
    }
}

/// Whether a scan `age` old is still served; one made at `now` always is.
fn is_fresh(age: Duration, max_age: Duration) -> bool {
    age.is_zero() || age < max_age
}

/// What is left of [`Limits`] during a scan.
struct Budget {
    dirs: usize,
    files: usize,
    entries: usize,
}

impl Budget {
    fn take_dir(&mut self) -> bool {
        take(&mut self.dirs)
    }
    fn take_file(&mut self) -> bool {
        take(&mut self.files)
    }
    fn take_entry(&mut self) -> bool {
        take(&mut self.entries)
    }
}

fn take(left: &mut usize) -> bool {
    let ok = *left > 0;
    *left = left.saturating_sub(1);
    ok
}

/// A directory entry worth a look: a UTF-8 name, a real directory or regular file.
struct Child {
    name: String,
    is_dir: bool,
    modified: SystemTime,
}

fn newest_first(children: &mut [Child]) {
    children.sort_by(|a, b| {
        b.modified
            .cmp(&a.modified)
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// A session id's mapping, with how it was found (the better one wins).
struct Found {
    project: Project,
    rank: Rank,
}

/// A file's own name beats a `sessionId` field inside another file; a known path beats none.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Rank {
    from_name: bool,
    has_path: bool,
}

/// What the first lines of one transcript say.
#[derive(Default)]
struct FileFacts {
    cwd: Option<String>,
    session_ids: Vec<String>,
}

struct Scan<'a> {
    limits: &'a Limits,
    budget: Budget,
    found: HashMap<String, Found>,
}

impl Scan<'_> {
    /// The UTF-8-named real directories and regular files in `dir` (nothing on error).
    fn list(&mut self, dir: &Path) -> Vec<Child> {
        let Ok(entries) = fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut children = Vec::new();
        for entry in entries {
            if !self.budget.take_entry() {
                break;
            }
            let Ok(entry) = entry else { continue };
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // Not followed: a symbolic link (or junction) is neither a dir nor a file here.
            let Ok(meta) = entry.metadata() else { continue };
            let kind = meta.file_type();
            if kind.is_symlink() || !(kind.is_dir() || kind.is_file()) {
                continue;
            }
            children.push(Child {
                name,
                is_dir: kind.is_dir(),
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            });
        }
        children
    }

    /// One `<encoded cwd>` dir: its transcripts, then its sessions' subagent dirs.
    fn project_dir(&mut self, dir: &Path, dir_name: &str) {
        let mut children = self.list(dir);
        newest_first(&mut children);
        let mut files = Vec::new();
        for child in children.iter().filter(|c| !c.is_dir) {
            let Some(stem) = transcript_stem(&child.name) else {
                continue;
            };
            if !self.budget.take_file() {
                break;
            }
            if let Some(facts) = read_transcript(&dir.join(&child.name), self.limits) {
                files.push((stem, facts));
            }
        }
        // Every file here was started in a dir that encodes to `dir_name`; one whose cwd
        // says so names the project for files that have no cwd, or moved away from it.
        let dir_cwd = files
            .iter()
            .filter_map(|(_, facts)| facts.cwd.as_deref())
            .find(|cwd| encodes_to(cwd, dir_name))
            .map(str::to_owned);
        let project_for = |cwd: Option<&str>| match (cwd, dir_cwd.as_deref()) {
            (Some(cwd), Some(dir_cwd)) if !encodes_to(cwd, dir_name) => Project::from_cwd(dir_cwd),
            (Some(cwd), _) => Project::from_cwd(cwd),
            (None, Some(dir_cwd)) => Project::from_cwd(dir_cwd),
            (None, None) => Project::from_dir_name(dir_name),
        };
        for (stem, facts) in &files {
            let project = project_for(facts.cwd.as_deref());
            for id in facts.session_ids.iter().filter(|id| *id != stem) {
                self.insert(id, project.clone(), false);
            }
            self.insert(stem, project, true);
        }
        for child in children.iter().filter(|c| c.is_dir) {
            let sid = child.name.as_str();
            if !valid_session_id(sid) || self.known_with_path(sid) {
                continue;
            }
            if let Some(cwd) = self.subagents(&dir.join(sid)) {
                self.insert(sid, project_for(cwd.as_deref()), true);
            }
        }
    }

    /// `<session dir>/subagents/*.jsonl`: `None` when no such file could be read, else
    /// the first `cwd` found in them.
    fn subagents(&mut self, session_dir: &Path) -> Option<Option<String>> {
        let dir = session_dir.join("subagents");
        if !is_real_dir(&dir) || !self.budget.take_dir() {
            return None;
        }
        let mut children = self.list(&dir);
        newest_first(&mut children);
        let mut any = false;
        for child in children.iter().filter(|c| !c.is_dir) {
            if transcript_stem(&child.name).is_none() {
                continue;
            }
            if !self.budget.take_file() {
                break;
            }
            let Some(facts) = read_transcript(&dir.join(&child.name), self.limits) else {
                continue;
            };
            if facts.cwd.is_some() {
                return Some(facts.cwd);
            }
            any = true;
        }
        any.then_some(None)
    }

    fn known_with_path(&self, session_id: &str) -> bool {
        self.found
            .get(session_id)
            .is_some_and(|f| f.rank.from_name && f.rank.has_path)
    }

    fn insert(&mut self, session_id: &str, project: Project, from_name: bool) {
        let rank = Rank {
            from_name,
            has_path: project.path.is_some(),
        };
        match self.found.get_mut(session_id) {
            Some(found) if found.rank >= rank => {}
            Some(found) => *found = Found { project, rank },
            None => {
                self.found
                    .insert(session_id.to_owned(), Found { project, rank });
            }
        }
    }
}

/// The session id a transcript's file name gives, if it is one.
fn transcript_stem(file_name: &str) -> Option<&str> {
    file_name
        .strip_suffix(TRANSCRIPT_EXT)
        .filter(|stem| valid_session_id(stem))
}

/// Whether `path` is a directory itself, not a symbolic link to one.
fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_dir())
}

/// Claude Code's name for a working directory's transcript dir: each UTF-16 unit that is
/// not ASCII alphanumeric becomes `-`.
fn encode_cwd(cwd: &str) -> String {
    let mut out = String::with_capacity(cwd.len());
    for c in cwd.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else {
            out.extend(std::iter::repeat_n('-', c.len_utf16()));
        }
    }
    out
}

/// Whether Claude Code would keep `cwd`'s transcripts in `dir_name` (long names are cut to
/// [`MAX_ENCODED`] characters and get `-<hash>` appended).
fn encodes_to(cwd: &str, dir_name: &str) -> bool {
    let encoded = encode_cwd(cwd);
    if encoded.len() <= MAX_ENCODED {
        return encoded == dir_name;
    }
    match (encoded.get(..MAX_ENCODED), dir_name.get(..=MAX_ENCODED)) {
        (Some(prefix), Some(named)) => named.strip_suffix('-') == Some(prefix),
        _ => false,
    }
}

/// Whether a `cwd` field looks like a working directory.
fn valid_cwd(cwd: &str) -> bool {
    !cwd.is_empty()
        && cwd.len() <= MAX_CWD
        && !cwd.chars().any(char::is_control)
        && Path::new(cwd).is_absolute()
}

/// The two fields read from a transcript line; every other field is skipped, not kept.
#[derive(Deserialize)]
struct Line {
    cwd: Option<String>,
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

/// The first valid `cwd` in the first bytes of a transcript, and the valid `sessionId`
/// values before it. `None` when the file cannot be opened as a regular file.
fn read_transcript(path: &Path, limits: &Limits) -> Option<FileFacts> {
    let file = open_regular(path)?;
    let mut reader = BufReader::new(file.take(limits.max_bytes_per_file));
    let mut facts = FileFacts::default();
    let mut buf = Vec::new();
    loop {
        let line = match read_line(&mut reader, limits.max_line, &mut buf) {
            Ok(ReadLine::Complete) => buf.as_slice(),
            // A last line without `\n` is whole only when the file ended before the byte
            // limit did; otherwise it was cut.
            Ok(ReadLine::Unterminated) if reader.get_ref().limit() > 0 => buf.as_slice(),
            Ok(ReadLine::TooLong) => continue,
            Ok(ReadLine::Unterminated | ReadLine::End) | Err(_) => break,
        };
        let Some(parsed) = parse_line(line) else {
            continue;
        };
        if let Some(id) = parsed.session_id.filter(|id| valid_session_id(id))
            && facts.session_ids.len() < MAX_IDS_PER_FILE
            && !facts.session_ids.contains(&id)
        {
            facts.session_ids.push(id);
        }
        if let Some(cwd) = parsed.cwd.filter(|cwd| valid_cwd(cwd)) {
            facts.cwd = Some(cwd);
            break;
        }
    }
    Some(facts)
}

fn parse_line(line: &[u8]) -> Option<Line> {
    let text = std::str::from_utf8(line).ok()?;
    if text.trim().is_empty() {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// How [`read_line`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadLine {
    /// A line ending in `\n` is in the buffer (without it).
    Complete,
    /// The input ended after the bytes in the buffer, without a `\n`.
    Unterminated,
    /// The line was longer than the limit; it was consumed, the buffer is empty.
    TooLong,
    /// The input had ended.
    End,
}

/// Reads one line into `buf` (cleared first), never holding more than `max` bytes of it.
fn read_line(reader: &mut impl BufRead, max: usize, buf: &mut Vec<u8>) -> io::Result<ReadLine> {
    buf.clear();
    let mut too_long = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (true, _) => ReadLine::TooLong,
                (false, true) => ReadLine::End,
                (false, false) => ReadLine::Unterminated,
            });
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let part = &available[..newline.unwrap_or(available.len())];
        if !too_long {
            if buf.len().saturating_add(part.len()) > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(part);
            }
        }
        let used = part.len() + usize::from(newline.is_some());
        reader.consume(used);
        if newline.is_some() {
            return Ok(if too_long {
                ReadLine::TooLong
            } else {
                ReadLine::Complete
            });
        }
    }
}

/// Opens `path` for reading only if it is a regular file and not a symbolic link, and is
/// still the file that was checked once open.
fn open_regular(path: &Path) -> Option<File> {
    let checked = fs::symlink_metadata(path).ok()?;
    if !checked.file_type().is_file() {
        return None;
    }
    let file = read_only_no_follow().open(path).ok()?;
    let opened = file.metadata().ok()?;
    (opened.file_type().is_file() && same_file(&checked, &opened)).then_some(file)
}

/// `O_NOFOLLOW | O_NONBLOCK` (no FIFO swapped in can block the scan), with the values of
/// the `libc` crate for these targets; elsewhere 0, and the dev/inode comparison in
/// [`open_regular`] still catches a path swapped after its check.
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    any(
        target_arch = "x86",
        target_arch = "x86_64",
        target_arch = "riscv32",
        target_arch = "riscv64",
        target_arch = "s390x",
        target_arch = "loongarch64"
    )
))]
const NO_FOLLOW_FLAGS: i32 = 0o400_000 | 0o4_000;
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    any(
        target_arch = "arm",
        target_arch = "aarch64",
        target_arch = "powerpc",
        target_arch = "powerpc64"
    )
))]
const NO_FOLLOW_FLAGS: i32 = 0o100_000 | 0o4_000;
#[cfg(any(
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "netbsd",
    target_os = "dragonfly"
))]
const NO_FOLLOW_FLAGS: i32 = 0x0100 | 0x0004;
#[cfg(all(
    unix,
    not(any(
        all(
            any(target_os = "linux", target_os = "android"),
            any(
                target_arch = "x86",
                target_arch = "x86_64",
                target_arch = "riscv32",
                target_arch = "riscv64",
                target_arch = "s390x",
                target_arch = "loongarch64",
                target_arch = "arm",
                target_arch = "aarch64",
                target_arch = "powerpc",
                target_arch = "powerpc64"
            )
        ),
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "netbsd",
        target_os = "dragonfly"
    ))
))]
const NO_FOLLOW_FLAGS: i32 = 0;

#[cfg(unix)]
fn read_only_no_follow() -> OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(NO_FOLLOW_FLAGS);
    options
}

/// `FILE_FLAG_OPEN_REPARSE_POINT`: a link is opened as itself, then fails `is_file`.
#[cfg(windows)]
fn read_only_no_follow() -> OpenOptions {
    use std::os::windows::fs::OpenOptionsExt;
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(0x0020_0000);
    options
}

#[cfg(not(any(unix, windows)))]
fn read_only_no_follow() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true);
    options
}

#[cfg(unix)]
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// No stable file identity in std here (length and time change as Claude Code appends);
/// the link check rests on opening the link itself and `is_file`.
#[cfg(not(unix))]
fn same_file(_: &fs::Metadata, _: &fs::Metadata) -> bool {
    true
}

#[cfg(test)]
mod tests;
