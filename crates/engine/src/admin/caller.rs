//! Who is calling the admin API, and what they may do.
//!
//! In this order, with no fallback once a credential is presented: an `x-api-key` from
//! `admin.write_keys` (admin) or `admin.read_keys` (viewer); else an `Authorization:
//! Bearer` Gatehouse session of a member of `admin.admin_groups` (admin) or
//! `admin.viewer_groups` (viewer); else the team console's session cookie, whose
//! mutations also need its CSRF token from this origin. Audit actors are named as the
//! reference names them: `admin-key:<id>` or `oidc:<sub>`.

use http::{HeaderMap, Method};

use crate::auth::{Admission, Principal};
use crate::config::ClientKeyConfig;
use crate::error::ApiError;
use crate::gateway::Gateway;
use crate::identity::UserIdentity;
use crate::identity::console::{self, ConsoleRole, ConsoleSession};

/// The one message of every 401, as the reference words it.
pub const UNAUTHENTICATED: &str = "missing or invalid admin credentials";

/// How the caller presented itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    AdminKey,
    Session,
    Console,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::AdminKey => "admin_key",
            Via::Session => "session",
            Via::Console => "console",
        }
    }
}

/// An authenticated admin API caller.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The audit trail's name for them.
    pub actor: String,
    pub role: ConsoleRole,
    pub via: Via,
    /// The person, for sessions and the console.
    pub user: Option<UserIdentity>,
    /// The console session (its CSRF token and expiry), for the console.
    pub console: Option<ConsoleSession>,
}

impl Caller {
    pub fn may_write(&self) -> bool {
        self.role == ConsoleRole::Admin
    }
}

fn key_matches(keys: &[ClientKeyConfig], presented: &str) -> Option<String> {
    let entries = keys.iter().map(|k| (k.id.as_str(), &k.hash));
    crate::auth::client_keys::find_hashed(entries, presented).map(str::to_owned)
}

pub fn unauthenticated() -> ApiError {
    ApiError::Unauthenticated {
        message: UNAUTHENTICATED,
        reason: UNAUTHENTICATED,
    }
}

/// The caller of an admin API request with `method` and `headers` (404 without `admin`).
pub async fn authenticate(
    gw: &Gateway,
    method: &Method,
    headers: &HeaderMap,
    admission: &Admission<'_>,
) -> Result<Caller, ApiError> {
    let spend = gw
        .config
        .spend
        .as_ref()
        .ok_or_else(|| ApiError::NotFound("spend limits are not configured".into()))?;
    if let Some(key) = headers.get("x-api-key") {
        // Present but not text is as wrong as a wrong key: never a fall back to the bearer.
        let Ok(key) = key.to_str() else {
            return Err(unauthenticated());
        };
        let found = key_matches(&spend.write_keys, key)
            .map(|id| (id, ConsoleRole::Admin))
            .or_else(|| key_matches(&spend.read_keys, key).map(|id| (id, ConsoleRole::Viewer)));
        let (id, role) = found.ok_or_else(unauthenticated)?;
        return Ok(Caller {
            actor: format!("admin-key:{id}"),
            role,
            via: Via::AdminKey,
            user: None,
            console: None,
        });
    }
    if headers.contains_key(http::header::AUTHORIZATION) {
        return match crate::auth::admit(admission, headers).await {
            Ok(Principal::Session { user, .. }) => {
                let role = ConsoleRole::of(&user.groups, &spend.admin_groups, &spend.viewer_groups)
                    .ok_or_else(unauthenticated)?;
                Ok(Caller {
                    actor: format!("oidc:{}", user.sub),
                    role,
                    via: Via::Session,
                    user: Some(user),
                    console: None,
                })
            }
            _ => Err(unauthenticated()),
        };
    }
    from_console(gw, method, headers).await
}

/// The team console's cookie (only on a server with sign-in).
async fn from_console(
    gw: &Gateway,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Caller, ApiError> {
    let Some(id) = gw.identity.as_ref().filter(|_| gw.local.app().is_none()) else {
        return Err(unauthenticated());
    };
    let found = console::find(gw, id, headers)
        .await
        .map_err(console::refusal_error)?;
    let Some(c) = found else {
        return Err(unauthenticated());
    };
    c.check_mutation(id, method, headers)
        .map_err(console::refusal_error)?;
    let s = c.session;
    Ok(Caller {
        actor: format!("oidc:{}", s.user.sub),
        role: s.role,
        via: Via::Console,
        user: Some(s.user.clone()),
        console: Some(s),
    })
}
