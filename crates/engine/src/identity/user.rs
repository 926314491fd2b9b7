//! Who signed in, as the gateway knows them: a plain type that sessions, policy, spend and
//! the store's identity directory share (it carries no sign-in logic).

use serde::{Deserialize, Serialize};

/// Who signed in, as the gateway knows them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UserIdentity {
    pub sub: String,
    pub email: Option<String>,
    pub name: Option<String>,
    pub groups: Vec<String>,
}

impl UserIdentity {
    /// The one person behind the desktop's local key: personal budgets are `user` caps on
    /// this subject.
    pub fn local() -> Self {
        Self {
            sub: LOCAL_SUBJECT.to_owned(),
            email: None,
            name: None,
            groups: Vec::new(),
        }
    }
}

/// The spend subject of the desktop's local key.
pub const LOCAL_SUBJECT: &str = "local";
