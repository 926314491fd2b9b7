//! A throwaway PostgreSQL cluster that speaks only TLS, for the `sslmode` tests: its own
//! data directory (a temp dir), a free loopback port, a CA and a server certificate for
//! `localhost` generated here, and a `pg_hba.conf` that refuses plain TCP, takes a password
//! from [`USER`] and a client certificate (signed by the same CA) from [`CERT_USER`].
//! Stopped (`pg_ctl stop -m immediate`) when the [`TlsCluster`] is dropped. Uses the server
//! binaries `scripts/postgres.sh` uses (Debian's `postgresql` package); under root it runs
//! as `postgres`, which must be able to read the temp dir (the process helpers are
//! [`crate::pg_cluster`]'s).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::pg_cluster::{as_owner, bindir, is_root, run};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// Password user (SCRAM over TLS).
pub const USER: &str = "gatehouse";
pub const PASSWORD: &str = "tls-cluster-password";
/// User that signs in with a client certificate (`hostssl ... cert`).
pub const CERT_USER: &str = "gh_cert";

pub struct TlsCluster {
    pub port: u16,
    /// The CA that signed the server and client certificates (PEM file).
    pub ca_file: PathBuf,
    /// A CA that signed nothing here (PEM file).
    pub other_ca_file: PathBuf,
    /// Client certificate and key for [`CERT_USER`] (PEM files).
    pub client_cert_file: PathBuf,
    pub client_key_file: PathBuf,
    bindir: PathBuf,
    data: PathBuf,
    dir: tempfile::TempDir,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// A leaf certificate and its key (PEM) signed by `issuer`.
fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    common_name: &str,
) -> (String, String) {
    let mut params =
        CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl TlsCluster {
    /// initdb, certificates, start; answers on `127.0.0.1:port` when this returns.
    pub fn start() -> Self {
        let bindir = bindir();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let sock = dir.path().join("sock");
        std::fs::create_dir_all(&sock).unwrap();
        let pwfile = dir.path().join("pwfile");
        std::fs::write(&pwfile, format!("{PASSWORD}\n")).unwrap();
        if is_root() {
            run(
                {
                    let mut c = Command::new("chown");
                    c.args(["-R", "postgres:postgres"]).arg(dir.path());
                    c
                },
                "chown",
            );
        }
        let mut initdb = as_owner(&bindir.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", USER, "--auth-local=trust", "--auth-host=reject"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args(["-E", "UTF8", "--locale=C.UTF-8"]);
        run(initdb, "initdb");

        let ca_main = ca("gatehouse test CA");
        let ca_other = ca("some other CA");
        // Named `localhost` only: `verify-full` to 127.0.0.1 is a name mismatch.
        let (server_cert, server_key) = leaf(&ca_main, &["localhost"], "localhost");
        let (client_cert, client_key) = leaf(&ca_main, &[], CERT_USER);
        let files = dir.path().join("client");
        std::fs::create_dir_all(&files).unwrap();
        let write = |path: &Path, text: &str| std::fs::write(path, text).unwrap();
        let ca_file = files.join("ca.pem");
        let other_ca_file = files.join("other-ca.pem");
        let client_cert_file = files.join("client.pem");
        let client_key_file = files.join("client.key");
        write(&ca_file, &ca_main.pem());
        write(&other_ca_file, &ca_other.pem());
        write(&client_cert_file, &client_cert);
        write(&client_key_file, &client_key);
        write(&data.join("server.crt"), &server_cert);
        write(&data.join("server.key"), &server_key);
        write(&data.join("root.crt"), &ca_main.pem());
        write(
            &data.join("pg_hba.conf"),
            &format!(
                "local all all trust\n\
                 hostssl all {CERT_USER} 127.0.0.1/32 cert\n\
                 hostssl all all 127.0.0.1/32 scram-sha-256\n\
                 hostnossl all all 0.0.0.0/0 reject\n"
            ),
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut conf = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .unwrap();
        std::io::Write::write_all(
            &mut conf,
            format!(
                "listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\n\
                 ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n\
                 ssl_ca_file = 'root.crt'\nfsync = off\nsynchronous_commit = off\n\
                 max_connections = 60\n",
                sock.display()
            )
            .as_bytes(),
        )
        .unwrap();
        drop(conf);
        if is_root() {
            let mut c = Command::new("chown");
            c.args(["-R", "postgres:postgres"]).arg(&data);
            run(c, "chown data");
        }
        let mut perms = Command::new("chmod");
        perms.arg("600").arg(data.join("server.key"));
        run(perms, "chmod server.key");
        let mut start = as_owner(&bindir.join("pg_ctl"));
        start
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.path().join("server.log"))
            .args(["-w", "-t", "60", "start"]);
        run(start, "pg_ctl start");
        let cluster = Self {
            port,
            ca_file,
            other_ca_file,
            client_cert_file,
            client_key_file,
            bindir,
            data,
            dir,
        };
        cluster.psql(&format!("CREATE ROLE {CERT_USER} LOGIN SUPERUSER"));
        cluster
    }

    /// `postgres://USER:PASSWORD@127.0.0.1:port/postgres?` followed by `query`.
    pub fn url(&self, query: &str) -> String {
        format!(
            "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/postgres?{query}",
            self.port
        )
    }

    /// `sql` run by psql over the cluster's Unix socket (as the superuser); its rows,
    /// unaligned.
    pub fn psql(&self, sql: &str) -> String {
        let mut psql = as_owner(&self.bindir.join("psql"));
        psql.arg("-h").arg(self.dir.path().join("sock")).args([
            "-p",
            &self.port.to_string(),
            "-U",
            USER,
            "-d",
            "postgres",
            "-qAtc",
            sql,
        ]);
        let out = psql.output().unwrap();
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// As [`TlsCluster::url`] with the host `localhost` (the name in the server's
    /// certificate), connecting to `hostaddr=127.0.0.1`.
    pub fn named_url(&self, query: &str) -> String {
        format!(
            "postgres://{USER}:{PASSWORD}@localhost:{}/postgres?hostaddr=127.0.0.1&{query}",
            self.port
        )
    }

    /// The server's log so far (for assertion messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        let mut stop = as_owner(&self.bindir.join("pg_ctl"));
        stop.arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "stop"]);
        if !stop.output().is_ok_and(|o| o.status.success()) {
            eprintln!(
                "could not stop the TLS test cluster in {}",
                self.data.display()
            );
        }
    }
}
