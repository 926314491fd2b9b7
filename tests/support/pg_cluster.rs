//! A throwaway PostgreSQL cluster of one test's own: its own data directory (a temp dir),
//! a free loopback port, plain TCP with `trust` for [`USER`] on 127.0.0.1. Unlike the
//! shared cluster of `scripts/postgres.sh`, a test may stop it (`pg_ctl stop -m fast` or
//! `-m immediate`), start it again on the same port, and pause it (SIGSTOP to the
//! postmaster and each of its children: the server and every backend stop answering
//! while the kernel still accepts connections into the listen backlog). Stopped
//! (`pg_ctl stop -m immediate`) when the [`LocalCluster`] is dropped. Uses the server
//! binaries `scripts/postgres.sh` uses (Debian's `postgresql` package); under root it runs
//! as `postgres`, which must be able to read the temp dir.
//!
//! The process helpers here ([`bindir`], [`as_owner`], [`run`]) are shared with
//! [`crate::postgres_tls`].

use std::path::{Path, PathBuf};
use std::process::Command;

/// The cluster's superuser (`trust` on 127.0.0.1 and the Unix socket).
pub const USER: &str = "gatehouse";
/// The database [`LocalCluster::url`] names (created at start).
pub const DATABASE: &str = "gatehouse";

/// The newest `/usr/lib/postgresql/<version>/bin` that has an `initdb`.
pub fn bindir() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL server binaries under /usr/lib/postgresql (scripts/setup.sh)")
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .filter(|d| d.join("initdb").exists())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop()
        .expect("an initdb under /usr/lib/postgresql/*/bin")
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// `program args` as the cluster's owner (`postgres` under root).
pub fn as_owner(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Runs `c`; panics with its output unless it succeeded.
pub fn run(mut c: Command, what: &str) {
    let out = c.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `chown -R postgres:postgres path` under root (the cluster's owner must read it).
pub fn chown_to_owner(path: &Path) {
    if is_root() {
        let mut c = Command::new("chown");
        c.args(["-R", "postgres:postgres"]).arg(path);
        run(c, "chown");
    }
}

/// A free loopback port (nothing listens on it when this returns).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct LocalCluster {
    pub port: u16,
    bindir: PathBuf,
    data: PathBuf,
    dir: tempfile::TempDir,
}

impl LocalCluster {
    /// initdb, start, create [`DATABASE`]; answers on `127.0.0.1:port` when this returns.
    pub fn start() -> Self {
        let bindir = bindir();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(dir.path().join("sock")).unwrap();
        chown_to_owner(dir.path());
        let mut initdb = as_owner(&bindir.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", USER, "--auth-local=trust", "--auth-host=trust"])
            .args(["-E", "UTF8", "--locale=C.UTF-8"]);
        run(initdb, "initdb");
        let port = free_port();
        // `fsync = off` is safe against the process crashes a test makes (the kernel
        // keeps written WAL); `synchronous_commit` stays on: off, an immediate shutdown
        // loses commits the client was already told about.
        let mut conf = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .unwrap();
        std::io::Write::write_all(
            &mut conf,
            format!(
                "listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\n\
                 fsync = off\nfull_page_writes = off\n\
                 max_connections = 60\n",
                dir.path().join("sock").display()
            )
            .as_bytes(),
        )
        .unwrap();
        drop(conf);
        chown_to_owner(&data);
        let cluster = Self {
            port,
            bindir,
            data,
            dir,
        };
        cluster.start_again();
        cluster.psql("postgres", &format!("CREATE DATABASE {DATABASE}"));
        cluster
    }

    /// `postgres://USER@127.0.0.1:port/DATABASE`.
    pub fn url(&self) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{DATABASE}", self.port)
    }

    fn pg_ctl(&self) -> Command {
        let mut c = as_owner(&self.bindir.join("pg_ctl"));
        c.arg("-D").arg(&self.data);
        c
    }

    /// `pg_ctl start` (waits until it accepts connections), on the same port and data.
    pub fn start_again(&self) {
        let mut start = self.pg_ctl();
        start
            .arg("-l")
            .arg(self.dir.path().join("server.log"))
            .args(["-w", "-t", "60", "start"]);
        run(start, "pg_ctl start");
    }

    /// `pg_ctl stop -m <mode>` (`smart`, `fast`, `immediate`), waiting until it is down.
    pub fn stop(&self, mode: &str) {
        let mut stop = self.pg_ctl();
        stop.args(["-m", mode, "-w", "-t", "60", "stop"]);
        run(stop, &format!("pg_ctl stop -m {mode}"));
    }

    /// The postmaster's pid (first line of `postmaster.pid`).
    pub fn postmaster_pid(&self) -> u32 {
        self.pid()
            .unwrap_or_else(|| panic!("no postmaster.pid in {}", self.data.display()))
    }

    fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    /// The postmaster's children (backends, checkpointer, ...). Each calls `setsid()`, so
    /// they are not in the postmaster's process group and are signalled one by one.
    fn children(&self, postmaster: u32) -> Vec<String> {
        let out = Command::new("ps")
            .args(["--ppid", &postmaster.to_string(), "-o", "pid="])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    fn signal(pids: &[String], signal: &str) {
        if pids.is_empty() {
            return;
        }
        let mut kill = Command::new("kill");
        kill.arg(signal).arg("--").args(pids);
        // A child may have exited meanwhile: kill says so and signals the rest.
        let _ = kill.output();
    }

    /// SIGSTOP to the postmaster, then to each of its children: nothing answers (new
    /// connections wait in the listen backlog, sessions get no reply) until
    /// [`Self::resume`].
    pub fn pause(&self) {
        let postmaster = self.postmaster_pid();
        let mut kill = Command::new("kill");
        kill.args(["-STOP", &postmaster.to_string()]);
        run(kill, "kill -STOP postmaster");
        // Stopped, the postmaster forks no more children: the list is complete.
        Self::signal(&self.children(postmaster), "-STOP");
    }

    /// SIGCONT to the postmaster's children, then to the postmaster.
    pub fn resume(&self) {
        let postmaster = self.postmaster_pid();
        Self::signal(&self.children(postmaster), "-CONT");
        let mut kill = Command::new("kill");
        kill.args(["-CONT", &postmaster.to_string()]);
        run(kill, "kill -CONT postmaster");
    }

    /// `sql` run by psql over the cluster's Unix socket on `database`; its rows, unaligned.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let mut psql = as_owner(&self.bindir.join("psql"));
        psql.arg("-h").arg(self.dir.path().join("sock")).args([
            "-p",
            &self.port.to_string(),
            "-U",
            USER,
            "-d",
            database,
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

    /// The server's log so far (for assertion messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        // A paused cluster cannot stop: let it run first (harmless when it runs).
        if let Some(pid) = self.pid() {
            Self::signal(&self.children(pid), "-CONT");
            Self::signal(&[pid.to_string()], "-CONT");
        }
        let mut stop = self.pg_ctl();
        stop.args(["-m", "immediate", "-w", "stop"]);
        if !stop.output().is_ok_and(|o| o.status.success()) {
            eprintln!(
                "could not stop the local test cluster in {}",
                self.data.display()
            );
        }
    }
}
