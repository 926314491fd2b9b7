//! The create-or-replace body of `POST /v1/organizations/spend_limits`, checked field by
//! field in the reference's order and with its messages (`<path>: <problem>`, the first
//! problem only), so a tool written against the reference reads the same 400s here.
//! Unknown fields are ignored, as the reference ignores them.
//!
//! Two Gatehouse extensions: `model` (a Claude model family, `opus`, `sonnet`, `haiku`, …
//! see [`crate::spend::family`]; absent or `null`: every model) and `period: "total"`
//! (lifetime spend, never reset). The 400 for an unknown period keeps the reference's
//! wording, which names only its own three.

use serde_json::{Map, Value};

use crate::spend::{Family, Period, ScopeType};

/// Amounts are whole cents of at most this many digits (the reference allows 18; micro-USD
/// arithmetic needs the cap times 10 000 to stay within 2^53).
const MAX_AMOUNT_DIGITS: usize = 15;

/// A checked upsert: `amount` is `None` when the field is absent, `Some(None)` for `null`.
#[derive(Debug, PartialEq, Eq)]
pub struct Upsert {
    pub scope: ScopeType,
    pub scope_id: String,
    pub period: Period,
    /// The family the limit binds (`None`: every model).
    pub model: Option<Family>,
    pub amount: Option<Option<i64>>,
    /// `pooled_budget`, when sent as an object.
    pub pooled: Option<PooledPatch>,
}

/// The fields of a `pooled_budget` object: absent fields keep what is stored.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PooledPatch {
    /// `None` absent, `Some(None)` for `null`.
    pub amount: Option<Option<i64>>,
    /// `null` is as absent.
    pub paused: Option<bool>,
}

impl PooledPatch {
    /// It asks to start or change a shared budget (an amount, or `paused: false`).
    pub fn asks(&self) -> bool {
        self.paused == Some(false) || matches!(self.amount, Some(Some(_)))
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn expected(path: &str, what: &str, got: &Value) -> String {
    let at = if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    };
    format!("{at}Expected {what}, received {}", kind(got))
}

fn object<'a>(path: &str, v: &'a Value) -> Result<&'a Map<String, Value>, String> {
    v.as_object().ok_or_else(|| expected(path, "object", v))
}

fn non_empty(path: &str, v: Option<&Value>) -> Result<String, String> {
    match v {
        None => Err(format!("{path}: Required")),
        Some(Value::String(s)) if s.is_empty() => Err(format!(
            "{path}: String must contain at least 1 character(s)"
        )),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(expected(path, "string", other)),
    }
}

fn scope(v: Option<&Value>) -> Result<(ScopeType, String), String> {
    let v = v.ok_or("scope: Required")?;
    let o = object("scope", v)?;
    match o.get("type").and_then(Value::as_str) {
        Some("user") => Ok((
            ScopeType::User,
            non_empty("scope.user_id", o.get("user_id"))?,
        )),
        Some("rbac_group") => Ok((
            ScopeType::RbacGroup,
            non_empty("scope.rbac_group_id", o.get("rbac_group_id"))?,
        )),
        Some("organization") => Ok((ScopeType::Organization, String::new())),
        _ => Err(
            "scope.type: Invalid discriminator value. Expected 'user' | 'rbac_group' | \
                  'organization'"
                .into(),
        ),
    }
}

/// `amount`-shaped values: a string of whole cents or `null`.
fn cents(path: &str, v: &Value) -> Result<Option<i64>, String> {
    match v {
        Value::Null => Ok(None),
        Value::String(s)
            if !s.is_empty() && s.len() <= 18 && s.bytes().all(|c| c.is_ascii_digit()) =>
        {
            if s.len() > MAX_AMOUNT_DIGITS {
                return Err(format!(
                    "{path}: at most {MAX_AMOUNT_DIGITS} digits on this gateway"
                ));
            }
            s.parse::<i64>()
                .map(Some)
                .map_err(|_| format!("{path}: must be a whole-number decimal string of cents"))
        }
        Value::String(_) => Err(format!(
            "{path}: must be a whole-number decimal string of cents"
        )),
        other => Err(expected(path, "string", other)),
    }
}

fn period(v: Option<&Value>) -> Result<Period, String> {
    const ONE_OF: &str = "'daily' | 'weekly' | 'monthly'";
    match v {
        None => Ok(Period::Monthly),
        Some(Value::String(s)) => Period::parse(s).ok_or_else(|| {
            format!("period: Invalid enum value. Expected {ONE_OF}, received '{s}'")
        }),
        Some(other) => Err(format!(
            "period: Expected {ONE_OF}, received {}",
            kind(other)
        )),
    }
}

fn currency(path: &str, v: Option<&Value>) -> Result<(), String> {
    match v {
        None => Ok(()),
        Some(Value::String(s)) if s == "USD" => Ok(()),
        Some(_) => Err(format!("{path}: Invalid literal value, expected \"USD\"")),
    }
}

/// `model`: a Claude model family, or `null` / absent for every model.
fn model(v: Option<&Value>) -> Result<Option<Family>, String> {
    let one_of = || {
        format!(
            "model: must be one of {} (a Claude model family) or null",
            Family::one_of()
        )
    };
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Family::parse(s).map(Some).ok_or_else(one_of),
        Some(other) => Err(expected("model", "string", other)),
    }
}

/// `pooled_budget` (`None` when absent or `null`).
fn pooled(v: Option<&Value>) -> Result<Option<PooledPatch>, String> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let o = object("pooled_budget", v)?;
    let amount = match o.get("amount") {
        None => None,
        Some(a) => Some(cents("pooled_budget.amount", a)?),
    };
    let paused = match o.get("paused") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => return Err(expected("pooled_budget.paused", "boolean", other)),
    };
    currency("pooled_budget.currency", o.get("currency"))?;
    Ok(Some(PooledPatch { amount, paused }))
}

/// The body checked as the reference checks it; `Err` is the 400's message.
pub fn parse(bytes: &[u8]) -> Result<Upsert, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|_| "invalid JSON body".to_owned())?;
    let o = object("", &v)?;
    let (scope, scope_id) = scope(o.get("scope"))?;
    let amount = o.get("amount").map(|a| cents("amount", a)).transpose()?;
    let period = period(o.get("period"))?;
    let model = model(o.get("model"))?;
    currency("currency", o.get("currency"))?;
    let pooled = pooled(o.get("pooled_budget"))?;
    if amount.is_none() && o.get("pooled_budget").is_none_or(Value::is_null) {
        return Err("amount: Required".into());
    }
    if pooled.as_ref().is_some_and(PooledPatch::asks) {
        if scope != ScopeType::RbacGroup {
            return Err("Pooled budget fields can only be set on a group-level limit".into());
        }
        if period != Period::Monthly {
            return Err(
                "Pooled budgets are monthly only. Set pooled fields on the group's \
                        monthly limit."
                    .into(),
            );
        }
    }
    if model.is_some() && o.get("pooled_budget").is_some_and(|p| !p.is_null()) {
        return Err(
            "pooled_budget: a shared budget is set on a group's monthly limit of \
                    every model, not on one with model"
                .into(),
        );
    }
    Ok(Upsert {
        scope,
        scope_id,
        period,
        model,
        amount,
        pooled,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn err(body: &str) -> String {
        parse(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn messages_are_the_references() {
        assert_eq!(err("nope"), "invalid JSON body");
        assert_eq!(err("[]"), "Expected object, received array");
        assert_eq!(err("null"), "Expected object, received null");
        assert_eq!(err("{}"), "scope: Required");
        assert_eq!(
            err(r#"{"scope":"x"}"#),
            "scope: Expected object, received string"
        );
        assert!(
            err(r#"{"scope":{"type":"team"}}"#).starts_with("scope.type: Invalid discriminator")
        );
        assert_eq!(
            err(r#"{"scope":{"type":"user"},"amount":"1"}"#),
            "scope.user_id: Required"
        );
        assert_eq!(
            err(r#"{"scope":{"type":"user","user_id":""},"amount":"1"}"#),
            "scope.user_id: String must contain at least 1 character(s)"
        );
        assert_eq!(
            err(r#"{"scope":{"type":"organization"},"amount":100}"#),
            "amount: Expected string, received number"
        );
        assert_eq!(
            err(r#"{"scope":{"type":"organization"},"amount":"1.5"}"#),
            "amount: must be a whole-number decimal string of cents"
        );
        assert_eq!(
            err(r#"{"scope":{"type":"organization"},"amount":"1","period":"yearly"}"#),
            "period: Invalid enum value. Expected 'daily' | 'weekly' | 'monthly', received 'yearly'"
        );
        assert_eq!(
            err(r#"{"scope":{"type":"organization"},"amount":"1","currency":"EUR"}"#),
            "currency: Invalid literal value, expected \"USD\""
        );
        assert_eq!(
            err(r#"{"scope":{"type":"organization"},"period":"daily"}"#),
            "amount: Required"
        );
        assert_eq!(
            err(r#"{"scope":{"type":"organization"},"amount":"1","pooled_budget":{"amount":"5"}}"#),
            "Pooled budget fields can only be set on a group-level limit"
        );
    }

    #[test]
    fn defaults_and_unknown_fields() {
        let u = parse(br#"{"scope":{"type":"organization"},"amount":null,"extra":1}"#).unwrap();
        assert_eq!(u.period, Period::Monthly);
        assert_eq!(u.amount, Some(None));
        assert!(u.pooled.is_none());
        let u = parse(br#"{"scope":{"type":"rbac_group","rbac_group_id":"eng"},"amount":"7","period":"monthly","pooled_budget":{"amount":"50"}}"#).unwrap();
        assert_eq!(
            (u.scope, u.scope_id.as_str(), u.amount),
            (ScopeType::RbacGroup, "eng", Some(Some(7)))
        );
        assert_eq!(
            u.pooled,
            Some(PooledPatch {
                amount: Some(Some(50)),
                paused: None
            })
        );
    }

    #[test]
    fn model_and_total_are_extensions() {
        let u = parse(br#"{"scope":{"type":"user","user_id":"a"},"amount":"5","period":"total","model":"opus"}"#).unwrap();
        assert_eq!((u.period, u.model), (Period::Total, Family::parse("opus")));
        let u = parse(br#"{"scope":{"type":"organization"},"amount":"5","model":null}"#).unwrap();
        assert_eq!(u.model, None);
        assert_eq!(
            err(r#"{"scope":{"type":"organization"},"amount":"1","model":"gpt-4o"}"#),
            "model: must be one of opus, sonnet, haiku, fable, mythos (a Claude model family) or null"
        );
        assert_eq!(
            err(r#"{"scope":{"type":"organization"},"amount":"1","model":"claude-opus-4-7"}"#),
            err(r#"{"scope":{"type":"organization"},"amount":"1","model":"Opus"}"#),
        );
        assert_eq!(
            err(r#"{"scope":{"type":"organization"},"amount":"1","model":3}"#),
            "model: Expected string, received number"
        );
        assert!(
            err(r#"{"scope":{"type":"rbac_group","rbac_group_id":"g"},"amount":"1","model":"opus","pooled_budget":{"paused":true}}"#)
                .starts_with("pooled_budget: a shared budget")
        );
    }
}
