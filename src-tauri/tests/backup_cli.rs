//! `gatehouse backup` and `gatehouse restore` as an operator runs them: the embedded
//! default's database (the one the tray uses) found from `--data-dir`, a round trip with
//! the previous file kept as `.bak`, and a PostgreSQL configuration pointed to `pg_dump`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

fn gatehouse(data: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn backup_and_restore_round_trip_the_default_database() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let backup = dir.path().join("gatehouse-backup.db");
    let backup_arg = backup.to_str().unwrap();

    let out = gatehouse(&data, &["backup", backup_arg]);
    assert_eq!(out.status.code(), Some(1), "nothing to back up yet");
    assert!(
        text(&out.stderr).contains("no database here"),
        "{}",
        text(&out.stderr)
    );

    // The first start creates the database (and its local key).
    let out = gatehouse(&data, &["reset-local-key"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = gatehouse(&data, &["backup", backup_arg]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("backed up") && said.contains("schema version"),
        "{said}"
    );
    assert!(!said.contains("sk-"), "no key is printed: {said}");

    let out = gatehouse(&data, &["backup", backup_arg]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("already exists"),
        "{}",
        text(&out.stderr)
    );

    let out = gatehouse(&data, &["restore", backup_arg]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("gatehouse.db.bak"),
        "{}",
        text(&out.stdout)
    );
    assert!(data.join("gatehouse.db.bak").is_file());

    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, "not a database").unwrap();
    let out = gatehouse(&data, &["restore", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is not a Gatehouse database"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_postgres_store_is_pointed_to_pg_dump() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.yaml");
    std::fs::write(
        &file,
        "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: k}}]\n\
         store: {postgres_url: 'postgres://gh:pw-not-shown@db/gh'}\n",
    )
    .unwrap();
    for cmd in ["backup", "restore"] {
        let out = gatehouse(
            dir.path(),
            &[cmd, "/tmp/x.db", "--config", file.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(1));
        let err = text(&out.stderr);
        assert!(err.contains("pg_dump"), "{err}");
        assert!(!err.contains("pw-not-shown"), "{err}");
    }
}
