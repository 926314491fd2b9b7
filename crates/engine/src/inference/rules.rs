//! Request-aware routing rules (`routing.rules`): in order, the first whose conditions all
//! hold decides the model that serves the request, the upstreams allowed (in order) and the
//! strategy. The body is read for them ([`super::body::traits`]) only when rules exist.

use http::HeaderMap;

use super::body::{self, Traits};
use crate::config::routing::{Client, Rule, When};
use crate::error::ApiError;
use crate::models;

/// What a rule sees of a request.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub model: &'a str,
    pub traits: Traits,
    pub groups: &'a [String],
    pub client: Client,
}

impl<'a> Facts<'a> {
    /// Reads the body and the user-agent.
    pub fn read(
        model: &'a str,
        bytes: &[u8],
        headers: &HeaderMap,
        groups: &'a [String],
    ) -> Result<Self, ApiError> {
        let ua = headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok());
        Ok(Facts {
            model,
            traits: body::traits(bytes)?,
            groups,
            client: Client::from_user_agent(ua),
        })
    }
}

/// The first rule that matches, if any.
pub fn first_match<'r>(rules: &'r [Rule], facts: &Facts<'_>) -> Option<&'r Rule> {
    rules.iter().find(|r| matches(&r.when, facts))
}

fn matches(w: &When, f: &Facts<'_>) -> bool {
    let family = models::family(f.model);
    let checks = [
        w.model.as_ref().is_none_or(|m| models::listed(m, f.model)),
        w.family
            .as_ref()
            .is_none_or(|fams| family.is_some_and(|fam| fams.iter().any(|x| x == fam))),
        w.thinking.is_none_or(|t| t == f.traits.thinking),
        w.input_tokens_over
            .is_none_or(|n| f.traits.est_input_tokens > n),
        w.tools.as_ref().is_none_or(|want| {
            f.traits
                .tools
                .iter()
                .any(|t| want.iter().any(|w| w == "*" || t.starts_with(w.as_str())))
        }),
        w.images.is_none_or(|i| i == f.traits.images),
        w.background.is_none_or(|b| b == (family == Some("haiku"))),
        w.groups
            .as_ref()
            .is_none_or(|g| f.groups.iter().any(|x| g.contains(x))),
        w.client.as_ref().is_none_or(|c| c.contains(&f.client)),
    ];
    checks.iter().all(|c| *c)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn facts(model: &str, traits: Traits, client: Client) -> Facts<'_> {
        Facts {
            model,
            traits,
            groups: &[],
            client,
        }
    }

    fn rule(name: &str, when: When) -> Rule {
        Rule {
            name: name.into(),
            when,
            model: Some("target".into()),
            ..Rule::default()
        }
    }

    #[test]
    fn first_match_wins_and_every_condition_must_hold() {
        let rules = vec![
            rule(
                "thinking",
                When {
                    thinking: Some(true),
                    ..When::default()
                },
            ),
            rule(
                "long",
                When {
                    input_tokens_over: Some(1000),
                    ..When::default()
                },
            ),
            rule(
                "background-cli",
                When {
                    background: Some(true),
                    client: Some(vec![Client::ClaudeCode]),
                    ..When::default()
                },
            ),
            rule(
                "search",
                When {
                    tools: Some(vec!["web_search".into()]),
                    ..When::default()
                },
            ),
            rule("rest", When::default()),
        ];
        let t = |thinking, tokens, tools: &[&str]| Traits {
            thinking,
            est_input_tokens: tokens,
            tools: tools.iter().map(|s| (*s).to_owned()).collect(),
            images: false,
        };
        let pick = |f: &Facts<'_>| first_match(&rules, f).unwrap().name.clone();
        let sonnet = "claude-sonnet-4-6";
        let haiku = "claude-haiku-4-5";
        assert_eq!(
            pick(&facts(sonnet, t(true, 5000, &[]), Client::Sdk)),
            "thinking"
        );
        assert_eq!(
            pick(&facts(sonnet, t(false, 5000, &[]), Client::Sdk)),
            "long"
        );
        assert_eq!(
            pick(&facts(haiku, t(false, 10, &[]), Client::ClaudeCode)),
            "background-cli"
        );
        assert_eq!(pick(&facts(haiku, t(false, 10, &[]), Client::Sdk)), "rest");
        assert_eq!(
            pick(&facts(
                sonnet,
                t(false, 10, &["web_search_20250305"]),
                Client::Other
            )),
            "search"
        );
        assert_eq!(
            pick(&facts(sonnet, t(false, 10, &["Bash"]), Client::Other)),
            "rest"
        );
    }

    #[test]
    fn groups_images_model_patterns_and_families() {
        let when = |w: When| vec![rule("r", w)];
        let groups = vec!["platform".to_owned()];
        let mut f = facts("claude-opus-4-8", Traits::default(), Client::Other);
        let by_group = when(When {
            groups: Some(vec!["platform".into(), "ops".into()]),
            ..When::default()
        });
        assert!(first_match(&by_group, &f).is_none(), "no groups");
        f.groups = &groups;
        assert!(first_match(&by_group, &f).is_some());
        let images = when(When {
            images: Some(true),
            ..When::default()
        });
        assert!(first_match(&images, &f).is_none());
        f.traits.images = true;
        assert!(first_match(&images, &f).is_some());
        let pattern = when(When {
            model: Some(vec!["CLAUDE-OPUS-*".into()]),
            family: Some(vec!["opus".into()]),
            ..When::default()
        });
        assert!(first_match(&pattern, &f).is_some());
        f.model = "claude-sonnet-4-6";
        assert!(first_match(&pattern, &f).is_none());
        let any_tool = when(When {
            tools: Some(vec!["*".into()]),
            ..When::default()
        });
        assert!(first_match(&any_tool, &f).is_none(), "no tools");
        f.traits.tools = vec!["Bash".into()];
        assert!(first_match(&any_tool, &f).is_some());
    }

    #[test]
    fn clients_by_user_agent() {
        for (ua, c) in [
            ("claude-cli/2.1.333 (external, cli)", Client::ClaudeCode),
            ("Anthropic/JS 0.60.0", Client::Sdk),
            ("Anthropic/Python 0.50.0", Client::Sdk),
            ("Mozilla/5.0 Claude/1.0 Electron/37.0", Client::Desktop),
            ("curl/8.0", Client::Other),
        ] {
            assert_eq!(Client::from_user_agent(Some(ua)), c, "{ua}");
        }
        assert_eq!(Client::from_user_agent(None), Client::Other);
    }
}
