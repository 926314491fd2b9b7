//! nginx as a peer: one worker process, `proxy_pass` to the fake upstream over a
//! keep-alive upstream pool, buffering off both ways so streams flow as they come. It
//! runs in the foreground (`daemon off`) with its own config, pid file, logs and temp
//! paths in the run's directory, on a loopback port the benchmark chose; the system's
//! nginx service and its files are never touched.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use crate::procs::Children;

/// Time nginx gets to accept connections.
const STARTUP: Duration = Duration::from_secs(15);

/// Where nginx puts its files.
pub struct Files {
    pub prefix: PathBuf,
}

/// The nginx.conf of the run: `listen` on loopback, the fake as the only upstream.
pub fn config(files: &Files, listen: SocketAddr, upstream: SocketAddr) -> String {
    let p = files.prefix.display();
    format!(
        "# gatehouse-bench --peers: nginx in front of the fake upstream\n\
         daemon off;\n\
         master_process on;\n\
         worker_processes 1;\n\
         pid {p}/nginx.pid;\n\
         error_log {p}/nginx-error.log warn;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n\
         \x20 access_log off;\n\
         \x20 client_body_temp_path {p}/client_body;\n\
         \x20 proxy_temp_path {p}/proxy;\n\
         \x20 fastcgi_temp_path {p}/fastcgi;\n\
         \x20 uwsgi_temp_path {p}/uwsgi;\n\
         \x20 scgi_temp_path {p}/scgi;\n\
         \x20 keepalive_timeout 300s;\n\
         \x20 keepalive_requests 1000000;\n\
         \x20 upstream fake {{\n\
         \x20   server {upstream};\n\
         \x20   keepalive 64;\n\
         \x20   keepalive_requests 1000000;\n\
         \x20   keepalive_timeout 300s;\n\
         \x20 }}\n\
         \x20 server {{\n\
         \x20   listen {listen};\n\
         \x20   tcp_nodelay on;\n\
         \x20   location / {{\n\
         \x20     proxy_pass http://fake;\n\
         \x20     proxy_http_version 1.1;\n\
         \x20     proxy_set_header Connection \"\";\n\
         \x20     proxy_buffering off;\n\
         \x20     proxy_request_buffering off;\n\
         \x20   }}\n\
         \x20 }}\n\
         }}\n"
    )
}

/// The version nginx reports (`nginx -v` prints `nginx version: nginx/1.22.1` on stderr).
pub fn version(bin: &Path) -> anyhow::Result<String> {
    let out = std::process::Command::new(bin)
        .arg("-v")
        .output()
        .with_context(|| format!("cannot run {} -v", bin.display()))?;
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    parse_version(&text).with_context(|| format!("unexpected `nginx -v` output: {}", text.trim()))
}

fn parse_version(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("nginx version: "))
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// Writes the config under `dir/nginx` and starts nginx on `listen`; returns its pid.
pub async fn start(
    children: &mut Children,
    bin: &Path,
    dir: &Path,
    listen: SocketAddr,
    upstream: SocketAddr,
) -> anyhow::Result<u32> {
    let files = Files {
        prefix: dir.join("nginx"),
    };
    std::fs::create_dir_all(&files.prefix)
        .with_context(|| format!("cannot create {}", files.prefix.display()))?;
    let conf = files.prefix.join("nginx.conf");
    std::fs::write(&conf, config(&files, listen, upstream))
        .with_context(|| format!("cannot write {}", conf.display()))?;
    // `-e` moves the start-up error log off /var/log/nginx too; `-p` the prefix.
    let args = [
        "-p".to_owned(),
        format!("{}/", files.prefix.display()),
        "-e".to_owned(),
        files.prefix.join("nginx-error.log").display().to_string(),
        "-c".to_owned(),
        conf.display().to_string(),
    ];
    let p = children
        .spawn_on("nginx", bin, &args, &[], dir, listen, STARTUP)
        .await?;
    Ok(p.pid)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn config_proxies_to_the_fake_without_buffering() {
        let files = Files {
            prefix: PathBuf::from("/tmp/run/nginx"),
        };
        let listen: SocketAddr = "127.0.0.1:4100".parse().unwrap();
        let up: SocketAddr = "127.0.0.1:4200".parse().unwrap();
        let c = config(&files, listen, up);
        for want in [
            "daemon off;",
            "worker_processes 1;",
            "pid /tmp/run/nginx/nginx.pid;",
            "error_log /tmp/run/nginx/nginx-error.log warn;",
            "server 127.0.0.1:4200;",
            "keepalive 64;",
            "listen 127.0.0.1:4100;",
            "proxy_pass http://fake;",
            "proxy_http_version 1.1;",
            "proxy_set_header Connection \"\";",
            "proxy_buffering off;",
            "proxy_request_buffering off;",
            "client_body_temp_path /tmp/run/nginx/client_body;",
        ] {
            assert!(c.contains(want), "missing `{want}` in:\n{c}");
        }
        // Every path it writes is under the prefix.
        for line in c
            .lines()
            .filter(|l| l.contains("_path ") || l.contains("pid "))
        {
            assert!(line.contains("/tmp/run/nginx/"), "{line}");
        }
        // Balanced braces: nginx refuses the file otherwise.
        assert_eq!(c.matches('{').count(), c.matches('}').count());
    }

    #[test]
    fn version_is_read_from_nginx_v() {
        assert_eq!(
            parse_version("nginx version: nginx/1.22.1\n").as_deref(),
            Some("nginx/1.22.1")
        );
        assert_eq!(parse_version("bash: nginx: command not found"), None);
    }
}
