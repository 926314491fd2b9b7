//! TLS to PostgreSQL with libpq's spelling: `sslmode`, `sslrootcert`, `sslcert` and `sslkey`
//! in `store.postgres_url` (URL query or `key=value` form). The driver knows only part of
//! these, so [`split`] takes them out of the connection string before it is parsed, and
//! [`connector`] turns them into a rustls connector on the crate's one crypto provider
//! (ring). Modes, as in libpq:
//! - `disable`: plain TCP;
//! - `allow`, `prefer` or none (libpq's default): TLS when the server offers it, the
//!   certificate not checked, else plain TCP;
//! - `require`: encrypted, the server certificate not checked; with `sslrootcert` it acts
//!   as `verify-ca` (libpq does the same);
//! - `verify-ca`: the certificate chains to `sslrootcert`, any host name;
//! - `verify-full`: chains to `sslrootcert` and names the host connected to.
//!
//! `sslrootcert=system` trusts the public web roots. `sslcert` and `sslkey` (PEM files)
//! give a client certificate for servers that ask for one (`hostssl ... cert`).

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// What `sslmode` asks for, reduced to what the gateway does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// `disable`: plain TCP.
    Disable,
    /// `allow`, `prefer` or no `sslmode`: TLS if the server offers it, unverified.
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// The libpq TLS parameters of a connection string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsParams {
    pub mode: TlsMode,
    pub root_cert: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
}

const NAMES: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// The connection string without the libpq TLS parameters, and those parameters. Errors
/// name the parameter, never the string (it may carry a password).
pub fn split(conn: &str) -> Result<(String, TlsParams), String> {
    let (rest, found) = if conn.starts_with("postgres://") || conn.starts_with("postgresql://") {
        split_url(conn)?
    } else {
        split_key_values(conn)?
    };
    let mut params = TlsParams {
        mode: TlsMode::Prefer,
        root_cert: None,
        cert: None,
        key: None,
    };
    for (name, value) in found {
        match name {
            "sslmode" => {
                params.mode = match value.as_str() {
                    "disable" => TlsMode::Disable,
                    "allow" | "prefer" => TlsMode::Prefer,
                    "require" => TlsMode::Require,
                    "verify-ca" => TlsMode::VerifyCa,
                    "verify-full" => TlsMode::VerifyFull,
                    _ => {
                        return Err(
                            "invalid value for option `sslmode` (disable, allow, prefer, \
                                    require, verify-ca or verify-full)"
                                .into(),
                        );
                    }
                }
            }
            "sslrootcert" => params.root_cert = Some(value),
            "sslcert" => params.cert = Some(value),
            _ => params.key = Some(value),
        }
    }
    if params.mode == TlsMode::Require && params.root_cert.is_some() {
        params.mode = TlsMode::VerifyCa;
    }
    Ok((rest, params))
}

type Found = Vec<(&'static str, String)>;

fn known(name: &str) -> Option<&'static str> {
    NAMES.iter().copied().find(|n| *n == name)
}

fn split_url(url: &str) -> Result<(String, Found), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), Vec::new()));
    };
    let mut kept = Vec::new();
    let mut found = Vec::new();
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match known(name) {
            Some(name) => found.push((name, percent_decode(value)?)),
            None => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, found))
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("a TLS parameter has a malformed %-escape")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "a TLS parameter is not UTF-8".into())
}

/// `key = value` pairs separated by whitespace; a value may be single-quoted with `\`
/// escapes. Pairs other than the TLS ones are kept as written.
fn split_key_values(s: &str) -> Result<(String, Found), String> {
    let mut kept = String::new();
    let mut found = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        let eq = rest.find('=').ok_or("a key=value pair has no `=`")?;
        let name = rest[..eq].trim();
        let after = rest[eq + 1..].trim_start();
        let (value, len) = if let Some(quoted) = after.strip_prefix('\'') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next().map(|(_, c)| c)),
                    '\'' => {
                        end = Some(i + 2);
                        break;
                    }
                    c => value.push(c),
                }
            }
            (value, end.ok_or("a quoted value is not closed")?)
        } else {
            let len = after.find(char::is_whitespace).unwrap_or(after.len());
            (after[..len].to_owned(), len)
        };
        let consumed = rest.len() - after.len() + len;
        match known(name) {
            Some(name) => found.push((name, value)),
            None => {
                kept.push_str(&rest[..consumed]);
                kept.push(' ');
            }
        }
        rest = rest[consumed..].trim_start();
    }
    Ok((kept.trim_end().to_owned(), found))
}

/// The connector for these parameters (`None`: plain TCP). Reads the certificate files, so
/// a missing or unreadable one is refused at configuration time.
pub fn connector(params: &TlsParams) -> Result<Option<MakeRustlsConnect>, String> {
    let files = params.cert.is_some() || params.key.is_some() || params.root_cert.is_some();
    if matches!(params.mode, TlsMode::Disable | TlsMode::Prefer) && files {
        return Err(
            "sslrootcert, sslcert and sslkey need sslmode=require, verify-ca or verify-full".into(),
        );
    }
    if params.mode == TlsMode::Disable {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match (&params.root_cert, params.mode) {
        (None, TlsMode::Require | TlsMode::Prefer) => Arc::new(Unverified(provider.clone())),
        (None, _) => {
            return Err(
                "sslmode=verify-ca and verify-full need sslrootcert (a CA file, or `system`)"
                    .into(),
            );
        }
        (Some(root), mode) => {
            let roots = Arc::new(root_store(root)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| format!("sslrootcert: {e}"))?;
            if mode == TlsMode::VerifyFull {
                webpki
            } else {
                Arc::new(AnyHostName(webpki))
            }
        }
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match (&params.cert, &params.key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(cert), Some(key)) => {
            let certs = certificates(cert, "sslcert")?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("sslkey: no usable PEM private key in {key}: {e}"))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("sslcert/sslkey: {e}"))?
        }
        _ => return Err("sslcert and sslkey go together".into()),
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}

fn root_store(root: &str) -> Result<RootCertStore, String> {
    if root == "system" {
        return Ok(RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        });
    }
    let mut store = RootCertStore::empty();
    for cert in certificates(root, "sslrootcert")? {
        store
            .add(cert)
            .map_err(|e| format!("sslrootcert: {root}: {e}"))?;
    }
    Ok(store)
}

fn certificates(path: &str, field: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| format!("{field}: cannot read PEM certificates from {path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{field}: no certificate in {path}"));
    }
    Ok(certs)
}

/// `verify-ca`: the chain must be good, the host name may be anything.
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The name is checked after the chain, so a name error means the chain was good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `require` without a CA: encrypted, the certificate taken as it comes (libpq's meaning),
/// the handshake signatures still checked.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn url_parameters_are_taken_out_and_the_rest_kept() {
        let (rest, p) = split(
            "postgres://u:pw@h:5/db?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://u:pw@h:5/db?application_name=x&connect_timeout=3"
        );
        assert_eq!(p.mode, TlsMode::VerifyFull);
        assert_eq!(p.root_cert.as_deref(), Some("/etc/ca.pem"));
        let (rest, p) = split("postgresql://u@h/db?sslmode=require").unwrap();
        assert_eq!(
            (rest.as_str(), p.mode),
            ("postgresql://u@h/db", TlsMode::Require)
        );
        let (_, p) = split("postgres://u@h/db?sslmode=require&sslrootcert=/ca.pem").unwrap();
        assert_eq!(p.mode, TlsMode::VerifyCa, "require with a CA is verify-ca");
        let (_, p) = split("postgres://u@h/db?sslmode=prefer").unwrap();
        assert_eq!(p.mode, TlsMode::Prefer);
        let (_, p) = split("postgres://u@h/db").unwrap();
        assert_eq!(p.mode, TlsMode::Prefer, "libpq's default");
        let (_, p) = split("postgres://u@h/db?sslmode=disable").unwrap();
        assert_eq!(p.mode, TlsMode::Disable);
    }

    #[test]
    fn key_value_parameters_are_taken_out_and_the_rest_kept() {
        let (rest, p) = split(
            "host=db user=u password='a b\\'c' sslmode = verify-ca sslcert='/a b/c.pem' sslkey=/k.pem dbname=g",
        )
        .unwrap();
        assert_eq!(rest, "host=db user=u password='a b\\'c' dbname=g");
        assert_eq!(p.mode, TlsMode::VerifyCa);
        assert_eq!(p.cert.as_deref(), Some("/a b/c.pem"));
        assert_eq!(p.key.as_deref(), Some("/k.pem"));
    }

    #[test]
    fn bad_combinations_are_refused() {
        for (conn, want) in [
            (
                "postgres://u@h/db?sslmode=sometimes",
                "invalid value for option `sslmode`",
            ),
            ("postgres://u@h/db?sslmode=verify-full", "need sslrootcert"),
            ("postgres://u@h/db?sslrootcert=/ca.pem", "need sslmode"),
            (
                "postgres://u@h/db?sslmode=require&sslcert=/c.pem",
                "go together",
            ),
            (
                "postgres://u@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
                "sslrootcert: cannot read PEM certificates from /nonexistent/ca.pem",
            ),
        ] {
            let e = split(conn).and_then(|(_, p)| connector(&p).map(|_| ()));
            let msg = e.unwrap_err();
            assert!(msg.contains(want), "{conn}: {msg}");
        }
        assert!(
            connector(&split("postgres://u@h/db?sslmode=require").unwrap().1)
                .unwrap()
                .is_some()
        );
        assert!(
            connector(
                &split("postgres://u@h/db?sslmode=verify-full&sslrootcert=system")
                    .unwrap()
                    .1
            )
            .unwrap()
            .is_some()
        );
    }
}
