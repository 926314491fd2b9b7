//! STS AssumeRole for the AWS upstreams (Bedrock, Mantle): one shared role session (`claude-apps-gateway`), or one per
//! person named from their email or `sub` (so CloudTrail shows who called), each a
//! credentials provider kept for reuse, its credentials cached until shortly before they
//! expire ([`super::Cached`]). The
//! source credentials are the upstream's keys or the AWS default chain.
//! `AWS_ENDPOINT_URL_STS` from the gateway's environment points STS elsewhere (tests).

use std::collections::HashMap;
use std::sync::Mutex;

use aws_config::SdkConfig;
use aws_config::sts::AssumeRoleProvider;
use aws_credential_types::provider::SharedCredentialsProvider;

use crate::config::{AssumeRole, SessionName};

/// Role sessions kept per person at most; past it the map starts over.
const MAX_SESSIONS: usize = 1000;
/// The shared session's name, as the reference names it.
pub const SHARED_SESSION: &str = "claude-apps-gateway";

pub struct Roles {
    role: AssumeRole,
    /// The source credentials and region STS is called with.
    sts: SdkConfig,
    shared: SharedCredentialsProvider,
    per_person: Mutex<HashMap<String, SharedCredentialsProvider>>,
}

/// A role session name from a claim: `[\w+=,.@-]`, 2-64 characters.
pub fn session_name(claim: &str) -> String {
    let mut s: String = claim
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_+=,.@-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    while s.len() < 2 {
        s.push('-');
    }
    s
}

impl Roles {
    pub async fn new(role: AssumeRole, sts: SdkConfig) -> Self {
        let shared = provider(&role, &sts, SHARED_SESSION).await;
        Self {
            role,
            sts,
            shared,
            per_person: Mutex::new(HashMap::new()),
        }
    }

    /// The shared session (callers without a name, and counting).
    pub fn shared(&self) -> SharedCredentialsProvider {
        self.shared.clone()
    }

    /// The credentials for a caller (`sub`, `email`): their own session when the role is
    /// per person and the claim is known, else the shared one.
    pub async fn for_caller(&self, sub: &str, email: Option<&str>) -> SharedCredentialsProvider {
        let claim = match self.role.session_name {
            None => return self.shared(),
            Some(SessionName::Sub) => Some(sub),
            Some(SessionName::Email) => email,
        };
        let Some(claim) = claim.filter(|c| !c.is_empty()) else {
            return self.shared();
        };
        let name = session_name(claim);
        if let Some(p) = self
            .per_person
            .lock()
            .ok()
            .and_then(|m| m.get(&name).cloned())
        {
            return p;
        }
        let p = provider(&self.role, &self.sts, &name).await;
        if let Ok(mut m) = self.per_person.lock() {
            if m.len() >= MAX_SESSIONS {
                m.clear();
            }
            m.insert(name, p.clone());
        }
        p
    }
}

async fn provider(role: &AssumeRole, sts: &SdkConfig, session: &str) -> SharedCredentialsProvider {
    let mut b = AssumeRoleProvider::builder(role.role_arn.clone())
        .session_name(session)
        .configure(sts);
    if let Some(id) = &role.external_id {
        b = b.external_id(id.clone());
    }
    super::Cached::shared(SharedCredentialsProvider::new(b.build().await))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_are_what_sts_accepts() {
        assert_eq!(session_name("alice@corp.example"), "alice@corp.example");
        assert_eq!(session_name("a b/c"), "a-b-c");
        assert_eq!(session_name("x"), "x-");
        assert_eq!(session_name(&"y".repeat(80)).len(), 64);
    }
}
