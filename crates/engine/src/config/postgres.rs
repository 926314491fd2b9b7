//! `store.postgres_url` and its companions turned into the driver's connection settings:
//! checked at validation (so `check-config` refuses what start would), used by the store to
//! connect. Refusals name the field and never repeat the URL or a password.

use tokio_postgres::Config as PgConfig;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::PostgresConfig;
use super::postgres_tls::TlsMode;

type PgError = tokio_postgres::Error;

/// Why a PostgreSQL configuration is refused, with the field it is about.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct PgConfigError {
    field: &'static str,
    message: String,
}

impl PgConfigError {
    pub fn field(&self) -> &'static str {
        self.field
    }

    fn at(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            field,
            message: message.into(),
        }
    }
}

/// What the store connects with: the driver configuration, its TLS connector (`None`:
/// plain TCP) and a printable target (`host:port/database`, no secrets).
pub struct PgConnect {
    pub config: PgConfig,
    pub tls: Option<MakeRustlsConnect>,
    pub target: String,
}

/// The driver configuration, TLS connector and target of `cfg` (reads the TLS files named
/// in the URL, so `check-config` refuses what start would).
pub fn connect_config(cfg: &PostgresConfig) -> Result<PgConnect, PgConfigError> {
    let url = "store.postgres_url";
    let (conn, tls) = super::postgres_tls::split(cfg.url.expose())
        .map_err(|m| PgConfigError::at(url, format!("not a valid PostgreSQL URL: {m}")))?;
    let mut pg: PgConfig = conn.parse().map_err(|e: PgError| {
        let detail = describe(&e);
        // Only option names are safe to repeat; other parser messages may quote the URL.
        if let Some(pos) = detail
            .find("unknown option `")
            .or_else(|| detail.find("invalid value for option `"))
        {
            PgConfigError::at(
                url,
                format!("not a valid PostgreSQL URL: {}", &detail[pos..]),
            )
        } else {
            PgConfigError::at(
                url,
                "not a valid PostgreSQL URL (postgres://user@host:port/database)",
            )
        }
    })?;
    let connector = super::postgres_tls::connector(&tls)
        .map_err(|m| PgConfigError::at(url, format!("TLS: {m}")))?;
    pg.ssl_mode(match tls.mode {
        TlsMode::Disable => SslMode::Disable,
        TlsMode::Prefer => SslMode::Prefer,
        TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
    });
    if pg.get_hosts().is_empty() {
        return Err(PgConfigError::at(url, "names no host"));
    }
    if let Some(user) = &cfg.username {
        pg.user(user);
    }
    if let Some(password) = &cfg.password {
        pg.password(password.expose());
    }
    if pg.get_user().is_none_or(str::is_empty) {
        return Err(PgConfigError::at(
            "store.username",
            "required: no user in store.postgres_url, and neither PGUSER nor USER is set",
        ));
    }
    pg.connect_timeout(cfg.connect_timeout);
    pg.application_name("gatehouse");
    let target = target(&pg);
    Ok(PgConnect {
        config: pg,
        tls: connector,
        target,
    })
}

fn target(pg: &PgConfig) -> String {
    let ports = pg.get_ports();
    let hosts: Vec<String> = pg
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = ports
                .get(i)
                .or_else(|| ports.first())
                .copied()
                .unwrap_or(5432);
            match h {
                tokio_postgres::config::Host::Tcp(name) => format!("{name}:{port}"),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    let db = pg.get_dbname().or(pg.get_user()).unwrap_or_default();
    format!("{}/{db}", hosts.join(","))
}

/// An error and its causes on one line. A server error gives its severity, code and
/// message, never its DETAIL (which can quote row values).
pub fn describe(e: &PgError) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} {}: {}", db.severity(), db.code().code(), db.message());
    }
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::secret::Secret;
    use std::time::Duration;

    fn cfg(url: &str) -> PostgresConfig {
        PostgresConfig {
            url: Secret::new(url),
            username: None,
            password: None,
            max_connections: 5,
            connect_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn target_names_host_port_and_database_only() {
        let c = connect_config(&cfg("postgres://gh:s3cret-pw@db.internal:6543/gatehouse")).unwrap();
        assert_eq!(c.target, "db.internal:6543/gatehouse");
        assert_eq!(c.config.get_password(), Some(&b"s3cret-pw"[..]));
        assert_eq!(c.config.get_ssl_mode(), SslMode::Prefer, "libpq's default");
        let c = connect_config(&cfg("postgres://gh@db/gh?sslmode=disable")).unwrap();
        assert!(c.tls.is_none());
        assert_eq!(c.config.get_ssl_mode(), SslMode::Disable);
        let c = connect_config(&cfg("host=a,b port=1,2 user=u sslmode=require")).unwrap();
        assert_eq!(c.target, "a:1,b:2/u");
        assert!(c.tls.is_some());
        assert_eq!(c.config.get_ssl_mode(), SslMode::Require);
    }

    #[test]
    fn username_and_password_override_the_url() {
        let mut c = cfg("postgres://url-user:url-pw@127.0.0.1/db");
        c.username = Some("other".into());
        c.password = Some(Secret::new("override-pw"));
        let pg = connect_config(&c).unwrap().config;
        assert_eq!(pg.get_user(), Some("other"));
        assert_eq!(pg.get_password(), Some(&b"override-pw"[..]));
    }

    #[test]
    fn refusals_name_the_field_and_never_the_password() {
        for (url, field, want) in [
            (
                "postgres://u:hunter2-pw@h/db?sslmode=always",
                "store.postgres_url",
                "invalid value for option `sslmode`",
            ),
            (
                "postgres://u:hunter2-pw@h/db?sslmode=verify-full",
                "store.postgres_url",
                "TLS: sslmode=verify-ca and verify-full need sslrootcert",
            ),
            (
                "postgres://u:hunter2-pw@h/db?frobnicate=1",
                "store.postgres_url",
                "unknown option `frobnicate`",
            ),
            (
                "postgres://u:hunter2-pw@h:notaport/db",
                "store.postgres_url",
                "not a valid PostgreSQL URL",
            ),
            ("postgres://h/db", "store.username", "required"),
            (
                "postgres:///db?user=u",
                "store.postgres_url",
                "names no host",
            ),
        ] {
            let e = connect_config(&cfg(url)).err().unwrap();
            assert_eq!(e.field(), field, "{url}");
            let msg = e.to_string();
            assert!(msg.contains(want), "{url}: {msg}");
            assert!(!msg.contains("hunter2"), "{msg}");
        }
    }
}
