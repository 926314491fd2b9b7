//! Tests of the transcript index: layout, hostile files, limits and the cache.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use tempfile::TempDir;

const S1: &str = "0b7e5b6c-1f0a-4a57-9d55-6f0c2f9b8a01";
const S2: &str = "3c1d2e4f-5a6b-4c7d-8e9f-a0b1c2d3e4f5";
const S3: &str = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a";

/// An absolute path on this platform, from a `/`-separated one.
fn abs(path: &str) -> String {
    if cfg!(windows) {
        format!("C:{}", path.replace('/', "\\"))
    } else {
        path.to_owned()
    }
}

fn user_line(session: &str, cwd: &str) -> String {
    let line = serde_json::json!({
        "parentUuid": null, "isSidechain": false, "userType": "external",
        "cwd": cwd, "sessionId": session, "version": "2.1.0", "gitBranch": "main",
        "type": "user", "message": {"role": "user", "content": "fix the build"},
        "uuid": "6e1f0c2a-0000-4000-8000-000000000001", "timestamp": "2026-01-01T00:00:00.000Z"
    });
    format!("{line}\n")
}

/// `value` as a JSON string.
fn json(value: &str) -> String {
    serde_json::to_string(value).unwrap()
}

fn summary_line() -> String {
    "{\"type\":\"summary\",\"summary\":\"Fix the build\",\"leafUuid\":\"6e1f0c2a\"}\n".to_owned()
}

fn snapshot_line() -> String {
    "{\"type\":\"file-history-snapshot\",\"messageId\":\"m1\",\"snapshot\":{\"trackedFileBackups\":{}},\"isSnapshotUpdate\":false}\n".to_owned()
}

/// A config dir in a temp dir, with helpers to lay transcripts out.
struct Config {
    root: TempDir,
}

impl Config {
    fn new() -> Config {
        let config = Config {
            root: tempfile::tempdir().unwrap(),
        };
        fs::create_dir_all(config.projects()).unwrap();
        config
    }

    fn dir(&self) -> &Path {
        self.root.path()
    }

    fn projects(&self) -> PathBuf {
        self.dir().join("projects")
    }

    /// Writes `projects/<rel>`, creating its parent dirs.
    fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.projects().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, content).unwrap();
        path
    }

    fn scan(&self) -> TranscriptIndex {
        scan(self.dir(), &Limits::default())
    }
}

fn path_of(index: &TranscriptIndex, session: &str) -> Option<String> {
    index.project_of(session).and_then(|p| p.path.clone())
}

/// No project in the index mentions `needle`.
fn never_mentions(index: &TranscriptIndex, needle: &str) {
    for project in index.sessions.values() {
        assert!(!project.name.contains(needle), "{project:?}");
        assert!(
            !project.path.as_deref().unwrap_or("").contains(needle),
            "{project:?}"
        );
    }
}

#[test]
fn encodes_like_claude_code() {
    assert_eq!(encode_cwd("/home/ana/src/shop"), "-home-ana-src-shop");
    assert_eq!(encode_cwd("/home/ana/my.app_v2"), "-home-ana-my-app-v2");
    assert_eq!(encode_cwd("C:\\Users\\ana"), "C--Users-ana");
    // One dash per UTF-16 unit, as JavaScript's replace() counts them.
    assert_eq!(encode_cwd("/é/😀"), "-----");
    assert!(encodes_to("/home/ana/src/shop", "-home-ana-src-shop"));
    assert!(!encodes_to("/home/ana/src/shop", "-home-ana-src"));
    let long = format!("/{}", "a".repeat(300));
    let cut = format!("-{}-1x2y3z", "a".repeat(MAX_ENCODED - 1));
    assert!(encodes_to(&long, &cut));
    assert!(!encodes_to(
        &long,
        &format!("-{}", "a".repeat(MAX_ENCODED - 1))
    ));
}

#[test]
fn normal_layout_maps_sessions_to_their_projects() {
    let config = Config::new();
    let shop = abs("/home/ana/src/shop");
    let blog = abs("/home/ana/blog");
    let shop_dir = encode_cwd(&shop);
    let blog_dir = encode_cwd(&blog);
    let first_lines = format!("{}{}", summary_line(), snapshot_line());
    config.write(
        &format!("{shop_dir}/{S1}.jsonl"),
        format!(
            "{first_lines}{}{}",
            user_line(S1, &shop),
            user_line(S1, &shop)
        ),
    );
    config.write(&format!("{shop_dir}/{S2}.jsonl"), user_line(S2, &shop));
    config.write(
        &format!("{blog_dir}/{S3}.jsonl"),
        format!("{first_lines}{}", user_line(S3, &blog)),
    );
    // Not transcripts: other extensions, and a dir without subagent transcripts.
    config.write(&format!("{shop_dir}/notes.txt"), user_line("notes", &shop));
    config.write(&format!("{shop_dir}/memory/MEMORY.md"), "# memory");

    let index = config.scan();
    assert_eq!(index.len(), 3);
    assert!(!index.is_empty());
    let shop_project = Project {
        path: Some(shop.clone()),
        name: "shop".to_owned(),
    };
    assert_eq!(index.project_of(S1), Some(&shop_project));
    assert_eq!(index.project_of(S2), Some(&shop_project));
    assert_eq!(path_of(&index, S3).as_deref(), Some(blog.as_str()));
    assert_eq!(index.project_of(S3).unwrap().name, "blog");
    assert_eq!(index.project_of("notes"), None);
    assert_eq!(index.project_of("memory"), None);
    assert_eq!(
        index.project_of("4d4d4d4d-0000-4000-8000-000000000000"),
        None
    );
}

#[test]
fn empty_or_missing_config_dir_gives_an_empty_index() {
    let root = tempfile::tempdir().unwrap();
    assert!(scan(&root.path().join("nope"), &Limits::default()).is_empty());
    assert!(scan(root.path(), &Limits::default()).is_empty());
    fs::write(root.path().join("projects"), "not a dir").unwrap();
    assert!(scan(root.path(), &Limits::default()).is_empty());
}

#[test]
fn subagent_transcripts_belong_to_their_session() {
    let config = Config::new();
    let cwd = abs("/work/api");
    let dir = encode_cwd(&cwd);
    // Only subagent transcripts for S1; its main transcript is gone.
    config.write(
        &format!("{dir}/{S1}/subagents/agent-a1b2c3.jsonl"),
        user_line(S1, &cwd),
    );
    // S2 has both; the subagent's cwd moved into a subdirectory.
    config.write(&format!("{dir}/{S2}.jsonl"), user_line(S2, &cwd));
    config.write(
        &format!("{dir}/{S2}/subagents/agent-d4e5f6.jsonl"),
        user_line(S2, &abs("/work/api/sub")),
    );
    // A subagent transcript without a cwd: the project comes from its siblings.
    config.write(
        &format!("{dir}/{S3}/subagents/agent-0a0b0c.jsonl"),
        summary_line(),
    );
    // Deeper than the layout: not walked.
    let deep = "5e5e5e5e-0000-4000-8000-000000000000";
    config.write(
        &format!("{dir}/{deep}/subagents/nested/agent-x.jsonl"),
        user_line(deep, &cwd),
    );
    config.write(
        &format!("{dir}/{deep}/other/agent-y.jsonl"),
        user_line(deep, &cwd),
    );

    let index = config.scan();
    assert_eq!(path_of(&index, S1).as_deref(), Some(cwd.as_str()));
    assert_eq!(path_of(&index, S2).as_deref(), Some(cwd.as_str()));
    assert_eq!(path_of(&index, S3).as_deref(), Some(cwd.as_str()));
    assert_eq!(index.project_of(deep), None);
    assert_eq!(index.project_of("agent-a1b2c3"), None);
}

#[test]
fn without_a_cwd_the_project_is_the_dir_name_or_a_siblings_cwd() {
    let config = Config::new();
    // Alone in its dir, no line has a cwd: the dir name.
    let lonely = "-home-ana-lonely";
    let lines = format!("{}{}", summary_line(), snapshot_line());
    config.write(&format!("{lonely}/{S1}.jsonl"), &lines);
    // Next to a transcript whose cwd encodes to the dir name: that cwd.
    let cwd = abs("/home/ana/app");
    let dir = encode_cwd(&cwd);
    config.write(&format!("{dir}/{S2}.jsonl"), &lines);
    config.write(&format!("{dir}/{S3}.jsonl"), user_line(S3, &cwd));
    // An empty transcript is still a session of its dir.
    let empty = "7a7a7a7a-0000-4000-8000-000000000000";
    config.write(&format!("{lonely}/{empty}.jsonl"), "");

    let index = config.scan();
    let fallback = Project {
        path: None,
        name: lonely.to_owned(),
    };
    assert_eq!(index.project_of(S1), Some(&fallback));
    assert_eq!(index.project_of(empty), Some(&fallback));
    assert_eq!(path_of(&index, S2).as_deref(), Some(cwd.as_str()));
    assert_eq!(path_of(&index, S3).as_deref(), Some(cwd.as_str()));
}

#[test]
fn a_cwd_that_left_the_project_maps_to_the_project() {
    let config = Config::new();
    let cwd = abs("/home/ana/app");
    let dir = encode_cwd(&cwd);
    let sub = abs("/home/ana/app/crates/core");
    config.write(&format!("{dir}/{S1}.jsonl"), user_line(S1, &sub));
    config.write(&format!("{dir}/{S2}.jsonl"), user_line(S2, &cwd));
    // A dir whose name is no encoding (CLAUDE_CODE_PROJECT_DIR_NAME): the cwd as is.
    config.write(&format!("custom-name/{S3}.jsonl"), user_line(S3, &sub));

    let index = config.scan();
    assert_eq!(path_of(&index, S1).as_deref(), Some(cwd.as_str()));
    assert_eq!(path_of(&index, S3).as_deref(), Some(sub.as_str()));
    assert_eq!(index.project_of(S3).unwrap().name, "core");
}

#[test]
fn session_ids_inside_files_map_too_but_file_names_win() {
    let config = Config::new();
    let app = abs("/home/ana/app");
    let web = abs("/home/ana/web");
    // S2's file continues S1: its first lines still name S1.
    config.write(
        &format!("{}/{S2}.jsonl", encode_cwd(&app)),
        format!("{}{}", user_line(S1, &app), user_line(S2, &app)),
    );
    // Named S3, but its lines say S2: S2 stays with its own file's project.
    config.write(
        &format!("{}/{S3}.jsonl", encode_cwd(&web)),
        user_line(S2, &web),
    );
    // A hostile id inside a file is ignored.
    config.write(
        &format!("{}/{S1}x.jsonl", encode_cwd(&web)),
        format!(
            "{}{}",
            user_line("../../etc", &web),
            user_line(&"a".repeat(129), &web)
        ),
    );

    let index = config.scan();
    assert_eq!(path_of(&index, S1).as_deref(), Some(app.as_str()));
    assert_eq!(path_of(&index, S2).as_deref(), Some(app.as_str()));
    assert_eq!(path_of(&index, S3).as_deref(), Some(web.as_str()));
    assert_eq!(index.project_of("../../etc"), None);
    assert_eq!(index.project_of(&"a".repeat(129)), None);
    assert_eq!(index.len(), 4);
}

#[cfg(unix)]
#[test]
fn symbolic_links_are_never_followed() {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().unwrap();
    let secret = abs("/secret/outside-project");
    let secret_dir = outside.path().join(encode_cwd(&secret));
    fs::create_dir_all(secret_dir.join(S3).join("subagents")).unwrap();
    let secret_file = secret_dir.join(format!("{S1}.jsonl"));
    fs::write(&secret_file, user_line(S1, &secret)).unwrap();
    fs::write(
        secret_dir.join(S3).join("subagents").join("agent-a.jsonl"),
        user_line(S3, &secret),
    )
    .unwrap();

    let config = Config::new();
    let cwd = abs("/home/ana/app");
    let dir = encode_cwd(&cwd);
    config.write(&format!("{dir}/{S2}.jsonl"), user_line(S2, &cwd));
    let projects = config.projects();
    // A linked project dir, a linked transcript, a linked session dir, a linked
    // subagents dir and a linked subagent transcript.
    symlink(&secret_dir, projects.join(encode_cwd(&secret))).unwrap();
    symlink(
        &secret_file,
        projects.join(&dir).join(format!("{S1}.jsonl")),
    )
    .unwrap();
    symlink(secret_dir.join(S3), projects.join(&dir).join(S3)).unwrap();
    let s4 = "4f4f4f4f-0000-4000-8000-000000000000";
    fs::create_dir_all(projects.join(&dir).join(s4)).unwrap();
    symlink(
        secret_dir.join(S3).join("subagents"),
        projects.join(&dir).join(s4).join("subagents"),
    )
    .unwrap();
    let s5 = "5f5f5f5f-0000-4000-8000-000000000000";
    fs::create_dir_all(projects.join(&dir).join(s5).join("subagents")).unwrap();
    symlink(
        secret_dir.join(S3).join("subagents").join("agent-a.jsonl"),
        projects
            .join(&dir)
            .join(s5)
            .join("subagents")
            .join("agent-a.jsonl"),
    )
    .unwrap();
    // A dangling link and a link loop are skipped too.
    symlink(outside.path().join("gone"), projects.join("dangling")).unwrap();
    symlink(projects.join("loop"), projects.join("loop")).unwrap();

    let index = config.scan();
    never_mentions(&index, "secret");
    assert_eq!(index.project_of(S1), None);
    assert_eq!(index.project_of(S3), None);
    assert_eq!(index.project_of(s4), None);
    assert_eq!(index.project_of(s5), None);
    assert_eq!(path_of(&index, S2).as_deref(), Some(cwd.as_str()));
    assert_eq!(index.len(), 1);

    // A linked `projects` dir is not read at all.
    let linked = tempfile::tempdir().unwrap();
    symlink(outside.path(), linked.path().join("projects")).unwrap();
    assert!(scan(linked.path(), &Limits::default()).is_empty());
}

#[cfg(unix)]
#[test]
fn files_are_opened_without_following_links() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target.jsonl");
    fs::write(&target, user_line(S1, &abs("/secret"))).unwrap();
    let link = dir.path().join("link.jsonl");
    symlink(&target, &link).unwrap();
    assert!(open_regular(&target).is_some());
    assert!(open_regular(&link).is_none());
    assert!(open_regular(dir.path()).is_none());
    if NO_FOLLOW_FLAGS != 0 {
        // The open itself refuses the link, whatever a check before it said.
        assert!(read_only_no_follow().open(&link).is_err());
        assert!(read_only_no_follow().open(&target).is_ok());
    }
}

#[test]
fn huge_files_are_read_only_up_to_the_limit() {
    let config = Config::new();
    let cwd = abs("/home/ana/big");
    let limits = Limits::default();
    // 5 MiB of lines without a cwd, then the cwd: past the limit, so the dir name.
    let mut filler = String::new();
    while filler.len() < 5 * 1024 * 1024 {
        filler.push_str(&snapshot_line());
    }
    config.write(
        &format!("-big-a/{S1}.jsonl"),
        format!("{filler}{}", user_line(S1, &cwd)),
    );
    // One 5 MiB line with no newline at all.
    let giant = format!(
        "{{\"cwd\":{},\"pad\":\"{}\"}}",
        json(&cwd),
        "x".repeat(5 * 1024 * 1024)
    );
    config.write(&format!("-big-b/{S2}.jsonl"), &giant);
    // A line longer than max_line but within the byte limit is skipped, the next read.
    let long = format!(
        "{{\"cwd\":{},\"pad\":\"{}\"}}\n",
        json(&abs("/wrong")),
        "y".repeat(limits.max_line)
    );
    config.write(
        &format!("-big-c/{S3}.jsonl"),
        format!("{long}{}", user_line(S3, &cwd)),
    );

    let index = scan(config.dir(), &limits);
    assert_eq!(
        index.project_of(S1),
        Some(&Project {
            path: None,
            name: "-big-a".to_owned()
        })
    );
    assert_eq!(
        index.project_of(S2),
        Some(&Project {
            path: None,
            name: "-big-b".to_owned()
        })
    );
    assert_eq!(path_of(&index, S3).as_deref(), Some(cwd.as_str()));
}

#[test]
fn a_line_cut_by_the_byte_limit_is_not_parsed() {
    let config = Config::new();
    let cwd = abs("/home/ana/cut");
    // The first 100 bytes are valid JSON with a cwd, but the line goes on.
    let mut line = format!("{{\"cwd\":{}}}", json(&cwd));
    line.push_str(&" ".repeat(100));
    line.push_str("\"more\"}\n");
    config.write(&format!("-cut/{S1}.jsonl"), &line);
    // The same, ending within the limit without a newline: a whole last line.
    config.write(
        &format!("-whole/{S2}.jsonl"),
        format!("{{\"cwd\":{}}}", json(&cwd)),
    );
    let limits = Limits {
        max_bytes_per_file: 100,
        max_line: 1_000,
        ..Limits::default()
    };
    let index = scan(config.dir(), &limits);
    assert_eq!(path_of(&index, S1), None);
    assert_eq!(path_of(&index, S2), Some(cwd));
}

#[test]
fn read_line_never_holds_more_than_the_limit() {
    let input = b"short\nthis line is far too long\n\nlast".to_vec();
    let mut reader = io::Cursor::new(input);
    let mut buf = Vec::new();
    let mut seen = Vec::new();
    loop {
        let result = read_line(&mut reader, 8, &mut buf).unwrap();
        assert!(buf.len() <= 8);
        seen.push((result, String::from_utf8(buf.clone()).unwrap()));
        if seen.last().is_some_and(|(r, _)| *r == ReadLine::End) {
            break;
        }
    }
    let expected = [
        (ReadLine::Complete, "short"),
        (ReadLine::TooLong, ""),
        (ReadLine::Complete, ""),
        (ReadLine::Unterminated, "last"),
        (ReadLine::End, ""),
    ];
    let seen: Vec<(ReadLine, &str)> = seen.iter().map(|(r, s)| (*r, s.as_str())).collect();
    assert_eq!(seen, expected);
}

#[test]
fn bytes_that_are_not_utf8_are_skipped() {
    let config = Config::new();
    let cwd = abs("/home/ana/app");
    let dir = encode_cwd(&cwd);
    let mut content = Vec::new();
    content.extend_from_slice(b"{\"cwd\":\"/home/ana/\xff\xfe\",\"sessionId\":\"x\"}\n");
    content.extend_from_slice(b"\xc3\x28 not json at all \x00\x01\n");
    content
        .extend_from_slice(b"{\"cwd\": 42}\n{\"cwd\": \"\\u0000\"}\n[1,2,3]\n\"str\"\nnull\n{\n");
    content.extend_from_slice(user_line(S1, &cwd).as_bytes());
    config.write(&format!("{dir}/{S1}.jsonl"), &content);

    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let projects = config.projects();
        // A non-UTF-8 file name and a non-UTF-8 project dir (not every file system
        // allows them; skip those parts where creating them fails).
        let bad_file = projects
            .join(&dir)
            .join(OsStr::from_bytes(b"\xff\xfe.jsonl"));
        let _ = fs::write(bad_file, user_line(S2, &abs("/secret/badname")));
        let bad_dir = projects.join(OsStr::from_bytes(b"-bad-\xff"));
        if fs::create_dir(&bad_dir).is_ok() {
            fs::write(
                bad_dir.join(format!("{S3}.jsonl")),
                user_line(S3, &abs("/secret/baddir")),
            )
            .unwrap();
        }
    }

    let index = config.scan();
    assert_eq!(path_of(&index, S1).as_deref(), Some(cwd.as_str()));
    // The whole non-UTF-8 line is skipped, its sessionId with it.
    assert_eq!(index.project_of("x"), None);
    assert_eq!(index.project_of(S2), None);
    assert_eq!(index.project_of(S3), None);
    never_mentions(&index, "secret");
}

#[test]
fn hostile_session_ids_in_file_names_are_skipped() {
    let config = Config::new();
    let cwd = abs("/home/ana/app");
    let dir = encode_cwd(&cwd);
    let long = "a".repeat(MAX_SESSION_ID + 1);
    let longest = "b".repeat(MAX_SESSION_ID);
    let names = [
        "..x".to_owned(),
        "..".to_owned(),
        "a b".to_owned(),
        "%2e%2e%2fx".to_owned(),
        "semi;colon".to_owned(),
        "tab\tname".to_owned(),
        "dé".to_owned(),
        long.clone(),
        String::new(),
    ];
    fs::create_dir_all(config.projects().join(&dir)).unwrap();
    let mut written = 0;
    for name in &names {
        // The line names a hostile id too; neither may appear. (Not every file system
        // allows every one of these names.)
        let path = config.projects().join(&dir).join(format!("{name}.jsonl"));
        written += usize::from(fs::write(path, user_line(name, &cwd)).is_ok());
    }
    if cfg!(target_os = "linux") {
        assert_eq!(written, names.len());
    }
    config.write(&format!("{dir}/{longest}.jsonl"), user_line(&longest, &cwd));
    config.write(&format!("{dir}/{S1}.JSONL"), user_line(S1, &cwd));
    config.write(&format!("{dir}/{S1}.jsonl.bak"), user_line(S1, &cwd));
    // A hostile session dir with subagent transcripts.
    config.write(
        &format!("{dir}/a b/subagents/agent-1.jsonl"),
        user_line(S2, &cwd),
    );

    let index = config.scan();
    assert_eq!(
        index.len(),
        1,
        "{:?}",
        index.sessions.keys().collect::<Vec<_>>()
    );
    assert_eq!(path_of(&index, &longest).as_deref(), Some(cwd.as_str()));
    for name in &names {
        assert_eq!(index.project_of(name), None);
    }
    assert_eq!(index.project_of("../x"), None);
    assert!(!valid_session_id("../x"));
    assert!(!valid_session_id(&long));
    assert!(valid_session_id(&longest));
    assert!(valid_session_id("a_B-9"));
}

#[test]
fn hostile_cwd_values_are_ignored() {
    let config = Config::new();
    let bad = [
        "relative/path".to_owned(),
        String::new(),
        abs("/with\u{0}nul"),
        abs("/with\nnewline"),
        abs("/with\u{1b}[31mescape"),
        abs("/with\u{85}c1"),
        abs(&format!("/{}", "x".repeat(MAX_CWD))),
    ];
    for (i, cwd) in bad.iter().enumerate() {
        let id = format!("bad-{i}");
        config.write(&format!("-dir-{i}/{id}.jsonl"), user_line(&id, cwd));
    }
    let index = config.scan();
    for i in 0..bad.len() {
        let project = index.project_of(&format!("bad-{i}")).unwrap();
        assert_eq!(
            project,
            &Project {
                path: None,
                name: format!("-dir-{i}")
            }
        );
    }
    assert!(valid_cwd(&abs(&format!("/{}", "x".repeat(MAX_CWD - 3)))));
    if cfg!(unix) {
        assert_eq!(Project::from_cwd("/").name, "/");
        assert_eq!(Project::from_cwd("/a/b/").name, "b");
    }
}

#[test]
fn limits_bound_the_scan() {
    let config = Config::new();
    for (i, id) in [S1, S2, S3].iter().enumerate() {
        let cwd = abs(&format!("/p{i}"));
        config.write(
            &format!("{}/{id}.jsonl", encode_cwd(&cwd)),
            user_line(id, &cwd),
        );
        config.write(
            &format!("{}/extra-{i}.jsonl", encode_cwd(&cwd)),
            user_line(id, &cwd),
        );
    }
    let full = config.scan();
    assert_eq!(full.len(), 6);
    let dirs = scan(
        config.dir(),
        &Limits {
            max_dirs: 1,
            ..Limits::default()
        },
    );
    assert_eq!(dirs.len(), 2);
    let files = scan(
        config.dir(),
        &Limits {
            max_files: 1,
            ..Limits::default()
        },
    );
    assert_eq!(files.len(), 2, "one file: its name and the id inside");
    let entries = scan(
        config.dir(),
        &Limits {
            max_entries: 2,
            ..Limits::default()
        },
    );
    assert!(entries.len() <= 1);
    let nothing = scan(
        config.dir(),
        &Limits {
            max_bytes_per_file: 0,
            ..Limits::default()
        },
    );
    assert_eq!(nothing.len(), 6);
    assert!(nothing.sessions.values().all(|p| p.path.is_none()));
}

#[test]
fn arbitrary_bytes_never_panic() {
    let config = Config::new();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..40 {
        let mut bytes = Vec::new();
        for _ in 0..(i * 97) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let b = (state & 0xff) as u8;
            // Mix in JSON-ish bytes so some lines get far into the parser.
            bytes.push(match b % 7 {
                0 => b'\n',
                1 => b'{',
                2 => b'"',
                _ => b,
            });
        }
        config.write(&format!("-fuzz/f{i}.jsonl"), &bytes);
    }
    let limits = Limits {
        max_line: 50,
        max_bytes_per_file: 1000,
        ..Limits::default()
    };
    let index = scan(config.dir(), &limits);
    assert_eq!(
        index.project_of("f3").map(|p| p.name.as_str()),
        Some("-fuzz")
    );
}

#[test]
fn config_dir_prefers_the_variable_then_home() {
    let home = PathBuf::from(abs("/home/ana"));
    let custom = abs("/opt/claude");
    assert_eq!(
        config_dir(Some(OsStr::new(&custom)), Some(&home)),
        Some(PathBuf::from(&custom))
    );
    assert_eq!(
        config_dir(Some(OsStr::new(&custom)), None),
        Some(PathBuf::from(&custom))
    );
    assert_eq!(config_dir(None, Some(&home)), Some(home.join(".claude")));
    assert_eq!(
        config_dir(Some(OsStr::new("")), Some(&home)),
        Some(home.join(".claude"))
    );
    assert_eq!(
        config_dir(Some(OsStr::new("relative/dir")), Some(&home)),
        None
    );
    assert_eq!(config_dir(None, None), None);
    assert_eq!(config_dir(None, Some(Path::new(""))), None);
}

#[test]
fn cache_rescans_only_when_stale() {
    let config = Config::new();
    let cwd = abs("/home/ana/app");
    let dir = encode_cwd(&cwd);
    config.write(&format!("{dir}/{S1}.jsonl"), user_line(S1, &cwd));
    let cache = Cached::new(
        Limits::default(),
        Duration::from_secs(30),
        Duration::from_secs(5),
    );
    let t0 = Instant::now();

    let first = cache.get(config.dir(), t0);
    assert_eq!(first.len(), 1);
    config.write(&format!("{dir}/{S2}.jsonl"), user_line(S2, &cwd));

    // Within the interval: the same scan, S2 unknown (and a miss too soon to retry).
    let again = cache.get(config.dir(), t0 + Duration::from_secs(29));
    assert!(Arc::ptr_eq(&first, &again));
    assert_eq!(
        cache.project_of(config.dir(), S2, t0 + Duration::from_secs(4)),
        None
    );
    assert!(Arc::ptr_eq(
        &first,
        &cache.get(config.dir(), t0 + Duration::from_secs(4))
    ));
    // A clock that goes backwards does not rescan.
    assert!(Arc::ptr_eq(&first, &cache.get(config.dir(), t0)));

    // A miss after `miss_retry` rescans and finds the new session.
    let found = cache.project_of(config.dir(), S2, t0 + Duration::from_secs(5));
    assert_eq!(found.and_then(|p| p.path), Some(cwd.clone()));
    let second = cache.get(config.dir(), t0 + Duration::from_secs(6));
    assert!(!Arc::ptr_eq(&first, &second));
    assert_eq!(second.len(), 2);

    // A hit never rescans early; an invalid id never scans.
    config.write(&format!("{dir}/{S3}.jsonl"), user_line(S3, &cwd));
    assert!(
        cache
            .project_of(config.dir(), S1, t0 + Duration::from_secs(20))
            .is_some()
    );
    assert_eq!(
        cache.project_of(config.dir(), "../x", t0 + Duration::from_secs(20)),
        None
    );
    assert!(Arc::ptr_eq(
        &second,
        &cache.get(config.dir(), t0 + Duration::from_secs(20))
    ));

    // After max_age: rescanned.
    let third = cache.get(config.dir(), t0 + Duration::from_secs(35));
    assert!(!Arc::ptr_eq(&second, &third));
    assert_eq!(third.len(), 3);

    // Another config dir: rescanned at once.
    let other = Config::new();
    assert!(
        cache
            .get(other.dir(), t0 + Duration::from_secs(35))
            .is_empty()
    );
}

#[test]
fn writes_nothing() {
    let config = Config::new();
    let cwd = abs("/home/ana/app");
    let file = config.write(
        &format!("{}/{S1}.jsonl", encode_cwd(&cwd)),
        user_line(S1, &cwd),
    );
    let before = fs::metadata(&file).unwrap();
    let listing = |dir: &Path| {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let top = listing(config.dir());
    let _ = config.scan();
    assert_eq!(listing(config.dir()), top);
    let after = fs::metadata(&file).unwrap();
    assert_eq!(before.len(), after.len());
    assert_eq!(before.modified().unwrap(), after.modified().unwrap());
}
