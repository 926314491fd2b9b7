#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::deps::MapEnvironment;
use std::path::Path;

fn env(vars: &[(&str, &str)]) -> MapEnvironment {
    vars.iter()
        .fold(MapEnvironment::default(), |e, (k, v)| e.with_var(k, v))
}

#[test]
fn the_environment_picks_the_credential_in_default_azure_credential_order() {
    let all = [
        ("AZURE_TENANT_ID", "tenant-1"),
        ("AZURE_CLIENT_ID", "client-1"),
        ("AZURE_CLIENT_SECRET", "s3cret-never-shown"),
        ("AZURE_FEDERATED_TOKEN_FILE", "/var/run/token"),
    ];
    let s = Source::from_env(&env(&all)).unwrap();
    assert!(
        matches!(&s, Source::ClientSecret { tenant_id, client_id, .. } if tenant_id == "tenant-1" && client_id == "client-1")
    );
    assert!(!format!("{s:?}").contains("s3cret"));

    let s = Source::from_env(&env(&[all[0], all[1], all[3]])).unwrap();
    assert!(
        matches!(&s, Source::WorkloadIdentity { token_file, .. } if token_file == Path::new("/var/run/token"))
    );

    let s = Source::from_env(&env(&[("AZURE_CLIENT_ID", "uami")])).unwrap();
    assert!(matches!(&s, Source::ManagedIdentity { client_id: Some(c) } if c == "uami"));
    let s = Source::from_env(&MapEnvironment::default()).unwrap();
    assert!(matches!(s, Source::ManagedIdentity { client_id: None }));
}

#[test]
fn a_half_set_environment_is_refused_without_showing_the_secret() {
    let e = Source::from_env(&env(&[("AZURE_CLIENT_SECRET", "s3cret-never-shown")])).unwrap_err();
    assert!(e.contains("AZURE_TENANT_ID"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
    let e = Source::from_env(&env(&[
        ("AZURE_FEDERATED_TOKEN_FILE", "/t"),
        ("AZURE_TENANT_ID", "t"),
    ]))
    .unwrap_err();
    assert!(e.contains("AZURE_CLIENT_ID"), "{e}");
}

#[test]
fn every_credential_kind_builds_from_the_environment() {
    let secret = [
        ("AZURE_TENANT_ID", "tenant-1"),
        ("AZURE_CLIENT_ID", "client-1"),
        ("AZURE_CLIENT_SECRET", "s3cret-never-shown"),
    ];
    assert_eq!(
        Tokens::from_env(&env(&secret)).unwrap().kind(),
        "client secret"
    );
    // The crate reads the federated token file now (and again every ten minutes).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    let mut workload = vec![
        ("AZURE_TENANT_ID", "tenant-1"),
        ("AZURE_CLIENT_ID", "client-1"),
        ("AZURE_FEDERATED_TOKEN_FILE", file.to_str().unwrap()),
        ("AZURE_AUTHORITY_HOST", "https://login.example.test"),
    ];
    let e = Tokens::from_env(&env(&workload)).err().unwrap();
    assert!(e.contains("workload identity"), "{e}");
    std::fs::write(&file, "a.b.c").unwrap();
    assert_eq!(
        Tokens::from_env(&env(&workload)).unwrap().kind(),
        "workload identity"
    );
    workload.pop();
    assert!(Tokens::from_env(&env(&workload)).is_ok());
    assert_eq!(
        Tokens::from_env(&MapEnvironment::default()).unwrap().kind(),
        "managed identity"
    );
}

#[test]
fn bad_settings_stop_start_up_with_the_reason() {
    let base = [
        ("AZURE_TENANT_ID", "tenant-1"),
        ("AZURE_CLIENT_ID", "client-1"),
        ("AZURE_CLIENT_SECRET", "s3cret-never-shown"),
    ];
    let e = Tokens::from_env(&env(&base).with_var("AZURE_AUTHORITY_HOST", "http://login.test"))
        .err()
        .unwrap();
    assert!(e.contains("HTTPS"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
    let e = Tokens::from_env(&env(&[
        ("AZURE_TENANT_ID", "not a tenant!"),
        ("AZURE_CLIENT_ID", "c"),
        ("AZURE_CLIENT_SECRET", "s3cret-never-shown"),
    ]))
    .err()
    .unwrap();
    assert!(e.contains("client secret"), "{e}");
    assert!(!e.contains("s3cret"), "{e}");

    let e = Tokens::from_env(&env(&base).with_var("SSL_CERT_FILE", "/missing.pem"))
        .err()
        .unwrap();
    assert!(e.contains("SSL_CERT_FILE /missing.pem"), "{e}");
    let e = Tokens::from_env(
        &env(&base)
            .with_var("SSL_CERT_FILE", "/ca.pem")
            .with_file("/ca.pem", "not a certificate"),
    )
    .err()
    .unwrap();
    assert!(e.contains("holds no certificate"), "{e}");
}

#[tokio::test]
async fn renewing_replaces_the_credential_once_per_refused_token() {
    let tokens = Tokens::from_env(&MapEnvironment::default()).unwrap();
    let refused = Token {
        value: Secret::new("t"),
        generation: 0,
    };
    tokens.renew(&refused).unwrap();
    assert_eq!(tokens.snapshot().0, 1);
    // A second caller refused with the same (old) token does not renew again.
    tokens.renew(&refused).unwrap();
    assert_eq!(tokens.snapshot().0, 1);
}
