//! `gatehouse login | logout | token | status`: the device flow from a terminal against a
//! central Gatehouse, and the stored session.
//!
//! Tokens are kept in a credentials file readable only by the user (0600) in the data
//! directory; the desktop app keeps them in the OS keychain instead. `gatehouse token`
//! prints a valid access token, refreshing it first when it expires within five minutes,
//! so it can serve as Claude Code's `apiKeyHelper`. The protocol client is the desktop's
//! [`CentralClient`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gatehouse_desktop::app::{Opener, SystemOpener};
use gatehouse_desktop::central::{self, CentralClient, CentralError, Poll, Tokens};
use gatehouse_engine::deps::SystemClock;
use gatehouse_engine::secret::Secret;
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

/// `https://gw.example/` -> `https://gw.example`.
pub fn origin(gateway: &str) -> Result<String, String> {
    central::origin(gateway).map_err(|e| e.to_string())
}

fn client(base: &str) -> Result<CentralClient, String> {
    let http = CentralClient::default_http().map_err(|e| e.to_string())?;
    CentralClient::new(base, http, Arc::new(SystemClock)).map_err(|e| e.to_string())
}

fn stored(base: &str, tokens: Tokens, email: Option<String>) -> (String, StoredSession) {
    (
        base.to_owned(),
        StoredSession {
            access_token: tokens.access_token.expose().to_owned(),
            refresh_token: tokens.refresh_token.map(|t| t.expose().to_owned()),
            expires_at: tokens.expires_at.timestamp(),
            email: tokens.email.or(email),
        },
    )
}

pub async fn login(creds: &Credentials, gateway: &str, open_browser: bool) -> Result<(), String> {
    let base = origin(gateway)?;
    let central = client(&base)?;
    let da = central.start_device().await.map_err(|e| e.to_string())?;
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
        // Only a page the rule for the central URL allows (https, or http on loopback).
        match central::check_browser_url(&link) {
            Ok(()) => {
                let _ = SystemOpener.open(&link);
            }
            Err(e) => eprintln!("gatehouse: not opening a browser: {e}"),
        }
    }
    let mut interval = da.interval;
    loop {
        if chrono::Utc::now() >= da.expires_at {
            return Err(
                "the code expired before sign-in finished; run `gatehouse login` again".into(),
            );
        }
        tokio::time::sleep(interval).await;
        match central.poll(&da.device_code).await {
            Ok(Poll::Pending) => {}
            Ok(Poll::SlowDown) => {
                interval = (interval + Duration::from_secs(5)).min(Duration::from_secs(60));
            }
            Ok(Poll::Done(tokens)) => {
                let (key, session) = stored(&base, tokens, None);
                let email = session.email.clone();
                creds.put(&key, session)?;
                println!(
                    "Signed in{}. The session is stored in {} (a file only you can read; the desktop app uses the OS keychain).",
                    email.map(|e| format!(" as {e}")).unwrap_or_default(),
                    creds.path().display()
                );
                return Ok(());
            }
            Ok(Poll::Denied(why)) => return Err(format!("sign-in was refused: {why}")),
            Ok(Poll::Expired) => {
                return Err("the code expired; run `gatehouse login` again".into());
            }
            Err(e) => eprintln!("gatehouse: polling failed ({e}); retrying"),
        }
    }
}

/// Whether a stored session expiring at `expires_at` is good for five more minutes at
/// `now` (both Unix seconds, whatever the credentials file holds).
fn fresh(expires_at: i64, now: i64) -> bool {
    expires_at.saturating_sub(now) > 300
}

/// A valid access token, refreshed when it expires within five minutes.
pub async fn token(creds: &Credentials, gateway: &str) -> Result<String, String> {
    let base = origin(gateway)?;
    let s = creds.get(&base)?.ok_or_else(|| {
        format!("not signed in to {base}; run `gatehouse login --gateway {base}`")
    })?;
    if fresh(s.expires_at, chrono::Utc::now().timestamp()) {
        return Ok(s.access_token);
    }
    let rt = s
        .refresh_token
        .clone()
        .ok_or("the session expired and cannot be refreshed; run `gatehouse login`")?;
    match client(&base)?.refresh(&Secret::new(rt)).await {
        Ok(tokens) => {
            let (key, session) = stored(&base, tokens, s.email);
            let access = session.access_token.clone();
            creds.put(&key, session)?;
            Ok(access)
        }
        Err(CentralError::InvalidGrant) => {
            creds.remove(&base)?;
            Err(format!(
                "the session ended (invalid_grant); run `gatehouse login --gateway {base}`"
            ))
        }
        Err(e) => Err(format!("refresh failed ({e}); try again shortly")),
    }
}

pub async fn logout(creds: &Credentials, gateway: &str) -> Result<(), String> {
    let base = origin(gateway)?;
    let Some(s) = creds.remove(&base)? else {
        println!("Not signed in to {base}.");
        return Ok(());
    };
    let central = client(&base)?;
    central
        .revoke(&Secret::new(s.access_token), "access_token")
        .await;
    if let Some(rt) = s.refresh_token {
        central.revoke(&Secret::new(rt), "refresh_token").await;
    }
    println!("Signed out of {base}.");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_stored_expiry_is_compared_without_overflow() {
        let now = 1_800_000_000;
        assert!(fresh(now + 301, now));
        assert!(!fresh(now + 300, now));
        assert!(fresh(i64::MAX, now));
        assert!(!fresh(i64::MIN, now));
        assert!(!fresh(i64::MIN, i64::MAX));
        assert!(fresh(i64::MAX, i64::MIN));
    }
}
