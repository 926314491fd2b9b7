//! `policyHelpers` entries beyond the shape of `settings_schema.json`: the rule the
//! reference's settings schema runs on each per-OS helper as code (a custom check, not
//! data). An entry carries `path` (a helper executable) or `script` + `interpreter` (an
//! inline helper), and/or `defaultSettings` (a static settings payload); the `default`
//! key is a static payload, not a helper.

use serde_json::{Map, Value};

use super::settings_schema::Issue;

/// The problems of the helpers in `helpers` (the `policyHelpers` value) whose own shape
/// passed: `clean(os)` says whether the schema found nothing under that entry.
pub fn entry_issues(helpers: &Value, clean: impl Fn(&str) -> bool) -> Vec<Issue> {
    let Value::Object(m) = helpers else {
        return Vec::new();
    };
    m.iter()
        .filter(|(os, _)| os.as_str() != "default" && clean(os))
        .filter_map(|(os, entry)| {
            let why = entry.as_object().and_then(problem)?;
            Some((format!("policyHelpers.{os}"), why.to_owned()))
        })
        .collect()
}

/// The reference's rule for one helper, first failing clause first.
fn problem(e: &Map<String, Value>) -> Option<&'static str> {
    let has = |k: &str| e.get(k).is_some_and(|v| !v.is_null());
    if has("path") && has("script") {
        return Some("exactly one of path/script must be configured");
    }
    if has("script") != has("interpreter") {
        return Some("\"script\" and \"interpreter\" must be configured together");
    }
    if !has("path") && !has("script") && !has("defaultSettings") {
        return Some(
            "Entry must carry \"path\" (a helper executable) or \"script\" + \"interpreter\" (an inline helper), and/or \"defaultSettings\" (a static settings payload)",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn paths(v: Value) -> Vec<String> {
        entry_issues(&v, |_| true)
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    #[test]
    fn each_helper_needs_a_path_a_script_or_default_settings() {
        let ok = json!({
            "macos": {"path": "/usr/local/bin/helper"},
            "linux": {"script": "echo {}", "interpreter": "bash"},
            "windows": {"defaultSettings": {"model": "x"}},
            "default": {}
        });
        assert!(paths(ok).is_empty());
        let bad = json!({
            "macos": {},
            "linux": {"path": "/h", "script": "x", "interpreter": "sh"},
            "windows": {"script": "x"},
            "wsl": "not a mapping"
        });
        assert_eq!(
            paths(bad),
            vec![
                "policyHelpers.macos",
                "policyHelpers.linux",
                "policyHelpers.windows"
            ]
        );
        assert!(entry_issues(&json!({"macos": {}}), |_| false).is_empty());
    }
}
