//! A create-or-replace with `pooled_budget`, merged with the stored limit as the reference
//! merges it: absent fields keep what is stored, a budget is paused unless it says
//! otherwise or was running, and a running budget needs both its own amount and each
//! member's `amount`. The answer's `pooled_budget` carries the group's spend this month.

use serde_json::Value;

use super::body::Upsert;
use super::effective::cents_text;
use crate::spend::{PooledBudget, SpendLimit};

/// The amount and shared budget to store, or the 400's message. `Ok(None)` for the member
/// amount means a limit that does not exist yet and was sent without `amount`.
pub fn merge(
    body: &Upsert,
    stored: Option<&SpendLimit>,
) -> Result<(Option<i64>, Option<PooledBudget>), String> {
    let amount = match body.amount {
        Some(a) => a,
        None => match stored {
            Some(l) => l.amount_cents,
            None => {
                return Err(
                    "This spend limit doesn't exist yet, so it needs amount (each \
                            member's own limit). Set amount; it may equal pooled_budget.amount."
                        .into(),
                );
            }
        },
    };
    let patch = body.pooled.as_ref();
    let was = stored.and_then(|l| l.pooled);
    let pool_amount = match patch.and_then(|p| p.amount) {
        Some(a) => a,
        None => was.map(|p| p.amount_cents),
    };
    let paused = patch
        .and_then(|p| p.paused)
        .or(was.map(|p| p.paused))
        .unwrap_or(pool_amount.is_none());
    if !paused {
        if pool_amount.is_none() {
            return Err("A pooled budget that isn't paused needs an amount. Set \
                        pooled_budget.amount, or set pooled_budget.paused to true."
                .into());
        }
        if amount.is_none() {
            return Err(
                "A pooled budget that isn't paused needs amount (each member's own \
                        limit) on the same spend limit. Set amount; it may equal \
                        pooled_budget.amount."
                    .into(),
            );
        }
    }
    Ok((
        amount,
        pool_amount.map(|amount_cents| PooledBudget {
            amount_cents,
            paused,
        }),
    ))
}

/// The admin API's `spend_limit` object: [`SpendLimit::to_json`] with a shared budget's
/// `currency` and `period_to_date_spend` (the group's settled spend this month, from
/// `spent`: `(group, spent micro-USD)`).
pub fn object(limit: &SpendLimit, spent: &[(String, u64, u64)]) -> Value {
    let mut v = limit.to_json();
    if let Some(p) = v.get_mut("pooled_budget").and_then(Value::as_object_mut) {
        let micro = spent
            .iter()
            .find(|s| s.0 == limit.scope_id)
            .map_or(0, |s| s.1);
        p.insert("currency".into(), "USD".into());
        p.insert("period_to_date_spend".into(), cents_text(micro).into());
    }
    v
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::spend::admin::body::parse;
    use crate::spend::{Period, ScopeType};

    fn stored(amount: Option<i64>, pooled: Option<PooledBudget>) -> SpendLimit {
        SpendLimit {
            id: "spl_1".into(),
            scope_type: ScopeType::RbacGroup,
            scope_id: "eng".into(),
            period: Period::Monthly,
            model: None,
            amount_cents: amount,
            pooled,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    fn merged(
        body: &str,
        was: Option<&SpendLimit>,
    ) -> Result<(Option<i64>, Option<PooledBudget>), String> {
        merge(&parse(body.as_bytes()).unwrap(), was)
    }

    const G: &str = r#""scope":{"type":"rbac_group","rbac_group_id":"eng"}"#;

    #[test]
    fn merges_as_the_reference_does() {
        let running = |a| {
            Some(PooledBudget {
                amount_cents: a,
                paused: false,
            })
        };
        assert_eq!(
            merged(
                &format!(r#"{{{G},"amount":"100","pooled_budget":{{"amount":"500"}}}}"#),
                None
            ),
            Ok((Some(100), running(500))),
            "an amount alone starts the budget"
        );
        let was = stored(Some(100), running(500));
        assert_eq!(
            merged(
                &format!(r#"{{{G},"pooled_budget":{{"paused":true}}}}"#),
                Some(&was)
            ),
            Ok((
                Some(100),
                Some(PooledBudget {
                    amount_cents: 500,
                    paused: true
                })
            )),
        );
        assert_eq!(
            merged(&format!(r#"{{{G},"amount":"7"}}"#), Some(&was)),
            Ok((Some(7), running(500))),
            "a body without pooled_budget keeps it"
        );
        assert_eq!(
            merged(&format!(r#"{{{G},"amount":"7","pooled_budget":{{"amount":null}}}}"#), Some(&was)),
            Err("A pooled budget that isn't paused needs an amount. Set pooled_budget.amount, or set pooled_budget.paused to true.".into())
        );
        assert_eq!(
            merged(&format!(r#"{{{G},"amount":null,"pooled_budget":{{"amount":"5"}}}}"#), None),
            Err("A pooled budget that isn't paused needs amount (each member's own limit) on the same spend limit. Set amount; it may equal pooled_budget.amount.".into())
        );
        assert!(
            merged(
                &format!(r#"{{{G},"pooled_budget":{{"amount":"5"}}}}"#),
                None
            )
            .unwrap_err()
            .starts_with("This spend limit doesn't exist yet")
        );
        assert_eq!(
            merged(
                &format!(r#"{{{G},"amount":"1","pooled_budget":{{"amount":null,"paused":true}}}}"#),
                Some(&was)
            ),
            Ok((Some(1), None)),
            "no amount: no budget"
        );
    }
}
