//! The `gatehouse-statusline` binary as Claude Code runs it: a new process with the status
//! JSON on stdin, one line out, exit 0, fast — with no tray (no `statusline.json`), with a
//! tray that is gone (a stale file naming a closed port), and with hostile input. (This
//! test also makes a workspace test run build the binary, which the status line tests of
//! the desktop app configure Claude Code with.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[&str], input: &[u8]) -> (String, Duration) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gatehouse-statusline"))
        .args(args)
        .env_clear()
        .env("HOME", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Claude Code may close the pipe early; a write error is not the command's failure.
    let _ = child.stdin.take().unwrap().write_all(input);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    (String::from_utf8(out.stdout).unwrap(), started.elapsed())
}

#[test]
fn no_tray_a_gone_tray_and_hostile_input_print_the_fallback_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let status = br#"{"session_id":"4f0c2d9e-1b2a","model":{"id":"claude-sonnet-4-5"}}"#;
    let (line, _) = run(&["--data-dir", data], status);
    assert_eq!(line, "Gatehouse: not running\n");
    let (line, _) = run(&[], status);
    assert_eq!(line, "Gatehouse: not running\n", "no home: no data dir");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    std::fs::write(
        dir.path().join(gatehouse_statusline::FILE),
        format!(r#"{{"url":"http://127.0.0.1:{port}","token":"gst_stale"}}"#),
    )
    .unwrap();
    let huge = format!(r#"{{"session_id":"{}"}}"#, "\u{202e}<x>".repeat(100_000));
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_object = format!(
        r#"{{"session_id":{}"x"{}}}"#,
        r#"{"a":"#.repeat(10_000),
        "}".repeat(10_000)
    );
    let hostile: [&[u8]; 9] = [
        &status[..],
        huge.as_bytes(),
        b"\xff\xfe not json",
        deep.as_bytes(),
        deep_object.as_bytes(),
        br#"{"session_id":12345678901234567890123,"model":[]}"#,
        br#"{"session_id":{"$ne":null}}"#,
        br#"{"session_id":"../../etc/passwd"}"#,
        b"null",
    ];
    for input in hostile {
        let (line, took) = run(&["--data-dir", data], input);
        assert_eq!(line, "Gatehouse: not running\n");
        assert!(took < Duration::from_secs(2), "took {took:?}");
    }

    // A tray that accepts and never answers, and one that answers with junk: the deadline
    // holds and the fallback is printed.
    let hanging = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hanging.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for _ in 0..2 {
            if let Ok((sock, _)) = hanging.accept() {
                open.push(sock);
            }
        }
        std::thread::sleep(Duration::from_secs(3));
    });
    std::fs::write(
        dir.path().join(gatehouse_statusline::FILE),
        format!(r#"{{"url":"http://127.0.0.1:{port}","token":"gst_hang"}}"#),
    )
    .unwrap();
    for input in [&status[..], deep.as_bytes()] {
        let (line, took) = run(&["--data-dir", data], input);
        assert_eq!(line, "Gatehouse: not running\n");
        assert!(took < Duration::from_secs(2), "took {took:?}");
    }
    let _ = held.join();
    let junk = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = junk.local_addr().unwrap().port();
    let served = std::thread::spawn(move || {
        use std::io::Read;
        if let Ok((mut sock, _)) = junk.accept() {
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf);
            let mut answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n".to_vec();
            answer.extend(std::iter::repeat_n(b'[', 1 << 20));
            let _ = sock.write_all(&answer);
        }
    });
    std::fs::write(
        dir.path().join(gatehouse_statusline::FILE),
        format!(r#"{{"url":"http://127.0.0.1:{port}","token":"gst_junk"}}"#),
    )
    .unwrap();
    let (line, took) = run(&["--data-dir", data], status);
    assert_eq!(line, "Gatehouse: not running\n");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    let _ = served.join();
}
