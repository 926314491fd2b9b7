//! `capability_rejected: <class>`: the stable token a workload (CRI) caller gets in place of
//! an upstream's 400/413 wording ([`crate::upstream::errors::for_workload`]), so it can
//! recover (drop thinking, drop `temperature`, shorten the prompt) without seeing account
//! ids, ARNs or hosts. The classes are checked in order; the first that matches wins.
//!
//! The two classes of 2.1.334 follow the reference's patterns exactly (its regexes are
//! case-insensitive, and its `{0,4}` / `{0,80}` count UTF-16 code units, as here):
//! - `thinking_disabled_unsupported`:
//!   `/thinking\.type\.disabled[^a-z]{0,4}is not supported for this model/i` or
//!   `/turn thinking off on this model, send[^]{0,80}between_tools[^]{0,80}disabled/i`;
//! - `temperature_unsupported`: `/temperature[^a-z]{0,4}is deprecated for this model/i`;
//!
//! both after `thinking_signature` and before the classes about thinking's type.

/// A stable `capability_rejected: <class>` for an upstream error message, so a workload
/// caller learns what it can fix without seeing account ids, ARNs or hosts.
pub fn capability_reason(message: &str) -> Option<&'static str> {
    let m = message.to_ascii_lowercase();
    if m.contains("prompt is too long")
        || m.contains("input is too long")
        || m.contains("exceeds")
            && (m.contains("context") || m.contains("limit") || m.contains("maximum"))
    {
        Some("prompt_too_long")
    } else if m.contains("signature") && m.contains("thinking") {
        Some("thinking_signature")
    } else if thinking_disabled_unsupported(&m) {
        Some("thinking_disabled_unsupported")
    } else if temperature_unsupported(&m) {
        Some("temperature_unsupported")
    } else if m.contains("effort") {
        Some("effort_unsupported")
    } else if m.contains("image") {
        Some("image_block")
    } else if m.contains("thinking") {
        Some("thinking_unsupported")
    } else {
        None
    }
}

/// An explicit `thinking: {"type": "disabled"}` refused by the model (`m` lowercased).
fn thinking_disabled_unsupported(m: &str) -> bool {
    let not_letters = |c: char| !c.is_ascii_lowercase();
    let any = |_: char| true;
    ends_of(m, "thinking.type.disabled")
        .any(|at| !gap_then(m, at, 4, not_letters, "is not supported for this model").is_empty())
        || ends_of(m, "turn thinking off on this model, send").any(|at| {
            gap_then(m, at, 80, any, "between_tools")
                .into_iter()
                .any(|after| !gap_then(m, after, 80, any, "disabled").is_empty())
        })
}

/// A `temperature` the model no longer takes (`m` lowercased).
fn temperature_unsupported(m: &str) -> bool {
    ends_of(m, "temperature").any(|at| {
        !gap_then(
            m,
            at,
            4,
            |c| !c.is_ascii_lowercase(),
            "is deprecated for this model",
        )
        .is_empty()
    })
}

/// The byte offsets just past each occurrence of `needle` in `hay`.
fn ends_of<'a>(hay: &'a str, needle: &'a str) -> impl Iterator<Item = usize> + 'a {
    hay.match_indices(needle).map(|(i, s)| i + s.len())
}

/// Where `needle` ends when it follows `hay[from..]` after a gap of at most `max_units`
/// UTF-16 code units whose every character passes `gap` (every possible gap, shortest
/// first, as a regex would try them).
fn gap_then(
    hay: &str,
    from: usize,
    max_units: usize,
    gap: impl Fn(char) -> bool,
    needle: &str,
) -> Vec<usize> {
    let mut found = Vec::new();
    let (mut at, mut units) = (from, 0);
    loop {
        let rest = &hay[at..];
        if rest.starts_with(needle) {
            found.push(at + needle.len());
        }
        let Some(c) = rest.chars().next() else {
            return found;
        };
        units += c.len_utf16();
        if !gap(c) || units > max_units {
            return found;
        }
        at += c.len_utf8();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_reasons() {
        let cases = [
            (
                "prompt is too long: 210000 tokens > 200000 maximum",
                Some("prompt_too_long"),
            ),
            ("Input is too long.", Some("prompt_too_long")),
            (
                "Invalid `signature` in `thinking` block",
                Some("thinking_signature"),
            ),
            (
                "output_config.effort: Extra inputs are not permitted",
                Some("effort_unsupported"),
            ),
            (
                "messages.0.content.1.image.source: invalid",
                Some("image_block"),
            ),
            ("arn:aws:bedrock:us-east-1:123456789012 throttled", None),
        ];
        for (message, class) in cases {
            assert_eq!(capability_reason(message), class, "{message}");
        }
    }

    /// The wordings the reference's patterns take, and near misses they do not.
    #[test]
    fn thinking_disabled_unsupported_as_the_reference_matches_it() {
        let yes = [
            "thinking.type.disabled is not supported for this model",
            "`thinking.type.disabled` is not supported for this model.",
            "THINKING.TYPE.DISABLED: IS NOT SUPPORTED FOR THIS MODEL",
            "thinking.type.disabled\u{2014} is not supported for this model",
            "To turn thinking off on this model, send `thinking: {\"type\": \"adaptive\", \"display\": \"between_tools\"}` instead of disabled",
            "To turn thinking off on this model, send\nbetween_tools\ndisabled",
        ];
        for m in yes {
            assert_eq!(
                capability_reason(m),
                Some("thinking_disabled_unsupported"),
                "{m}"
            );
        }
        let long = format!(
            "turn thinking off on this model, send {} between_tools disabled",
            "x".repeat(80)
        );
        let no = [
            "thinking.type.disabled     is not supported for this model",
            "thinking.type.disabled x is not supported for this model",
            "thinking.type.enabled is not supported for this model",
            long.as_str(),
        ];
        for m in no {
            assert_ne!(
                capability_reason(m),
                Some("thinking_disabled_unsupported"),
                "{m}"
            );
        }
        // A gap of four UTF-16 units: two characters outside the BMP.
        assert_eq!(
            capability_reason(
                "thinking.type.disabled\u{1F600}\u{1F600}is not supported for this model"
            ),
            Some("thinking_disabled_unsupported")
        );
        assert_ne!(
            capability_reason(
                "thinking.type.disabled\u{1F600}\u{1F600} is not supported for this model"
            ),
            Some("thinking_disabled_unsupported")
        );
    }

    #[test]
    fn temperature_unsupported_as_the_reference_matches_it() {
        for m in [
            "`temperature` is deprecated for this model.",
            "Temperature is deprecated for this model",
            "temperature: is deprecated for this model",
        ] {
            assert_eq!(capability_reason(m), Some("temperature_unsupported"), "{m}");
        }
        for m in [
            "temperature value is deprecated for this model",
            "temperature is deprecated",
            "temperature: range 0-1",
        ] {
            assert_ne!(capability_reason(m), Some("temperature_unsupported"), "{m}");
        }
    }

    /// The order of the table: a signature complaint stays `thinking_signature`.
    #[test]
    fn the_new_classes_come_after_thinking_signature() {
        assert_eq!(
            capability_reason(
                "Invalid signature in thinking block; thinking.type.disabled is not supported for this model"
            ),
            Some("thinking_signature")
        );
        assert_eq!(
            capability_reason("thinking.type.disabled is not supported for this model (effort)"),
            Some("thinking_disabled_unsupported")
        );
    }
}
