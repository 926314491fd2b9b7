//! `gatehouse status`: asks the running instance where it stands
//! (`GET /gatehouse/api/status`) and prints it for a person, or as JSON with `--json`.
//!
//! Which instance: `--url`; else the listener of `--config`; else the desktop app's saved
//! port (or the default local port), on loopback, where the tray and `gatehouse serve`
//! answer without a key. Off loopback a server wants an admin read key: `--admin-key` or
//! `GATEHOUSE_ADMIN_KEY`. Nothing answering is an error (exit 1) that says so.

use std::path::PathBuf;
use std::time::Duration;

use gatehouse_engine::config::DEFAULT_LOCAL_PORT;
use serde_json::Value;

const PATH: &str = "/gatehouse/api/status";

pub struct Options {
    pub url: Option<String>,
    pub admin_key: Option<String>,
    pub config: Option<PathBuf>,
    pub json: bool,
}

/// The base URL to ask: `--url`, the config's listener, or the local app's port.
fn base_url(opts: &Options, data: PathBuf) -> Result<String, String> {
    if let Some(url) = &opts.url {
        return Ok(url.trim_end_matches('/').to_owned());
    }
    if let Some(file) = &opts.config {
        let (config, _) = crate::load(file, data)?;
        let listen = &config.listen;
        let scheme = if listen.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let host = if listen.host.is_unspecified() {
            "127.0.0.1".to_owned()
        } else {
            listen.host.to_string()
        };
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        return Ok(format!("{scheme}://{host}:{}", listen.port));
    }
    let port = crate::desktop_cli::saved_port(&data)?.unwrap_or(DEFAULT_LOCAL_PORT);
    Ok(format!("http://127.0.0.1:{port}"))
}

pub fn run(opts: Options, data: PathBuf) -> Result<(), String> {
    let base = base_url(&opts, data)?;
    let key = opts
        .admin_key
        .clone()
        .or_else(|| std::env::var("GATEHOUSE_ADMIN_KEY").ok())
        .filter(|k| !k.is_empty());
    let status = crate::runtime()?.block_on(fetch(&base, key.as_deref()))?;
    let text = if opts.json {
        serde_json::to_string_pretty(&status).map_err(|e| e.to_string())?
    } else {
        human(&base, &status)
    };
    println!("{text}");
    Ok(())
}

async fn fetch(base: &str, admin_key: Option<&str>) -> Result<Value, String> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(3))
        .build()
        .map_err(|e| e.to_string())?;
    let mut req = client.get(format!("{base}{PATH}"));
    if let Some(key) = admin_key {
        req = req.header("x-api-key", key);
    }
    let resp = req.send().await.map_err(|e| {
        if e.is_connect() || e.is_timeout() {
            format!(
                "no Gatehouse is running at {base} (start `gatehouse serve` or the app, or pass --url)"
            )
        } else {
            format!("cannot ask {base}: {e}")
        }
    })?;
    match resp.status().as_u16() {
        200 => resp
            .json()
            .await
            .map_err(|e| format!("{base} answered something that is not Gatehouse's status: {e}")),
        401 | 403 => Err(format!(
            "{base} wants an admin read key for its status: pass --admin-key or set GATEHOUSE_ADMIN_KEY"
        )),
        404 => Err(format!(
            "{base} does not serve {PATH} (not a Gatehouse, or an older one)"
        )),
        s => Err(format!("{base} answered {s} to {PATH}")),
    }
}

fn usd(micro: Option<u64>) -> String {
    micro.map_or_else(
        || "none".to_owned(),
        |m| format!("${:.2}", m as f64 / 1_000_000.0),
    )
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("?")
}

/// The status as lines for a person.
fn human(base: &str, v: &Value) -> String {
    let mut out = vec![format!(
        "Gatehouse {} ({}) at {base}, up since {}{}",
        s(v, "/version"),
        s(v, "/mode"),
        s(v, "/started_at"),
        if v["paused"] == true {
            " — PAUSED"
        } else {
            ""
        }
    )];
    let listener = &v["listener"];
    let mut line = format!(
        "Listener:  {}{}",
        s(listener, "/address"),
        if listener["tls"] == true {
            " (https)"
        } else {
            ""
        }
    );
    if let Some(public) = listener["public_url"].as_str() {
        line.push_str(&format!(", public {public}"));
    }
    out.push(line);
    let store = &v["store"];
    out.push(if store["ready"] == true {
        format!("Store:     {}, ready", s(store, "/backend"))
    } else {
        format!(
            "Store:     {}, NOT READY ({})",
            s(store, "/backend"),
            s(store, "/error")
        )
    });
    let ups: Vec<String> = v["upstreams"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|u| format!("{} {}", s(u, "/name"), s(u, "/state")))
                .collect()
        })
        .unwrap_or_default();
    out.push(format!(
        "Upstreams: {}",
        if ups.is_empty() {
            "none".into()
        } else {
            ups.join(", ")
        }
    ));
    let usage = &v["today"]["usage"];
    out.push(if usage.is_null() {
        "Today:     (the store did not answer)".to_owned()
    } else {
        format!(
            "Today:     {} requests, {} spent",
            usage["requests"].as_u64().unwrap_or(0),
            usd(usage["cost_micro_usd"].as_u64())
        )
    });
    out.push(caps_line(&v["spend"]));
    for m in v["spend"]["meters"].as_array().into_iter().flatten() {
        out.push(format!(
            "  {:<8} {} of {} (resets {})",
            s(m, "/period"),
            usd(m["spent_micro_usd"].as_u64()),
            usd(m["limit_micro_usd"].as_u64()),
            s(m, "/resets_at")
        ));
    }
    out.push(sign_in_line(&v["sign_in"]));
    if let Some(tray) = v["sign_in"]["app"]["tray"].as_str() {
        out.push(format!("Tray:      {}", tray.replace('_', " ")));
    }
    out.join("\n")
}

fn caps_line(spend: &Value) -> String {
    if spend["caps_enforced"] != true {
        return "Caps:      not enforced (no admin block)".into();
    }
    let caps: Vec<String> = spend["organization_caps"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| format!("{} {}", s(c, "/period"), usd(c["limit_micro_usd"].as_u64())))
                .collect()
        })
        .unwrap_or_default();
    if caps.is_empty() {
        "Caps:      enforced; no organization cap".into()
    } else {
        format!("Caps:      organization {}", caps.join(", "))
    }
}

fn sign_in_line(sign_in: &Value) -> String {
    let app = &sign_in["app"];
    if app.is_object() {
        return match app["mode"].as_str() {
            Some("connected") => format!(
                "Sign-in:   connected to {}, {}",
                s(app, "/central_url"),
                s(app, "/sign_in").replace('_', " ")
            ),
            _ => "Sign-in:   standalone (this computer's own keys)".into(),
        };
    }
    let mut ways = Vec::new();
    if sign_in["oidc"] == true {
        ways.push("OIDC sign-in".to_owned());
    }
    match sign_in["client_keys"].as_u64() {
        Some(0) | None => {}
        Some(n) => ways.push(format!("{n} client key(s)")),
    }
    if sign_in["local_key"] == true {
        ways.push("the local key".to_owned());
    }
    format!(
        "Sign-in:   {}",
        if ways.is_empty() {
            "none".into()
        } else {
            ways.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connected_app_names_its_central_gatehouse() {
        let v = serde_json::json!({"app": {"mode": "connected", "central_url": "https://gh.example", "sign_in": "signed_in"}});
        assert_eq!(
            sign_in_line(&v),
            "Sign-in:   connected to https://gh.example, signed in"
        );
    }
}
