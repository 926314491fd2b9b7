//! Tool-call and message ids across the two wires. Anthropic tool ids must match
//! `^[a-zA-Z0-9_-]+$`; OpenAI-compatible servers may use others (`functions.Bash:0`). Such an
//! id is carried as `toolu_oai_<hex>` and turned back when the result goes upstream, so the
//! provider sees its own id again.

const PREFIX: &str = "toolu_oai_";

fn safe(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The id Anthropic's side sees for an upstream tool-call id (a fresh one when missing).
pub fn to_anthropic(id: Option<&str>) -> String {
    match id {
        Some(id) if safe(id) => id.to_owned(),
        Some(id) if !id.is_empty() => format!("{PREFIX}{}", hex::encode(id)),
        _ => format!("toolu_{}", uuid::Uuid::new_v4().simple()),
    }
}

/// The id the upstream gave, from the one Anthropic's side holds.
pub fn to_openai(id: &str) -> String {
    id.strip_prefix(PREFIX)
        .and_then(|h| hex::decode(h).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .filter(|orig| !safe(orig))
        .unwrap_or_else(|| id.to_owned())
}

/// An Anthropic message id for an upstream completion id.
pub fn message(id: Option<&str>) -> String {
    match id {
        Some(id) if safe(id) && id.len() <= 64 => format!("msg_{id}"),
        _ => format!("msg_{}", uuid::Uuid::new_v4().simple()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_ids_go_round_trip_and_safe_ids_stay() {
        assert_eq!(to_anthropic(Some("call_abc-1")), "call_abc-1");
        let odd = to_anthropic(Some("functions.Bash:0"));
        assert!(safe(&odd) && odd.starts_with(PREFIX));
        assert_eq!(to_openai(&odd), "functions.Bash:0");
        assert_eq!(to_openai("toolu_01abc"), "toolu_01abc");
        // A look-alike whose decoding is itself safe is not ours: kept as it is.
        let lookalike = format!("{PREFIX}{}", hex::encode("abc"));
        assert_eq!(to_openai(&lookalike), lookalike);
        assert!(to_anthropic(None).starts_with("toolu_"));
        assert_eq!(message(Some("chatcmpl-1")), "msg_chatcmpl-1");
    }
}
