//! `admin.billing_group_tag`, as the reference applies it: for a signed-in person whose
//! session names a tag (the token's `billing_group_tag` claim, else the config's), the
//! `request-tags-2026-08-21` beta leaves `anthropic-beta` and the body's `tags` leaves the
//! body before any upstream sees them. On `/v1/messages` the value under the tag name is
//! the person's billing group when they are in that group (recorded on the `inference`
//! event as `billing_group`), else `billing_group_ignored`. Other callers are untouched.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::Value;

use crate::metering::BillingGroup;

/// The request-tags beta Claude Code sends with `tags`.
pub const REQUEST_TAGS_BETA: &str = "request-tags-2026-08-21";

/// The tag name that applies to a caller: only signed-in people have one.
pub fn tag_for<'a>(
    principal: &'a crate::auth::Principal,
    configured: Option<&'a str>,
) -> Option<&'a str> {
    match principal {
        crate::auth::Principal::Session {
            billing_group_tag, ..
        } => billing_group_tag.as_deref().or(configured),
        _ => None,
    }
}

/// Removes the request-tags beta from `anthropic-beta` (the header goes when nothing else
/// is left); other betas keep their order.
pub fn strip_beta(headers: &mut HeaderMap) {
    let values: Vec<String> = headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|b| b.trim().to_owned())
        .collect();
    if !values.iter().any(|b| b == REQUEST_TAGS_BETA) {
        return;
    }
    let kept: Vec<&str> = values
        .iter()
        .map(String::as_str)
        .filter(|b| !b.is_empty() && *b != REQUEST_TAGS_BETA)
        .collect();
    headers.remove("anthropic-beta");
    if !kept.is_empty()
        && let Ok(v) = HeaderValue::from_str(&kept.join(","))
    {
        headers.insert("anthropic-beta", v);
    }
}

#[derive(Deserialize)]
struct Tags {
    tags: Option<Value>,
}

/// The body without `tags`, and what `tags[tag]` said about the person's `groups`
/// (`None` when the body has no `tags` or no entry under the tag). A body that is not a
/// JSON object is returned as is (the JSON head check refuses it next).
pub fn strip_tags(bytes: Bytes, tag: &str, groups: &[String]) -> (Bytes, Option<BillingGroup>) {
    let Ok(Tags { tags: Some(tags) }) = serde_json::from_slice::<Tags>(&bytes) else {
        return (bytes, None);
    };
    let group = tags.as_object().and_then(|t| t.get(tag)).map(|v| match v {
        Value::String(g) if groups.contains(g) => BillingGroup::Group(g.clone()),
        _ => BillingGroup::Ignored,
    });
    match crate::upstream::body::edit(&bytes, &["tags"], &[]) {
        Ok(stripped) => (stripped, group),
        Err(_) => (bytes, group),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_beta_goes_and_the_others_stay() {
        let mut h = HeaderMap::new();
        h.append(
            "anthropic-beta",
            HeaderValue::from_static("a-1, request-tags-2026-08-21"),
        );
        h.append("anthropic-beta", HeaderValue::from_static("b-2"));
        strip_beta(&mut h);
        assert_eq!(h.get("anthropic-beta").unwrap(), "a-1,b-2");
        let mut only = HeaderMap::new();
        only.insert(
            "anthropic-beta",
            HeaderValue::from_static(REQUEST_TAGS_BETA),
        );
        strip_beta(&mut only);
        assert!(only.get("anthropic-beta").is_none());
        let mut other = HeaderMap::new();
        other.insert("anthropic-beta", HeaderValue::from_static("x, ,y"));
        strip_beta(&mut other);
        assert_eq!(other.get("anthropic-beta").unwrap(), "x, ,y", "untouched");
    }

    #[test]
    fn tags_leave_the_body_and_name_the_group() {
        let groups = vec!["eng".to_owned()];
        let body =
            Bytes::from_static(br#"{"model":"m","tags":{"cc":"eng","x":"y"},"max_tokens":1}"#);
        let (out, g) = strip_tags(body, "cc", &groups);
        assert_eq!(&out[..], br#"{"model":"m","max_tokens":1}"#);
        assert_eq!(g, Some(BillingGroup::Group("eng".into())));
        let (_, g) = strip_tags(
            Bytes::from_static(br#"{"tags":{"cc":"sales"}}"#),
            "cc",
            &groups,
        );
        assert_eq!(g, Some(BillingGroup::Ignored));
        let (_, g) = strip_tags(Bytes::from_static(br#"{"tags":{"cc":7}}"#), "cc", &groups);
        assert_eq!(g, Some(BillingGroup::Ignored));
        let (out, g) = strip_tags(
            Bytes::from_static(br#"{"tags":{"other":"eng"}}"#),
            "cc",
            &groups,
        );
        assert_eq!((&out[..], g), (&b"{}"[..], None));
        let (out, g) = strip_tags(Bytes::from_static(br#"{"model":"m"}"#), "cc", &groups);
        assert_eq!((&out[..], g), (&br#"{"model":"m"}"#[..], None));
    }
}
