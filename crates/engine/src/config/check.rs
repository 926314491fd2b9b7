//! Value checks shared by the config blocks: URLs and secrets, each error naming its path
//! and never the value.

use url::Url;

use super::ConfigError;
use crate::secret::Secret;

pub(super) fn http_url(s: &str, path: &str) -> Result<Url, ConfigError> {
    let url = Url::parse(s).map_err(|e| ConfigError::at(path, format!("invalid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::at(path, "URL scheme must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ConfigError::at(path, "URL must have a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ConfigError::at(
            path,
            "URL must not carry credentials; use the auth block",
        ));
    }
    Ok(url)
}

pub(super) fn non_empty_secret(value: &str, path: &str) -> Result<Secret, ConfigError> {
    let v = value.trim();
    if v.is_empty() {
        return Err(ConfigError::at(path, "must not be empty"));
    }
    if v.chars().any(|c| c.is_control()) {
        return Err(ConfigError::at(path, "must not contain control characters"));
    }
    Ok(Secret::new(v))
}

/// A PEM value given as text (a Gatehouse extension, recognised by `-----BEGIN`) or, as
/// the reference takes it, as the path of a file read now.
pub(super) fn pem_or_file(
    value: &str,
    path: &str,
    env: &dyn crate::deps::Environment,
) -> Result<String, ConfigError> {
    if value.contains("-----BEGIN") {
        return Ok(value.to_owned());
    }
    env.read_file(std::path::Path::new(value.trim()))
        .map_err(|e| ConfigError::at(path, format!("cannot read the PEM file: {e}")))
}

/// `CLAUDE_GATEWAY_ALLOW_LOOPBACK` (the reference's switch for loopback IdPs, collectors,
/// webhooks and CRI issuers in development): set to anything but empty, `0` or `false`.
pub fn env_allows_loopback(env: &dyn crate::deps::Environment) -> bool {
    env.var("CLAUDE_GATEWAY_ALLOW_LOOPBACK")
        .is_some_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}
