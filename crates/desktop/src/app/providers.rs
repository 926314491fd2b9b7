//! The user's model providers: Anthropic and Foundry (an API key; Foundry also Microsoft
//! Entra ID, with no secret stored: the credential comes from the environment, see
//! `gatehouse_engine::azure`), Bedrock (AWS keys, a Bedrock API key or an AWS profile) and
//! Vertex (a service-account key's JSON or an access token). Secrets go to the keychain only (`provider:<name>`, JSON for the cloud kinds);
//! the non-secret fields (region, project, resource, profile, base URL) to the settings.
//! A cloud provider becomes an engine upstream validated by the server's own rules
//! (`config::upstream::from_raw`), so a bad region or resource is refused here the way
//! `check-config` refuses it. Presets (`super::presets`: DeepSeek, Kimi, GLM, Qwen,
//! MiniMax, OpenRouter, Ollama, LM Studio, any OpenAI-compatible URL) are upstreams with a
//! base URL, a key (kept raw in the keychain) and a model map. "Test" sends one minimal
//! real request to that upstream.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use gatehouse_engine::config::raw::{RawProvider, RawUpstream, RawUpstreamAuth};
use gatehouse_engine::config::{GoogleAuth, Provider, UpstreamConfig};
use gatehouse_engine::models::IdStyle;
use gatehouse_engine::secret::Secret;
use gatehouse_engine::upstream::{Call, Operation};
use serde_json::{Value, json};

use super::presets::{self, KeyNeed, Wire};
use super::{App, AppError};
use crate::keychain::SERVICE;
use crate::settings::{ProviderEntry, provider_account};

/// Provider kinds the app can add.
pub const KINDS: &[&str] = &["anthropic", "bedrock", "vertex", "foundry", "preset"];
/// The cheap model a test asks for (as each provider names it).
const TEST_MODEL: &str = "claude-haiku-4-5";

fn field<'a>(body: &'a Value, key: &str) -> Option<&'a str> {
    body.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The entry and its keychain secret for an add request.
pub fn parse(body: &Value) -> Result<(ProviderEntry, Option<Secret>), AppError> {
    let kind =
        field(body, "kind").ok_or_else(|| AppError::BadInput("`kind` is required".into()))?;
    if !KINDS.contains(&kind) {
        return Err(AppError::BadInput(format!(
            "provider kind `{kind}` is not supported (supported: {})",
            KINDS.join(", ")
        )));
    }
    if kind == "preset" {
        return parse_preset(body);
    }
    let entry = ProviderEntry {
        name: kind.to_owned(),
        kind: kind.to_owned(),
        region: field(body, "region").map(str::to_owned),
        project_id: field(body, "project_id").map(str::to_owned),
        resource: field(body, "resource").map(str::to_owned),
        aws_profile: field(body, "aws_profile").map(str::to_owned),
        base_url: field(body, "base_url").map(str::to_owned),
        preset: None,
        model_map: None,
    };
    let entra = body.get("use_azure_ad").and_then(Value::as_bool) == Some(true);
    let secret = match kind {
        "foundry" if entra && field(body, "api_key").is_none() => None,
        "foundry" if entra => {
            return Err(AppError::BadInput(
                "Foundry takes an API key or Entra ID sign-in, not both".into(),
            ));
        }
        "anthropic" | "foundry" => Some(api_key(body)?),
        "bedrock" => {
            let keys = (
                field(body, "aws_access_key_id"),
                field(body, "aws_secret_access_key"),
            );
            match (keys, field(body, "aws_bearer_token")) {
                ((Some(id), Some(secret)), None) => Some(Secret::new(
                    json!({"aws_access_key_id": id, "aws_secret_access_key": secret,
                           "aws_session_token": field(body, "aws_session_token")})
                    .to_string(),
                )),
                ((None, None), Some(t)) => {
                    Some(Secret::new(json!({"aws_bearer_token": t}).to_string()))
                }
                ((None, None), None) if entry.aws_profile.is_some() => None,
                _ => {
                    return Err(AppError::BadInput(
                        "Bedrock needs an access key id and secret, a Bedrock API key, or an AWS profile".into(),
                    ));
                }
            }
        }
        _ => match (
            field(body, "service_account_json"),
            field(body, "access_token"),
        ) {
            (Some(sa), None) => {
                let v: Value = serde_json::from_str(sa).map_err(|_| {
                    AppError::BadInput(
                        "the service-account key must be the JSON file's content".into(),
                    )
                })?;
                if v["type"] != "service_account" || v["private_key"].as_str().is_none() {
                    return Err(AppError::BadInput(
                        "that JSON is not a service-account key".into(),
                    ));
                }
                Some(Secret::new(json!({"service_account_json": sa}).to_string()))
            }
            (None, Some(t)) => Some(Secret::new(json!({"access_token": t}).to_string())),
            _ => {
                return Err(AppError::BadInput(
                    "Vertex needs a service-account key (its JSON) or an access token".into(),
                ));
            }
        },
    };
    // The same rules as a server's gateway.yaml (region, project, resource, URL).
    upstream(&entry, secret.as_ref(), 0)?;
    Ok((entry, secret))
}

fn api_key(body: &Value) -> Result<Secret, AppError> {
    let key = field(body, "api_key").unwrap_or_default();
    if key.len() < 8 || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(AppError::BadInput(
            "the API key must be at least 8 printable characters without spaces".into(),
        ));
    }
    Ok(Secret::new(key))
}

/// A preset: its base URL (the preset's unless changed), key and model map (the preset's
/// defaults, changed per family), checked by the server's rules.
fn parse_preset(body: &Value) -> Result<(ProviderEntry, Option<Secret>), AppError> {
    let id = field(body, "preset").unwrap_or_default();
    let preset =
        presets::find(id).ok_or_else(|| AppError::BadInput(format!("no preset named `{id}`")))?;
    let base_url = field(body, "base_url").unwrap_or(preset.base_url);
    if base_url.is_empty() {
        return Err(AppError::BadInput(format!(
            "{} needs a base URL (with its version path, e.g. https://host/v1)",
            preset.label
        )));
    }
    let mut model_map = BTreeMap::new();
    for (family, default) in preset.models {
        let model = body
            .get("models")
            .and_then(|m| field(m, family))
            .unwrap_or(default);
        if model.is_empty() {
            let which = if *family == "*" { "every" } else { family };
            return Err(AppError::BadInput(format!(
                "{}: name the model to use for {which} Claude model",
                preset.label
            )));
        }
        model_map.insert((*family).to_owned(), model.to_owned());
    }
    let secret = match (preset.key, field(body, "api_key")) {
        (KeyNeed::None, _) | (KeyNeed::Optional, None) => None,
        (KeyNeed::Required | KeyNeed::Optional, Some(_)) => Some(api_key(body)?),
        (KeyNeed::Required, None) => {
            return Err(AppError::BadInput(format!(
                "{} needs an API key",
                preset.label
            )));
        }
    };
    let entry = ProviderEntry {
        name: preset.id.to_owned(),
        kind: "preset".to_owned(),
        region: None,
        project_id: None,
        resource: None,
        aws_profile: None,
        base_url: Some(base_url.to_owned()),
        preset: Some(preset.id.to_owned()),
        model_map: Some(model_map),
    };
    upstream(&entry, secret.as_ref(), 0)?;
    Ok((entry, secret))
}

/// The engine upstream for a cloud or preset entry and its keychain secret.
pub fn upstream(
    entry: &ProviderEntry,
    secret: Option<&Secret>,
    index: usize,
) -> Result<UpstreamConfig, AppError> {
    let doc: Value = secret
        .and_then(|s| serde_json::from_str(s.expose()).ok())
        .unwrap_or_default();
    let s = |k: &str| doc.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut auth = RawUpstreamAuth::default();
    let provider = match entry.kind.as_str() {
        "bedrock" => {
            auth.aws_access_key_id = s("aws_access_key_id");
            auth.aws_secret_access_key = s("aws_secret_access_key");
            auth.aws_session_token = s("aws_session_token");
            auth.aws_bearer_token = s("aws_bearer_token");
            RawProvider::Bedrock
        }
        "vertex" => {
            auth.access_token = s("access_token");
            RawProvider::Vertex
        }
        "foundry" => {
            // No stored key: Entra ID with the environment's Azure credential.
            auth.api_key = secret.map(|k| k.expose().to_owned());
            auth.use_azure_ad = secret.is_none().then_some(true);
            RawProvider::Foundry
        }
        "preset" => {
            let preset = entry
                .preset
                .as_deref()
                .and_then(presets::find)
                .ok_or_else(|| AppError::BadInput(format!("`{}`: unknown preset", entry.name)))?;
            let key = secret.map(|k| k.expose().to_owned());
            match preset.wire {
                Wire::Anthropic { bearer: true } => {
                    auth.auth_token = key;
                    RawProvider::Anthropic
                }
                Wire::Anthropic { bearer: false } => {
                    auth.api_key = key;
                    RawProvider::Anthropic
                }
                Wire::OpenAi => {
                    auth.api_key = key;
                    RawProvider::OpenAi
                }
            }
        }
        _ => RawProvider::Anthropic,
    };
    let raw = RawUpstream {
        name: Some(entry.name.clone()),
        provider,
        base_url: entry.base_url.clone(),
        region: entry.region.clone(),
        project_id: entry.project_id.clone(),
        resource: entry.resource.clone(),
        workspace_id: None,
        location: None,
        auth,
        forward_user_identity: None,
        guardrail: None,
        guardrail_trace: None,
        assume_role: None,
        headers: None,
        groups: None,
        models: None,
        model_map: entry.model_map.clone(),
        max_tokens_field: None,
        max_output_tokens: None,
    };
    let mut up = gatehouse_engine::config::upstream::from_raw(&raw, index)
        .map_err(|e| AppError::BadInput(e.to_string()))?;
    match &mut up.provider {
        Provider::Vertex(v) => {
            if let Some(sa) = s("service_account_json") {
                v.auth = GoogleAuth::ServiceAccountJson(Secret::new(sa));
            }
        }
        Provider::Bedrock(b) => {
            if let (Some(profile), None) = (&entry.aws_profile, secret) {
                b.auth = gatehouse_engine::config::AwsAuth::Profile(profile.clone());
            }
        }
        _ => {}
    }
    Ok(up)
}

/// The keychain secrets of the cloud providers (read off the async workers).
pub async fn cloud_secrets(app: &App) -> HashMap<String, Secret> {
    let creds = crate::keychain::credentials(&app.inner().deps.keychain);
    let names: Vec<String> = app
        .settings()
        .providers
        .into_iter()
        .filter(|p| p.name != "anthropic")
        .map(|p| p.name)
        .collect();
    super::keychain(move || {
        let mut out = HashMap::new();
        for n in names {
            if let Some(s) = creds.get(SERVICE, &provider_account(&n))? {
                out.insert(n, s);
            }
        }
        Ok(out)
    })
    .await
    .unwrap_or_else(|e| {
        tracing::warn!(error = %e, "provider secrets could not be read from the keychain");
        HashMap::new()
    })
}

/// Sends one minimal real request to the upstream `name` and keeps the result for the UI.
pub async fn test(app: &App, name: &str) -> Result<(), AppError> {
    let result = 'test: {
        let guard = app.inner().engine.lock().await;
        let handle = guard
            .as_ref()
            .ok_or_else(|| AppError::Engine("the gateway is not running".into()))?;
        let ups = &handle.gateway().upstreams;
        let Some(i) = ups.list.iter().position(|u| u.name == name) else {
            // Saved but not yet served: a provider just added is in the settings before
            // the gateway's restart with it has taken over. Not an unknown name.
            if app.settings().providers.iter().any(|p| p.name == name) {
                break 'test json!({"ok": false, "status": null,
                    "message": "the gateway is restarting with this provider: test again in a moment"});
            }
            return Err(AppError::BadInput(format!("no provider named `{name}`")));
        };
        let up = &ups.list[i];
        let model = up
            .model_map
            .get("haiku")
            .or_else(|| up.model_map.get("*"))
            .cloned()
            .unwrap_or_else(|| IdStyle::of(&up.provider).id_for(TEST_MODEL));
        let body = json!({"model": model, "max_tokens": 1,
                          "messages": [{"role": "user", "content": "ping"}]});
        let value = up.credential.as_ref().map(|c| (c.scheme, c.current()));
        if let Some((_, None)) = &value {
            return Err(AppError::BadInput(format!("no key stored for `{name}`")));
        }
        let credential = value
            .as_ref()
            .and_then(|(s, v)| v.as_ref().map(|v| (*s, v)));
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "anthropic-version",
            http::HeaderValue::from_static("2023-06-01"),
        );
        let call = Call {
            op: Operation::Messages,
            query: None,
            headers: &headers,
            model: &model,
            body: bytes::Bytes::from(body.to_string()),
            stream: false,
            credential,
            extra_headers: &up.headers,
            caller: None,
            affinity: None,
        };
        match tokio::time::timeout(Duration::from_secs(30), ups.links[i].send(call)).await {
            Err(_) => json!({"ok": false, "status": null, "message": "no answer within 30 s"}),
            Ok(Err(e)) => json!({"ok": false, "status": null, "message": e.to_string()}),
            Ok(Ok(answer)) => {
                let status = answer.status.as_u16();
                let ok = answer.status.is_success();
                let body = answer.read_limited(64 * 1024).await;
                let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                let message = if ok {
                    format!(
                        "answered with model {}",
                        v["model"].as_str().unwrap_or(&model)
                    )
                } else {
                    v["error"]["message"]
                        .as_str()
                        .unwrap_or("the upstream refused")
                        .to_owned()
                };
                json!({"ok": ok, "status": status, "message": message})
            }
        }
    };
    let mut result = result;
    result["at"] = Value::String(app.inner().deps.clock.now().to_rfc3339());
    if let Ok(mut t) = app.inner().tests.lock() {
        t.insert(name.to_owned(), result);
    }
    app.publish("app.state");
    Ok(())
}
