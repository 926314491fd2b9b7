//! `gatehouse login | logout | token | status`: the device flow from a terminal against a
//! central Gatehouse, and the stored session.
//!
//! Tokens are kept in a credentials file readable only by the user (0600) in the data
//! directory; the desktop app keeps them in the OS keychain instead. `gatehouse token`
//! prints a valid access token, refreshing it first when it expires within five minutes,
//! so it can serve as Claude Code's `apiKeyHelper`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredSession {
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Unix seconds.
    pub expires_at: i64,
    pub email: Option<String>,
}

/// Sessions by gateway origin.
#[derive(Debug, Default, Serialize, Deserialize)]
struct CredentialsFile {
    sessions: BTreeMap<String, StoredSession>,
}

pub struct Credentials {
    path: PathBuf,
}

impl Credentials {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join("credentials.json"),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<CredentialsFile, String> {
        match std::fs::read(&self.path) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| format!("{} is corrupt: {e}", self.path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(CredentialsFile::default()),
            Err(e) => Err(format!("cannot read {}: {e}", self.path.display())),
        }
    }

    fn write(&self, f: &CredentialsFile) -> Result<(), String> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let tmp = self.path.with_extension("json.tmp");
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let body = serde_json::to_vec_pretty(f).map_err(|e| e.to_string())?;
        std::io::Write::write_all(
            &mut opts
                .open(&tmp)
                .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?,
            &body,
        )
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &self.path)
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }

    pub fn get(&self, gateway: &str) -> Result<Option<StoredSession>, String> {
        Ok(self.read()?.sessions.get(gateway).cloned())
    }

    pub fn put(&self, gateway: &str, s: StoredSession) -> Result<(), String> {
        let mut f = self.read()?;
        f.sessions.insert(gateway.to_owned(), s);
        self.write(&f)
    }

    pub fn remove(&self, gateway: &str) -> Result<Option<StoredSession>, String> {
        let mut f = self.read()?;
        let old = f.sessions.remove(gateway);
        self.write(&f)?;
        Ok(old)
    }

    /// The only stored gateway, when `--gateway` is not given.
    pub fn single(&self) -> Result<Option<String>, String> {
        let f = self.read()?;
        Ok((f.sessions.len() == 1)
            .then(|| f.sessions.keys().next().cloned())
            .flatten())
    }
}

#[derive(Debug, Deserialize)]
struct Metadata {
    device_authorization_endpoint: Option<String>,
    token_endpoint: Option<String>,
    revocation_endpoint: Option<String>,
}

#[derive(Debug, Deserialize)]
struct DeviceAuthorization {
    device_code: String,
    user_code: String,
    verification_uri: String,
    verification_uri_complete: Option<String>,
    expires_in: u64,
    interval: Option<u64>,
    login_notice: Option<String>,
}

#[derive(Debug, Deserialize)]
struct TokenOk {
    access_token: String,
    expires_in: i64,
    refresh_token: Option<String>,
    email: Option<String>,
}

#[derive(Debug, Deserialize)]
struct TokenErr {
    error: String,
    error_description: Option<String>,
}

/// `https://gw.example/` -> `https://gw.example`.
pub fn origin(gateway: &str) -> Result<String, String> {
    let url = url_parse(gateway)?;
    Ok(url.trim_end_matches('/').to_owned())
}

fn url_parse(s: &str) -> Result<String, String> {
    if !(s.starts_with("https://") || s.starts_with("http://")) {
        return Err(format!("--gateway must be an http(s) URL, got `{s}`"));
    }
    Ok(s.to_owned())
}

struct Endpoints {
    device: String,
    token: String,
    revoke: Option<String>,
}

/// Endpoints from discovery, used only when on the gateway's own origin (as Claude Code does).
async fn endpoints(http: &reqwest::Client, base: &str) -> Endpoints {
    let meta: Option<Metadata> = match http
        .get(format!("{base}/.well-known/oauth-authorization-server"))
        .send()
        .await
    {
        Ok(r) if r.status().is_success() => r.json().await.ok(),
        _ => None,
    };
    let same = |u: Option<String>| u.filter(|u| u.starts_with(&format!("{base}/")));
    let meta = meta.unwrap_or(Metadata {
        device_authorization_endpoint: None,
        token_endpoint: None,
        revocation_endpoint: None,
    });
    Endpoints {
        device: same(meta.device_authorization_endpoint)
            .unwrap_or_else(|| format!("{base}/oauth/device_authorization")),
        token: same(meta.token_endpoint).unwrap_or_else(|| format!("{base}/oauth/token")),
        revoke: same(meta.revocation_endpoint),
    }
}

fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .user_agent(concat!("gatehouse-cli/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| e.to_string())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

pub async fn login(creds: &Credentials, gateway: &str, open_browser: bool) -> Result<(), String> {
    let base = origin(gateway)?;
    let http = client()?;
    let ep = endpoints(&http, &base).await;
    let resp = http
        .post(&ep.device)
        .form(&[("surface", "gatehouse_cli")])
        .send()
        .await
        .map_err(|e| format!("cannot reach {base}: {e}"))?;
    if !resp.status().is_success() {
        let status = resp.status();
        let err: Option<TokenErr> = resp.json().await.ok();
        return Err(format!(
            "device authorization failed ({status}): {}",
            err.map(|e| e.error_description.unwrap_or(e.error))
                .unwrap_or_default()
        ));
    }
    let da: DeviceAuthorization = resp
        .json()
        .await
        .map_err(|e| format!("unexpected device authorization answer: {e}"))?;
    let link = da
        .verification_uri_complete
        .clone()
        .unwrap_or_else(|| da.verification_uri.clone());
    println!(
        "To sign in to {base}, open:\n\n  {link}\n\nand check that it shows the code  {}",
        da.user_code
    );
    if let Some(n) = &da.login_notice {
        println!("\n{n}");
    }
    if open_browser {
        let opener = if cfg!(target_os = "macos") {
            "open"
        } else {
            "xdg-open"
        };
        let _ = std::process::Command::new(opener)
            .arg(&link)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    let mut interval = da.interval.unwrap_or(5).max(1);
    let deadline = std::time::Instant::now() + Duration::from_secs(da.expires_in);
    loop {
        if std::time::Instant::now() >= deadline {
            return Err(
                "the code expired before sign-in finished; run `gatehouse login` again".into(),
            );
        }
        tokio::time::sleep(Duration::from_secs(interval)).await;
        let resp = http
            .post(&ep.token)
            .form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", da.device_code.as_str()),
            ])
            .send()
            .await;
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                eprintln!("gatehouse: polling failed ({e}); retrying");
                continue;
            }
        };
        if resp.status().is_success() {
            let ok: TokenOk = resp
                .json()
                .await
                .map_err(|e| format!("unexpected token answer: {e}"))?;
            let email = ok.email.clone();
            creds.put(
                &base,
                StoredSession {
                    access_token: ok.access_token,
                    refresh_token: ok.refresh_token,
                    expires_at: now() + ok.expires_in,
                    email: ok.email,
                },
            )?;
            println!(
                "Signed in{}. The session is stored in {} (a file only you can read; the desktop app uses the OS keychain).",
                email.map(|e| format!(" as {e}")).unwrap_or_default(),
                creds.path().display()
            );
            return Ok(());
        }
        let err: TokenErr = resp
            .json()
            .await
            .map_err(|e| format!("unexpected token answer: {e}"))?;
        match err.error.as_str() {
            "authorization_pending" => {}
            "slow_down" => interval += 5,
            "access_denied" => {
                return Err(format!(
                    "sign-in was refused: {}",
                    err.error_description.unwrap_or_default()
                ));
            }
            "expired_token" => return Err("the code expired; run `gatehouse login` again".into()),
            other => {
                return Err(format!(
                    "sign-in failed: {other} {}",
                    err.error_description.unwrap_or_default()
                ));
            }
        }
    }
}

/// A valid access token, refreshed when it expires within five minutes.
pub async fn token(creds: &Credentials, gateway: &str) -> Result<String, String> {
    let base = origin(gateway)?;
    let s = creds.get(&base)?.ok_or_else(|| {
        format!("not signed in to {base}; run `gatehouse login --gateway {base}`")
    })?;
    if s.expires_at - now() > 300 {
        return Ok(s.access_token);
    }
    let rt = s
        .refresh_token
        .clone()
        .ok_or("the session expired and cannot be refreshed; run `gatehouse login`")?;
    let http = client()?;
    let ep = endpoints(&http, &base).await;
    let resp = http
        .post(&ep.token)
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", rt.as_str()),
        ])
        .send()
        .await
        .map_err(|e| format!("cannot reach {base}: {e}"))?;
    if resp.status().is_success() {
        let ok: TokenOk = resp
            .json()
            .await
            .map_err(|e| format!("unexpected token answer: {e}"))?;
        creds.put(
            &base,
            StoredSession {
                access_token: ok.access_token.clone(),
                refresh_token: ok.refresh_token.or(Some(rt)),
                expires_at: now() + ok.expires_in,
                email: s.email,
            },
        )?;
        return Ok(ok.access_token);
    }
    let status = resp.status();
    if status == reqwest::StatusCode::UNAUTHORIZED {
        creds.remove(&base)?;
        return Err(format!(
            "the session ended (invalid_grant); run `gatehouse login --gateway {base}`"
        ));
    }
    Err(format!("refresh failed with {status}; try again shortly"))
}

pub async fn logout(creds: &Credentials, gateway: &str) -> Result<(), String> {
    let base = origin(gateway)?;
    let Some(s) = creds.remove(&base)? else {
        println!("Not signed in to {base}.");
        return Ok(());
    };
    let http = client()?;
    if let Some(revoke) = endpoints(&http, &base).await.revoke {
        let _ = http
            .post(&revoke)
            .form(&[("token", s.access_token.as_str())])
            .send()
            .await;
        if let Some(rt) = &s.refresh_token {
            let _ = http
                .post(&revoke)
                .form(&[("token", rt.as_str()), ("token_type_hint", "refresh_token")])
                .send()
                .await;
        }
    }
    println!("Signed out of {base}.");
    Ok(())
}
