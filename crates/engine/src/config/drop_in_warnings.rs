//! What keeps drop-in honest: warnings for values the reference accepts (so Gatehouse
//! does too) that do not do what they seem to ([`check`]), and notes naming each default
//! in which Gatehouse is deliberately safer than the reference ([`safer_defaults`]).

use std::collections::HashMap;

use super::identity::MAX_SESSION_TTL_HOURS;
use super::raw::RawConfig;
use super::validate::{DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_URL_LENGTH};
use super::warnings::ConfigWarning;

/// Every such warning about `raw` (already validated).
pub(super) fn check(raw: &RawConfig) -> Vec<ConfigWarning> {
    let mut out = Vec::new();
    accepted_oddities(raw, &mut out);
    telemetry(raw, &mut out);
    out
}

fn accepted_oddities(raw: &RawConfig, out: &mut Vec<ConfigWarning>) {
    if let Some(ttl) = raw.session.as_ref().and_then(|s| s.ttl_hours) {
        if ttl.is_nan() || ttl <= 0.0 {
            out.push(ConfigWarning::at(
                "session.ttl_hours",
                format!("is {ttl}: every session expires as it is issued, so nobody stays signed in. Set a number of hours (default 1)"),
            ));
        } else if ttl > 720.0 {
            out.push(ConfigWarning::at(
                "session.ttl_hours",
                format!("is {ttl}: a stolen session stays usable for over 30 days (at most {MAX_SESSION_TTL_HOURS} hours are applied); revocation and the refresh grant are the usual way to keep people signed in"),
            ));
        }
    }
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, m) in raw.models.iter().enumerate() {
        if let Some(j) = first.get(m.id.as_str()) {
            out.push(ConfigWarning::at(
                &format!("models[{i}].id"),
                format!("repeats models[{j}].id `{}`: models[{j}] serves it and this entry is ignored; remove one", m.id),
            ));
        } else {
            first.insert(&m.id, i);
        }
    }
    if raw.auto_include_builtin_models == Some(false) && raw.models.is_empty() {
        out.push(ConfigWarning::at(
            "auto_include_builtin_models",
            "is false and `models` lists nothing: this gateway serves no model, so every inference request is refused. List models, or leave auto_include_builtin_models out",
        ));
    }
    if let Some(url) = raw
        .listen
        .public_url
        .as_deref()
        .and_then(|u| url::Url::parse(u).ok())
        && (url.query().is_some() || url.fragment().is_some())
    {
        out.push(ConfigWarning::at(
            "listen.public_url",
            "has a query or fragment, which no URL built on it can keep: they are dropped",
        ));
    }
}

fn telemetry(raw: &RawConfig, out: &mut Vec<ConfigWarning>) {
    let Some(t) = &raw.telemetry else { return };
    for (i, d) in t.forward_to.iter().enumerate() {
        let path = format!("telemetry.forward_to[{i}]");
        if !(d.metrics.unwrap_or(true) || d.logs.unwrap_or(false) || d.traces.unwrap_or(false)) {
            out.push(ConfigWarning::at(
                &path,
                "forwards no signal (metrics, logs and traces are all off), so nothing is sent to it; turn one on or remove the entry",
            ));
        }
        for name in d.headers.keys() {
            if http::HeaderName::from_bytes(name.as_bytes())
                .is_ok_and(|n| super::telemetry::is_relay_header(&n))
            {
                out.push(ConfigWarning::at(
                    &format!("{path}.headers.{name}"),
                    "is set by the relay itself for each export; the configured value is not sent",
                ));
            }
        }
    }
}

/// Defaults where Gatehouse is stricter than the reference, said where the file relies
/// on them (`Config.differing_defaults`).
pub(super) fn safer_defaults(raw: &RawConfig) -> Vec<ConfigWarning> {
    let mut out = Vec::new();
    let fail_closed_set = raw
        .enforcement
        .as_ref()
        .is_some_and(|e| e.fail_closed_on_error.is_some());
    if raw.admin.is_some() && !fail_closed_set {
        out.push(ConfigWarning::at(
            "enforcement.fail_closed_on_error",
            "is not set: Gatehouse then refuses capped inference while spend limits cannot be read (fails closed), where the reference lets it through (fails open). Set it to false for the reference's behaviour, or to true to say so",
        ));
    }
    let mut unset = Vec::new();
    if raw.limits.max_request_header_bytes.is_none() {
        unset.push(format!(
            "max_request_header_bytes {DEFAULT_MAX_HEADER_BYTES} (431 above)"
        ));
    }
    if raw.limits.max_url_length.is_none() {
        unset.push(format!(
            "max_url_length {DEFAULT_MAX_URL_LENGTH} (414 above)"
        ));
    }
    if !unset.is_empty() {
        out.push(ConfigWarning::at(
            "limits",
            format!(
                "Gatehouse applies {} where the reference checks nothing when the key is unset; set the key to choose another value",
                unset.join(" and ")
            ),
        ));
    }
    out
}
