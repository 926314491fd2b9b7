//! `load_test_mode`'s made-up developers: with the mode on, a caller's
//! `x-load-test-user: N` header (a whole number of at most seven digits) makes the request
//! count as developer `<sub>+loadtest-N` (a client key: `<id>+loadtest-N`) for spend checks,
//! limits and metering, so one load generator can stand in for a whole team. Workload
//! callers are never renamed. Without the mode the header means nothing.

use std::borrow::Cow;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::gateway::Gateway;

pub const HEADER: &str = "x-load-test-user";
/// [`HEADER`] parsed once (a lookup by `&str` parses the name every time).
const HEADER_NAME: http::HeaderName = http::HeaderName::from_static(HEADER);

/// The principal this request counts as.
pub fn principal<'a>(
    gw: &Gateway,
    principal: &'a Principal,
    headers: &http::HeaderMap,
) -> Result<Cow<'a, Principal>, ApiError> {
    let renamable = !matches!(principal, Principal::Workload(_));
    let Some(value) = headers
        .get(&HEADER_NAME)
        .filter(|_| renamable && gw.config.load_test.is_some())
    else {
        return Ok(Cow::Borrowed(principal));
    };
    let n = value
        .to_str()
        .ok()
        .filter(|v| (1..=7).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u32>().ok())
        .ok_or_else(|| {
            ApiError::InvalidRequest(format!(
                "{HEADER} must be a whole number of at most 7 digits"
            ))
        })?;
    let renamed = match principal {
        Principal::Session {
            user,
            jti,
            billing_group_tag,
        } => {
            let mut user = user.clone();
            user.sub = format!("{}+loadtest-{n}", user.sub);
            Principal::Session {
                user,
                jti: jti.clone(),
                billing_group_tag: billing_group_tag.clone(),
            }
        }
        Principal::ClientKey { id } => Principal::ClientKey {
            id: format!("{id}+loadtest-{n}"),
        },
        Principal::Workload(_) => return Ok(Cow::Borrowed(principal)),
    };
    Ok(Cow::Owned(renamed))
}
