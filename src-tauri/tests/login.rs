//! `gatehouse login | token | logout` against a central Gatehouse with a real IdP, the
//! browser part done by headless Chromium.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use gatehouse_tests::{PASSWORD, SESSION_SECRET_A, browser_login, sign_in_gateway, sonnet};
use tokio::io::AsyncBufReadExt;
use tokio::process::Command;

fn gatehouse(data: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gatehouse"));
    c.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .arg("--data-dir")
        .arg(data)
        .kill_on_drop(true);
    c
}

#[tokio::test]
async fn terminal_sign_in_token_and_logout() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], "").await;
    let data = tempfile::tempdir().unwrap();
    let mut login = gatehouse(data.path())
        .args(["login", "--gateway", &s.origin, "--no-browser"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(login.stdout.take().unwrap()).lines();
    let mut link = None;
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await
    {
        if let Some(l) = line
            .trim()
            .strip_prefix(&format!("{}/device?user_code=", s.origin))
        {
            link = Some(format!("{}/device?user_code={l}", s.origin));
            break;
        }
    }
    let link = link.expect("login printed the verification link");
    let page = browser_login(&link, "alice", PASSWORD, None).await;
    assert_eq!(page["result"], "Signed in", "{page}");
    let mut rest = String::new();
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await
    {
        rest.push_str(&line);
        rest.push('\n');
    }
    let status = tokio::time::timeout(Duration::from_secs(30), login.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{rest}");
    assert!(rest.contains("Signed in as alice@corp.example"), "{rest}");

    let creds = data.path().join("credentials.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&creds).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let out = gatehouse(data.path()).arg("token").output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(token.starts_with("eyJ"));
    let infer = |t: String| {
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .bearer_auth(t)
            .json(&sonnet(false))
            .send()
    };
    assert_eq!(infer(token.clone()).await.unwrap().status(), 200);

    let out = gatehouse(data.path())
        .args(["logout", "--gateway", &s.origin])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        infer(token).await.unwrap().status(),
        401,
        "logout revoked the session"
    );
    let out = gatehouse(data.path()).arg("token").output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("gatehouse: "));
}
