//! Bodies of the engine's fuzz targets (`fuzz/fuzz_targets/`, cargo-fuzz) and of the corpus
//! regression tests (`crates/engine/tests/fuzz_corpus.rs`): one function per target, so the
//! fuzzer and the normal test run drive the same entry points with the same checks.
//!
//! Each function takes raw input bytes. The code under test must not panic on any input;
//! the functions here panic (assert) only when an invariant of that code breaks. Not part
//! of the engine's API: nothing on a request path calls into this module.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use crate::auth::ClientKeys;
use crate::config::{Config, LoadContext, PricingConfig, WorkloadConfig};
use crate::deps::{CredentialError, CredentialStore, MapEnvironment};
use crate::identity::keys::{KeyRing, SealKind};
use crate::identity::session;
use crate::inference::body::{parse_head, traits, with_model};
use crate::metering::pricing::Pricing;
use crate::metering::usage::{SseUsageScanner, Usage, UsageSource, from_json_body};
use crate::secret::Secret;

/// The secret session tokens are signed with in the `tokens` target (a fixed test value).
pub const SESSION_SECRET: &str = "fuzzing-session-secret-not-a-real-secret-0001";
/// The issuer (public URL) of those session tokens.
pub const SESSION_ISSUER: &str = "https://gw.fuzz.example";
/// The one client key the `tokens` target configures.
pub const CLIENT_KEY: &str = "gh-fuzz-client-key-0123456789abcdef0123456789";
/// "Now" for every time check, in Unix seconds (2025-10-09).
pub const NOW: i64 = 1_760_000_000;
/// The workload issuer, audience and allowed org of the `tokens` target.
pub const WORKLOAD_ISSUER: &str = "https://issuer.fuzz.example";
pub const WORKLOAD_AUDIENCE: &str = "gatehouse";
pub const WORKLOAD_ORG: &str = "org-fuzz";
/// The public half (P-256 `x`, `y`) of the key workload tokens are checked with. The
/// private half was thrown away after signing the seed tokens in the corpus.
pub const WORKLOAD_KEY_X: &str = "bA4zsRtMmWKjmzUnSM0gmMX4sBhjehm_WNZYX-4DEJo";
pub const WORKLOAD_KEY_Y: &str = "fKkULoa-YN0KELAbJAsk3pot0yCy7CHD71X-qv5I3cM";

/// Values `${...}` resolve to in the `config` target; no error may repeat them.
const ENV_SECRET: &str = "envsecret-Zq8w3Kd9";
const FILE_SECRET: &str = "filesecret-Xv5t2Lp7";
const KEYRING_SECRET: &str = "keysecret-Mn4r6Hc1";

// ---------------------------------------------------------------------------------------
// sse_usage: the SSE usage scanner, the JSON usage reader and pricing of what they read.

/// Byte 0 picks a cut; the rest is a response body. The usage must not depend on how the
/// body is cut into chunks, every reported count must come from the body, and pricing a
/// non-zero usage never costs nothing.
pub fn sse_usage(data: &[u8]) {
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let whole = scan(&[body]);
    let at = usize::from(cut) * body.len() / 255;
    let (a, b) = body.split_at(at);
    assert_eq!(
        scan(&[a, b]),
        whole,
        "cutting the stream at {at} changed the usage"
    );
    if body.len() <= 1024 {
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(
            scan(&bytes),
            whole,
            "byte-by-byte feeding changed the usage"
        );
    }
    let given = numbers_in(body);
    let (usage, source, _) = whole;
    check_given(&usage, &given, source == UsageSource::Estimated, body.len());
    check_price(&usage);
    if let Some(u) = from_json_body(body) {
        check_given(&u, &given, false, 0);
        check_price(&u);
    }
}

fn scan(chunks: &[&[u8]]) -> (Usage, UsageSource, bool) {
    let mut s = SseUsageScanner::default();
    for c in chunks {
        s.feed(c);
    }
    let (u, src) = s.result();
    (u, src, s.saw_error())
}

/// Every decimal number written in `body` (a superset of the JSON integers in it).
fn numbers_in(body: &[u8]) -> HashSet<u64> {
    body.split(|b| !b.is_ascii_digit())
        .filter_map(|run| std::str::from_utf8(run).ok()?.parse().ok())
        .collect()
}

/// The scanner never reports usage it was not given: each count is 0 or a number in the
/// body; the 5-minute cache writes may be a reported total minus the 1-hour writes; an
/// estimate may add output tokens from the text it saw.
fn check_given(u: &Usage, given: &HashSet<u64>, estimated: bool, body_len: usize) {
    let seen = |v: u64| v == 0 || given.contains(&v);
    assert!(
        seen(u.input_tokens),
        "input_tokens {} not in the body",
        u.input_tokens
    );
    assert!(
        seen(u.cache_read_tokens),
        "cache_read {} not given",
        u.cache_read_tokens
    );
    assert!(
        seen(u.web_search_requests),
        "web_search {} not given",
        u.web_search_requests
    );
    assert!(
        seen(u.cache_write_1h_tokens),
        "1h writes {} not given",
        u.cache_write_1h_tokens
    );
    let total = u.cache_write_5m_tokens.checked_add(u.cache_write_1h_tokens);
    assert!(
        seen(u.cache_write_5m_tokens) || total.is_some_and(|t| given.contains(&t)),
        "5m writes {} neither given nor a given total",
        u.cache_write_5m_tokens
    );
    let estimate = (body_len as u64).div_ceil(4);
    assert!(
        seen(u.output_tokens) || estimated && u.output_tokens <= estimate,
        "output_tokens {} not given (estimate bound {estimate})",
        u.output_tokens
    );
}

fn check_price(u: &Usage) {
    let pricing = Pricing::new(PricingConfig {
        multiplier: 1.0,
        overrides: Vec::new(),
        default: None,
    });
    for model in ["claude-haiku-5-5", "claude-opus-5-5", "not-a-claude-model"] {
        let (cost, _) = pricing.cost_micro_usd(model, u);
        if *u != Usage::default() {
            assert!(cost > 0, "{model}: a non-zero usage cost nothing: {u:?}");
        }
        let no_output = Usage {
            output_tokens: 0,
            ..*u
        };
        assert!(
            pricing.cost_micro_usd(model, &no_output).0 <= cost,
            "{model}: not monotone"
        );
    }
}

// ---------------------------------------------------------------------------------------
// json_head: the request body head and the model rewrite.

/// A request body: `parse_head` answers 400 or agrees with a full JSON parse, the model
/// rewrite changes `model` and nothing else, and the routing rules' `traits` read any body
/// `parse_head` accepted and agree with the full parse on thinking.
pub fn json_head(data: &[u8]) {
    let head = match parse_head(data, true) {
        Ok(h) => h,
        Err(e) => {
            assert_eq!(e.outcome().0.as_u16(), 400, "{e}");
            return;
        }
    };
    let t = traits(data).expect("traits of a body parse_head accepted");
    assert_eq!(t.est_input_tokens, (data.len() / 4) as u64);
    let rewritten = with_model(data, "fuzz/model \"\u{e9}\"").expect("rewrite of a valid body");
    let again = parse_head(&rewritten, true).expect("the rewritten body parses");
    assert_eq!(again.model, "fuzz/model \"\u{e9}\"");
    assert_eq!(
        (again.stream, again.max_tokens),
        (head.stream, head.max_tokens)
    );
    let full: Value = match serde_json::from_slice(data) {
        Ok(v) => v,
        // Where the tree is stricter than JSON: it stops at 128 levels and refuses lone
        // surrogates (`\ud800`) and numbers beyond f64, which JSON's grammar allows. The
        // head parser skips nested values without recursing or decoding, so such bodies pass
        // to the upstream as they are (fuzz/corpus/json_head/lone-surrogate-nested.json,
        // number-beyond-f64-nested.json).
        Err(e) if tree_limit(&e) => return,
        Err(e) => panic!("parse_head accepted invalid JSON: {e}"),
    };
    let obj = full.as_object().expect("parse_head accepted a non-object");
    let thinking = obj
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|k| matches!(k, "enabled" | "adaptive"));
    assert_eq!(t.thinking, thinking, "traits disagree on thinking");
    assert_eq!(
        obj.get("model").and_then(Value::as_str),
        Some(head.model.as_str())
    );
    assert!(!head.model.trim().is_empty());
    let stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
    assert_eq!(head.stream, stream);
    assert_eq!(
        head.max_tokens,
        obj.get("max_tokens").and_then(Value::as_u64)
    );
    let mut expected = full.clone();
    expected["model"] = Value::String(again.model.clone());
    let got: Value = serde_json::from_slice(&rewritten).expect("rewritten body is JSON");
    assert_eq!(got, expected, "the rewrite changed more than `model`");
}

fn tree_limit(e: &serde_json::Error) -> bool {
    let m = e.to_string();
    [
        "recursion limit exceeded",
        "surrogate",
        "hex escape",
        "unicode code point",
        "number out of range",
    ]
    .iter()
    .any(|limit| m.contains(limit))
}

// ---------------------------------------------------------------------------------------
// config: YAML loading, `${...}` expansion and validation.

struct FuzzCredentials;

impl CredentialStore for FuzzCredentials {
    fn get(&self, service: &str, account: &str) -> Result<Option<Secret>, CredentialError> {
        Ok(((service, account) == ("gatehouse", "fuzz")).then(|| Secret::new(KEYRING_SECRET)))
    }
    fn set(&self, _: &str, _: &str, _: &Secret) -> Result<(), CredentialError> {
        Err(CredentialError::Unavailable("read-only".into()))
    }
    fn delete(&self, _: &str, _: &str) -> Result<(), CredentialError> {
        Err(CredentialError::Unavailable("read-only".into()))
    }
}

fn fuzz_env() -> MapEnvironment {
    MapEnvironment::default()
        .with_var("HOST", "gw.fuzz.example")
        .with_var("PORT", "8443")
        .with_var("CLIENT_KEY", CLIENT_KEY)
        .with_var("SECRET", ENV_SECRET)
        .with_file("/run/secrets/key", &format!("  {FILE_SECRET}\n"))
}

/// A config file: loading never panics and no error repeats a value a reference resolved
/// to; expanding a tree without `${` changes nothing, and a successful expansion leaves none.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let env = fuzz_env();
    let ctx = LoadContext {
        env: &env,
        credentials: &FuzzCredentials,
        default_data_dir: PathBuf::from("/var/lib/gatehouse-fuzz"),
    };
    if let Err(e) = Config::from_yaml(text, &ctx) {
        let message = e.to_string();
        for secret in [ENV_SECRET, FILE_SECRET, KEYRING_SECRET] {
            assert!(
                text.contains(secret) || !message.contains(secret),
                "a config error repeats a resolved value: {message}"
            );
        }
    }
    check_expansion(text, &env);
}

fn check_expansion(text: &str, env: &MapEnvironment) {
    let Ok(tree) = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text) else {
        return;
    };
    let mut expanded = tree.clone();
    let result =
        crate::config::expand::Expander::new(env, &FuzzCredentials).expand(&mut expanded, "");
    if !any_string(&tree, &|s| s.contains("${")) {
        assert!(result.is_ok(), "no reference, yet {result:?}");
        assert_eq!(expanded, tree, "expansion without `${{` changed the tree");
    } else if result.is_ok() {
        assert!(
            !any_string(&expanded, &|s| s.contains("${")),
            "a reference survived"
        );
    }
}

/// Whether a string value (not a key) anywhere in `v` satisfies `f`.
fn any_string(v: &serde_yaml_ng::Value, f: &dyn Fn(&str) -> bool) -> bool {
    use serde_yaml_ng::Value as Y;
    match v {
        Y::String(s) => f(s),
        Y::Sequence(items) => items.iter().any(|i| any_string(i, f)),
        Y::Mapping(m) => m.values().any(|i| any_string(i, f)),
        Y::Tagged(t) => any_string(&t.value, f),
        Y::Null | Y::Bool(_) | Y::Number(_) => false,
    }
}

// ---------------------------------------------------------------------------------------
// tokens: presented credentials, session tokens, workload tokens, sealed refresh tokens.

/// Byte 0 picks a mode. 0: the rest is a presented credential (header parsing, client key
/// lookup, session and workload verification, sealed-value opening: only what was really
/// made with the fixed keys may pass). 1: the rest is a session token's header and claims
/// (split at the first 0xFF byte), signed with the session key: verification must hold its
/// rules on validly signed input. 2: the rest is a workload token's claims, checked as if
/// the signature held.
pub fn tokens(data: &[u8]) {
    match data.split_first() {
        Some((m, rest)) if m % 3 == 0 => presented(rest),
        Some((m, rest)) if m % 3 == 1 => signed_session(rest),
        Some((_, rest)) => workload_claims(rest),
        None => {}
    }
}

fn ring() -> KeyRing {
    KeyRing::new(&[Secret::new(SESSION_SECRET)])
}

fn workload_config() -> WorkloadConfig {
    WorkloadConfig {
        issuer: WORKLOAD_ISSUER.into(),
        jwks_url: url::Url::parse("https://issuer.fuzz.example/jwks").expect("fixed URL"),
        audience: vec![WORKLOAD_AUDIENCE.into()],
        org_allowlist: vec![WORKLOAD_ORG.into()],
    }
}

fn presented(data: &[u8]) {
    let Ok(value) = http::HeaderValue::from_bytes(data) else {
        return;
    };
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::AUTHORIZATION, value.clone());
    headers.insert("x-api-key", value);
    let keys = ClientKeys::new([("ci".to_owned(), ClientKeys::hash(CLIENT_KEY))]);
    let header = String::from_utf8_lossy(data);
    for token in crate::auth::presented(&headers) {
        assert!(
            !token.is_empty() && token.trim() == token,
            "untrimmed {token:?}"
        );
        assert!(header.contains(token), "{token:?} is not in the header");
        assert_eq!(keys.find(token).is_some(), token == CLIENT_KEY);
        check_session(token);
        check_workload(token);
        let _ = ring().open::<Value>(SealKind::RefreshToken, token);
    }
}

/// A session token verifies only when its signature is the HMAC of its first two parts.
fn check_session(token: &str) {
    let Ok(claims) = session::verify(&ring(), SESSION_ISSUER, token, now(), i64::MAX) else {
        return;
    };
    let (signed, signature) = token.rsplit_once('.').expect("a verified token has parts");
    let key = jsonwebtoken::EncodingKey::from_secret(SESSION_SECRET.as_bytes());
    let expected =
        jsonwebtoken::crypto::sign(signed.as_bytes(), &key, jsonwebtoken::Algorithm::HS256)
            .expect("HMAC signing");
    assert_eq!(
        signature, expected,
        "a token verified without a valid signature"
    );
    check_session_claims(&claims);
}

fn check_session_claims(c: &session::SessionClaims) {
    assert_eq!(c.iss, SESSION_ISSUER);
    assert_eq!(c.aud, session::AUDIENCE);
    let (now, leeway) = (i128::from(NOW), i128::from(session::LEEWAY_SECS));
    assert!(i128::from(c.exp) + leeway > now, "expired token accepted");
    assert!(
        i128::from(c.iat) - leeway <= now,
        "token from the future accepted"
    );
    assert!(
        c.nbf.is_none_or(|n| i128::from(n) - leeway <= now),
        "nbf ignored"
    );
}

/// A workload token is forged (nobody holds the private key) unless it is a corpus seed;
/// whatever passes must satisfy the claim rules.
fn check_workload(token: &str) {
    let is_workload = crate::workload::is_workload_token(token);
    let Ok(kid) = crate::workload::check_header(token) else {
        return;
    };
    assert!(
        is_workload,
        "the header check passed a token that is not a workload token"
    );
    assert!(!kid.is_empty());
    let jwk = serde_json::json!({"kty": "EC", "crv": "P-256", "kid": "k",
                                 "x": WORKLOAD_KEY_X, "y": WORKLOAD_KEY_Y});
    let (_, key) = crate::workload::keys::VerifyKey::from_jwk(&jwk).expect("fixed P-256 key");
    if let Ok(w) = crate::workload::check_token(token, &key, &workload_config(), NOW) {
        check_workload_result(&w);
    }
}

fn check_workload_result(w: &crate::workload::Workload) {
    assert_eq!(w.org, WORKLOAD_ORG);
    assert!(!w.sub.trim().is_empty());
}

fn now() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(NOW, 0).expect("fixed time")
}

fn signed_session(data: &[u8]) {
    let ring = ring();
    let (kid, key) = ring.signing().expect("one key");
    let (header, claims) = match data.iter().position(|&b| b == 0xFF) {
        Some(i) => (data[..i].to_vec(), &data[i + 1..]),
        None => {
            let h = format!(r#"{{"alg":"HS256","typ":"JWT","kid":"{kid}"}}"#);
            (h.into_bytes(), data)
        }
    };
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(claims)
    );
    let signature =
        jsonwebtoken::crypto::sign(signed.as_bytes(), key, jsonwebtoken::Algorithm::HS256)
            .expect("HMAC signing");
    let token = format!("{signed}.{signature}");
    if let Ok(c) = session::verify(&ring, SESSION_ISSUER, &token, now(), i64::MAX) {
        check_session_claims(&c);
    }
}

fn workload_claims(data: &[u8]) {
    let Ok(claims) = serde_json::from_slice::<crate::workload::Claims>(data) else {
        return;
    };
    let Ok(w) = crate::workload::check_claims(claims, &workload_config(), NOW) else {
        return;
    };
    check_workload_result(&w);
    // Read the same bytes the same way (unknown claims skipped, not decoded).
    #[derive(serde::Deserialize)]
    struct Times {
        exp: i64,
        iat: i64,
        nbf: Option<i64>,
        scope: String,
    }
    let c: Times = serde_json::from_slice(data).expect("the claims were read once already");
    let (now, leeway) = (i128::from(NOW), 60i128);
    assert!(i128::from(c.exp) + leeway > now, "expired claims accepted");
    assert!(
        i128::from(c.iat) - leeway <= now,
        "claims from the future accepted"
    );
    assert!(
        c.nbf.is_none_or(|n| i128::from(n) - leeway <= now),
        "nbf ignored"
    );
    assert_eq!(c.scope, "inference");
}

// ---------------------------------------------------------------------------------------
// chat: the OpenAI front door's request translation and its stream translation.

/// Byte 0 picks a cut; the rest is both an OpenAI request body and an Anthropic SSE body.
/// The request translation answers 400 or gives a Messages body the head parser reads the
/// same way, with strictly alternating turns and a temperature in Anthropic's range; the
/// stream translation emits only `data:` events of JSON, whatever the cut, ends with
/// `[DONE]` (once, last) or an error event, and does not depend on how the body is cut.
pub fn chat(data: &[u8]) {
    use crate::inference::chat::{self, Context, stream};
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    match chat::request(body, NOW) {
        Err(e) => assert_eq!(e.outcome().0.as_u16(), 400, "{e}"),
        Ok((translated, ctx)) => {
            let head = parse_head(&translated, true).expect("a translated body parses");
            assert_eq!(head.model, ctx.model);
            assert!(head.max_tokens.is_some_and(|n| n > 0));
            let v: Value = serde_json::from_slice(&translated).expect("JSON");
            let roles: Vec<&str> = v["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .map(|m| m["role"].as_str().expect("a role"))
                .collect();
            assert!(!roles.is_empty());
            assert!(roles.windows(2).all(|w| w[0] != w[1]), "{roles:?}");
            if let Some(t) = v.get("temperature") {
                assert!((0.0..=1.0).contains(&t.as_f64().expect("a number")));
            }
        }
    }
    let translate = |pieces: &[&[u8]]| {
        let ctx = Context {
            model: "m".into(),
            created: NOW,
            include_usage: cut % 2 == 0,
        };
        let mut t = stream::Translator::new(ctx);
        let mut d = stream::Decoder::default();
        let mut out = Vec::new();
        for p in pieces {
            match d.feed(p, &mut t) {
                Ok(events) => out.extend(events),
                Err(stream::EventTooLarge) => break,
            }
        }
        out.extend(t.end("ended"));
        out.concat()
    };
    let at = usize::from(cut).min(body.len());
    let whole = translate(&[body]);
    assert_eq!(whole, translate(&[&body[..at], &body[at..]]), "cut at {at}");
    let text = std::str::from_utf8(&whole).expect("UTF-8 events");
    let events: Vec<&str> = text.split_terminator("\n\n").collect();
    assert!(
        !events.is_empty(),
        "a stream always ends with [DONE] or an error"
    );
    for (i, e) in events.iter().enumerate() {
        let payload = e.strip_prefix("data: ").expect("a data event");
        if payload == "[DONE]" {
            assert_eq!(i, events.len() - 1, "[DONE] is last");
            continue;
        }
        let v: Value = serde_json::from_str(payload).expect("JSON event");
        if v.get("error").is_some() {
            assert_eq!(i, events.len() - 1, "an error ends the stream");
        }
    }
}

/// An OpenAI-compatible upstream's answer (`upstream::openai`): byte 0 picks a chunk size,
/// the rest is the body. As a stream, the Anthropic events do not depend on how the bytes
/// are cut, there is one `message_start` first (or only an `error`), blocks open and close one at a time with
/// consecutive indices, and the events end with `message_stop` or an `error`. As a JSON
/// completion, the Message has a `msg_` id, a content array and a known stop reason.
pub fn openai_answer(data: &[u8]) {
    use crate::upstream::openai::{response, stream};
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let events = |size: usize| {
        let mut lines = stream::DataLines::default();
        let mut t = stream::Translator::new("m");
        let mut out = Vec::new();
        for piece in body.chunks(size.max(1)) {
            match lines.push(piece) {
                Ok(datas) => datas.iter().for_each(|d| out.extend(t.data(d))),
                Err(_) => return None,
            }
        }
        if let Some(rest) = lines.flush() {
            out.extend(t.data(&rest));
        }
        out.extend(t.finish());
        Some(out)
    };
    let whole = events(body.len());
    let cut_up = events(usize::from(cut % 16) + 1);
    let (Some(whole), Some(cut_up)) = (whole, cut_up) else {
        return;
    };
    // Generated ids (a chunk without one) differ between runs; everything else may not.
    let strip = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .map(|e| {
                let mut e = e.clone();
                e["message"]["id"] = Value::Null;
                e["content_block"]["id"] = Value::Null;
                e
            })
            .collect()
    };
    assert_eq!(
        strip(&whole),
        strip(&cut_up),
        "events depend on the chunking"
    );
    let kinds: Vec<&str> = whole.iter().filter_map(|e| e["type"].as_str()).collect();
    // An error before anything else is the whole stream (as Anthropic's can be).
    if kinds != ["error"] {
        assert_eq!(kinds.first(), Some(&"message_start"), "{kinds:?}");
        assert_eq!(kinds.iter().filter(|k| **k == "message_start").count(), 1);
    }
    assert!(
        matches!(kinds.last(), Some(&"message_stop" | &"error")),
        "{kinds:?}"
    );
    let (mut open, mut next) = (None::<u64>, 0u64);
    for e in &whole {
        let index = e["index"].as_u64();
        match e["type"].as_str() {
            Some("content_block_start") => {
                assert!(open.is_none() && index == Some(next), "{whole:?}");
                open = index;
            }
            Some("content_block_delta") => assert!(open.is_some() && open == index),
            Some("content_block_stop") => {
                assert!(open.is_some() && open == index, "{whole:?}");
                open = None;
                next += 1;
            }
            Some("message_delta" | "message_stop") => assert!(open.is_none()),
            _ => {}
        }
    }
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        let m = response::translate(&v, "m");
        assert!(m["id"].as_str().is_some_and(|id| id.starts_with("msg_")));
        assert!(m["content"].is_array());
        let stops = ["end_turn", "max_tokens", "tool_use", "refusal"];
        assert!(stops.contains(&m["stop_reason"].as_str().unwrap_or_default()));
    }
}
