//! `gatehouse`: the one binary. Headless subcommands (`serve`, `check-config`,
//! `config-schema`, `reset-local-key`, `login`, ...) wrap the engine; the desktop tray
//! (`tray`, or no subcommand when a display is present) comes with the `desktop` feature. All behaviour lives in `gatehouse-engine`; this file only builds the
//! configuration, picks the dependencies and maps errors to exit status 1.

mod backup_cli;
#[cfg(feature = "desktop")]
mod desktop;
mod desktop_cli;
mod healthcheck;
mod insight_cli;
mod logging;
mod login;
mod status_cli;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc's malloc: the request path allocates a few hundred small
/// blocks per request across threads, and mimalloc serves them in about half the
/// instructions (measured with callgrind; see ARCHITECTURE.md, "The hot path"). The
/// `system-alloc` feature keeps glibc's, for heap profilers that interpose malloc.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use gatehouse_engine::config::warnings::ConfigWarning;
use gatehouse_engine::config::{self, Config, LoadContext};
use gatehouse_engine::deps::{Deps, ProcessEnvironment};
use gatehouse_engine::store::SqliteStore;

#[derive(Parser)]
#[command(
    name = "gatehouse",
    version,
    about = "LLM gateway for Claude Code and other coding agents"
)]
struct Cli {
    /// Where state lives when the config does not say (default: the user data directory).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway (headless). Without --config: loopback, SQLite, Anthropic upstream.
    Serve {
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Port for the embedded default configuration.
        #[arg(long)]
        port: Option<u16>,
        /// Threads serving connections, each connection on one of them from start to end
        /// (default: one per CPU; 0 serves them on the shared async runtime).
        #[arg(long, env = "GATEHOUSE_CONNECTION_THREADS", value_name = "N")]
        connection_threads: Option<usize>,
        /// Run a check and exit without starting, as the reference's `--check config`:
        /// `config` validates the file (managed policies included).
        #[arg(long, value_name = "WHAT")]
        check: Option<String>,
    },
    /// Run the desktop tray app (the default when a display is present).
    #[cfg(feature = "desktop")]
    Tray {
        /// Port for the local gateway (default: the saved setting, 8788).
        #[arg(long)]
        port: Option<u16>,
    },
    /// The tray's dashboard window, a child process of `tray` (its URL on stdin).
    #[cfg(feature = "desktop")]
    #[command(hide = true)]
    TrayWindow,
    /// Print one line for Claude Code's status line (reads its JSON on stdin): this
    /// session's cost, today's against the daily budget, the cache-read ratio.
    Statusline,
    /// Usage records: `gatehouse usage export --since … --format csv`.
    Usage {
        #[command(subcommand)]
        action: insight_cli::UsageAction,
    },
    /// Validate a configuration file without starting (`check-config F`, or with
    /// `--config F` as `serve --check config` takes it).
    CheckConfig {
        #[arg(required_unless_present = "config", conflicts_with = "config")]
        file: Option<PathBuf>,
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// GET a URL (default: the server's /readyz) and exit 1 unless it answers 2xx
    /// (a container HEALTHCHECK without curl).
    Healthcheck {
        #[arg(default_value = healthcheck::DEFAULT_URL)]
        url: String,
        /// Seconds to wait for the answer.
        #[arg(long, default_value_t = 5)]
        timeout: u64,
    },
    /// Print the JSON schema of the configuration file.
    ConfigSchema,
    /// Issue a new local client key for the embedded default (the old one stops working).
    ResetLocalKey,
    /// Sign in to a central Gatehouse with the device flow.
    Login {
        #[arg(long, value_name = "URL")]
        gateway: String,
        /// Print the link instead of opening a browser.
        #[arg(long)]
        no_browser: bool,
    },
    /// Print a valid access token for a central Gatehouse (refreshing it when needed);
    /// usable as Claude Code's `apiKeyHelper`.
    Token {
        #[arg(long, value_name = "URL")]
        gateway: Option<String>,
        /// Print the local client token from the OS keychain instead (the desktop gateway).
        #[arg(long, conflicts_with = "gateway")]
        local: bool,
    },
    /// Point Claude Code at the local gateway by merging its user settings (with a backup).
    ConfigureClaudeCode {
        /// Revert Gatehouse's change (restore the backup, keeping later edits).
        #[arg(long, conflicts_with = "status")]
        undo: bool,
        /// Report whether Claude Code is configured, or what drifted.
        #[arg(long)]
        status: bool,
    },
    /// Store or remove a secret in the OS keychain.
    Keys {
        #[command(subcommand)]
        action: desktop_cli::KeysAction,
    },
    /// Copy the running (or stopped) instance's SQLite database to a new file, online.
    Backup {
        path: PathBuf,
        /// The instance's configuration (default: the embedded default, as the tray).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Replace a stopped instance's SQLite database with a backup (the old one is kept as
    /// `.bak`).
    Restore {
        path: PathBuf,
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Where the running instance stands: mode, listener, store, upstreams, today's spend
    /// and caps, sign-in.
    Status {
        /// The instance to ask (default: --config's listener, else the local app's port).
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// Admin read key for a server off loopback (or GATEHOUSE_ADMIN_KEY).
        #[arg(long, value_name = "KEY")]
        admin_key: Option<String>,
        #[arg(long, value_name = "FILE", conflicts_with = "url")]
        config: Option<PathBuf>,
        /// Print the status as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke and forget the session for a central Gatehouse.
    Logout {
        #[arg(long, value_name = "URL")]
        gateway: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("gatehouse: {message}");
            ExitCode::from(1)
        }
    }
}

fn data_dir(cli_dir: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(d) = cli_dir {
        return Ok(d.to_owned());
    }
    gatehouse_statusline::default_data_dir().ok_or_else(|| {
        "cannot find a home directory for the data directory; pass --data-dir".into()
    })
}

/// A checked configuration file and its startup warnings.
fn load(file: &Path, data_dir: PathBuf) -> Result<(Config, Vec<ConfigWarning>), String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let ctx = LoadContext {
        env: &ProcessEnvironment,
        credentials: &gatehouse_engine::deps::NoCredentialStore,
        default_data_dir: data_dir,
    };
    // Every problem at once, as the reference lists them: `gatehouse: [ {code, message,
    // path}, … ]` (`path` as segments, e.g. `["upstreams", 0, "base_url"]`).
    let refused = |e: config::ConfigError| e.issue_list();
    let config = Config::from_yaml(&text, &ctx).map_err(refused)?;
    let warnings = gatehouse_engine::check_config(&config).map_err(refused)?;
    Ok((config, warnings))
}

/// `check-config F` and `serve --check config --config F`: the checks of a start, then the
/// reference's line (stdout, exit 0); warnings go to stderr first, problems fail (exit 1).
fn check_config(file: &Path, data: PathBuf) -> Result<(), String> {
    let (config, warnings) = load(file, data)?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    for n in &config.differing_defaults {
        eprintln!("note: {n}");
    }
    println!(
        "{}: no errors found. This does not check the database, identity provider, upstreams, \
         credentials, certificates, or listen address.",
        file.display()
    );
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

fn run(cli: Cli) -> Result<(), String> {
    let data = data_dir(cli.data_dir.as_deref());
    match cli.command {
        Some(Command::CheckConfig { file, config }) => {
            let file = file.or(config).ok_or("check-config needs a FILE")?;
            check_config(&file, data?)
        }
        Some(Command::Healthcheck { url, timeout }) => {
            let timeout = std::time::Duration::from_secs(timeout);
            let line = runtime()?.block_on(healthcheck::check(&url, timeout))?;
            println!("gatehouse: {line}");
            Ok(())
        }
        Some(Command::ConfigSchema) => {
            let schema =
                serde_json::to_string_pretty(&Config::json_schema()).map_err(|e| e.to_string())?;
            println!("{schema}");
            Ok(())
        }
        Some(Command::ResetLocalKey) => reset_local_key(&data?),
        Some(Command::Login {
            gateway,
            no_browser,
        }) => {
            let creds = login::Credentials::new(&data?);
            runtime()?.block_on(login::login(&creds, &gateway, !no_browser))
        }
        Some(Command::Token { local: true, .. }) => desktop_cli::print_local_token(),
        Some(Command::ConfigureClaudeCode { undo, status }) => {
            desktop_cli::configure_claude_code(&data?, undo, status)
        }
        Some(Command::Keys { action }) => desktop_cli::keys(action),
        Some(Command::Statusline) => insight_cli::statusline(data),
        Some(Command::Usage { action }) => insight_cli::usage(&data?, action),
        Some(Command::Token { gateway, .. }) => {
            let creds = login::Credentials::new(&data?);
            let gateway = pick_gateway(&creds, gateway)?;
            let token = runtime()?.block_on(login::token(&creds, &gateway))?;
            println!("{token}");
            Ok(())
        }
        Some(Command::Logout { gateway }) => {
            let creds = login::Credentials::new(&data?);
            let gateway = pick_gateway(&creds, gateway)?;
            runtime()?.block_on(login::logout(&creds, &gateway))
        }
        Some(Command::Backup { path, config }) => {
            backup_cli::backup(&path, config.as_deref(), data?)
        }
        Some(Command::Restore { path, config }) => {
            backup_cli::restore(&path, config.as_deref(), data?)
        }
        Some(Command::Status {
            url,
            admin_key,
            config,
            json,
        }) => status_cli::run(
            status_cli::Options {
                url,
                admin_key,
                config,
                json,
            },
            data?,
        ),
        Some(Command::Serve {
            check: Some(what),
            config,
            ..
        }) => match (what.as_str(), config) {
            ("config", Some(file)) => check_config(&file, data?),
            ("config", None) => Err("--check config needs --config FILE".into()),
            (other, _) => Err(format!("unknown --check {other}. Available: config")),
        },
        Some(Command::Serve {
            config,
            port,
            connection_threads,
            check: None,
        }) => serve(config.as_deref(), port, connection_threads, data?),
        #[cfg(feature = "desktop")]
        Some(Command::Tray { port }) => desktop::run(data?, port),
        #[cfg(feature = "desktop")]
        Some(Command::TrayWindow) => desktop::window::run(data?),
        #[cfg(feature = "desktop")]
        None if desktop::display_present() => desktop::run(data?, None),
        // No display (or a headless build): the server with the embedded default.
        None => serve(None, None, None, data?),
    }
}

fn pick_gateway(creds: &login::Credentials, given: Option<String>) -> Result<String, String> {
    match given {
        Some(g) => Ok(g),
        None => creds
            .single()?
            .ok_or_else(|| "pass --gateway URL (no single stored session to pick)".to_owned()),
    }
}

fn serve(
    file: Option<&Path>,
    port: Option<u16>,
    connection_threads: Option<usize>,
    data: PathBuf,
) -> Result<(), String> {
    let serving = gatehouse_engine::Serving {
        connection_threads: connection_threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        }),
    };
    let (config, warnings) = match file {
        Some(f) => {
            if port.is_some() {
                return Err(
                    "--port applies to the embedded default; set listen.port in the config file"
                        .into(),
                );
            }
            load(f, data)?
        }
        None => {
            let config = config::embedded_default(&ProcessEnvironment, &data, port)
                .map_err(|e| e.to_string())?;
            let warnings = config.warnings.clone();
            (config, warnings)
        }
    };
    let _guard = logging::init(&config.logging)?;
    let mut deps = Deps::headless();
    if let Some(sink) = logging::event_file_sink(&config.logging)? {
        deps.events = Arc::new(gatehouse_engine::events::FanoutEventSink(vec![
            deps.events.clone(),
            sink,
        ]));
    }
    for w in &warnings {
        tracing::warn!("{w}");
    }
    runtime()?.block_on(async move {
        let stop = shutdown_signal();
        let handle = gatehouse_engine::start_with(config, deps, serving)
            .await
            .map_err(|e| e.to_string())?;
        let url = handle.base_url();
        println!("gatehouse: listening on {url}");
        if let Some(key) = handle.issued_local_key() {
            println!("gatehouse: created a local client key for this install; it is shown only this once.");
            println!("gatehouse: point Claude Code at Gatehouse with:");
            println!("  export ANTHROPIC_BASE_URL={url}");
            println!("  export ANTHROPIC_AUTH_TOKEN={}", key.expose());
            println!("gatehouse: (`gatehouse reset-local-key` issues a new one)");
        } else if handle.gateway().config.local_key {
            println!("gatehouse: using the local client key issued earlier (`gatehouse reset-local-key` issues a new one)");
        }
        stop.await;
        eprintln!("gatehouse: shutting down; letting in-flight requests finish");
        handle.shutdown().await;
        Ok(())
    })
}

/// Registers for SIGTERM and Ctrl-C at once (a signal arriving before the wait must not
/// kill the process), and returns the wait.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        if let Some(mut term) = term {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = ctrl_c.await;
    }
}

fn reset_local_key(data: &Path) -> Result<(), String> {
    let config =
        config::embedded_default(&ProcessEnvironment, data, None).map_err(|e| e.to_string())?;
    let gatehouse_engine::config::StoreConfig::Sqlite { path } = &config.store else {
        return Err("the embedded default keeps its local key in SQLite".into());
    };
    let store = SqliteStore::open(path, chrono_now()).map_err(|e| e.to_string())?;
    let key = runtime()?
        .block_on(gatehouse_engine::auth::local_key::rotate(
            &store,
            chrono_now(),
        ))
        .map_err(|e| e.to_string())?;
    println!(
        "gatehouse: new local client key (shown only this once; restart `gatehouse serve` to use it):"
    );
    println!("  export ANTHROPIC_AUTH_TOKEN={}", key.expose());
    Ok(())
}

fn chrono_now() -> chrono::DateTime<chrono::Utc> {
    use gatehouse_engine::deps::Clock;
    gatehouse_engine::deps::SystemClock.now()
}
