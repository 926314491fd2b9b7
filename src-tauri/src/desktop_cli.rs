//! The desktop's terminal commands: `configure-claude-code [--undo | --status]`,
//! `keys set | rm <account>` and `token --local`.
//!
//! Secrets go to the OS keychain only (service `gatehouse`); when no keychain is reachable
//! these commands refuse rather than write a secret anywhere else. `keys set` reads the
//! secret from standard input, never from the command line. `configure-claude-code`
//! makes sure the local client token exists in the keychain (generating a `gth_` key when
//! missing) and its hash in the SQLite state, so the gateway accepts it, then merges
//! `ANTHROPIC_BASE_URL` and `apiKeyHelper = '<this binary>' token --local` into Claude
//! Code's user settings (`gatehouse_desktop::claude_settings`). The loopback URL uses the
//! port saved in the desktop settings when there are some, else the embedded default's.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Subcommand;
use gatehouse_desktop::claude_settings::{
    ClaudeSettings, ConfigureOutcome, Status, Target, UndoOutcome, settings_path,
};
use gatehouse_desktop::keychain::{KeyringStore, LOCAL_TOKEN_ACCOUNT, SERVICE};
use gatehouse_desktop::settings::{SETTINGS_KEY, Settings, StateStore};
use gatehouse_engine::auth::local_key;
use gatehouse_engine::config::{DEFAULT_LOCAL_PORT, StoreConfig, embedded_default};
use gatehouse_engine::deps::{CredentialStore, ProcessEnvironment};
use gatehouse_engine::secret::Secret;
use gatehouse_engine::store::SqliteStore;

/// Longest secret `keys set` accepts from standard input.
const MAX_SECRET_BYTES: u64 = 16 * 1024;

#[derive(Subcommand)]
pub enum KeysAction {
    /// Store a secret in the OS keychain under service `gatehouse`, read from standard
    /// input (provider keys use `provider:<name>`; a config references the item as
    /// `${keyring:gatehouse/<account>}`).
    Set { account: String },
    /// Remove a secret from the OS keychain.
    Rm { account: String },
}

/// `gatehouse configure-claude-code [--undo | --status]`.
pub fn configure_claude_code(data: &Path, undo: bool, status: bool) -> Result<(), String> {
    let settings = ClaudeSettings::new(claude_settings_path()?);
    let shown = settings.path().display().to_string();
    if undo {
        let message = match settings.undo().map_err(|e| e.to_string())? {
            UndoOutcome::NothingToUndo => {
                format!("nothing to undo: Gatehouse has not configured {shown}")
            }
            UndoOutcome::Restored => format!("restored {shown} from the backup"),
            UndoOutcome::Reverted { kept } if kept.is_empty() => {
                format!("removed Gatehouse's settings from {shown}; your later edits are kept")
            }
            UndoOutcome::Reverted { kept } => format!(
                "removed Gatehouse's settings from {shown}; kept your later changes to {}",
                kept.join(", ")
            ),
        };
        println!("gatehouse: {message}");
        return Ok(());
    }
    let target = target(data)?;
    if status {
        match settings.status(&target).map_err(|e| e.to_string())? {
            Status::NotConfigured => {
                println!("gatehouse: Claude Code is not configured for Gatehouse ({shown})");
            }
            Status::Configured => println!(
                "gatehouse: Claude Code is configured for Gatehouse at {} ({shown})",
                target.base_url
            ),
            Status::Drifted { keys } => {
                println!("gatehouse: Claude Code's settings drifted from Gatehouse's ({shown}):");
                for d in keys {
                    println!("  {d}");
                }
                println!("gatehouse: run `gatehouse configure-claude-code` to apply them again");
            }
        }
        return Ok(());
    }
    // A malformed settings file is reported before anything is stored anywhere.
    settings.status(&target).map_err(|e| e.to_string())?;
    let keychain = writable_keychain("cannot configure Claude Code")?;
    ensure_local_token(&keychain, data)?;
    match settings.configure(&target).map_err(|e| e.to_string())? {
        ConfigureOutcome::Unchanged => {
            println!("gatehouse: Claude Code is already configured for Gatehouse ({shown})");
        }
        ConfigureOutcome::Written { backup } => {
            println!(
                "gatehouse: configured Claude Code ({shown}): ANTHROPIC_BASE_URL={}, and \
                 apiKeyHelper prints the local token from the keychain",
                target.base_url
            );
            if let Some(b) = backup {
                println!(
                    "gatehouse: the previous settings are saved in {}",
                    b.display()
                );
            }
            println!("gatehouse: `gatehouse configure-claude-code --undo` reverts this");
        }
    }
    Ok(())
}

/// `gatehouse keys set|rm <account>`.
pub fn keys(action: KeysAction) -> Result<(), String> {
    match action {
        KeysAction::Set { account } => {
            check_account(&account)?;
            let secret = read_secret()?;
            let keychain = writable_keychain("cannot store the key")?;
            keychain
                .set(SERVICE, &account, &secret)
                .map_err(|e| format!("cannot store the key: {e}"))?;
            println!(
                "gatehouse: stored `{account}` in the keychain; reference it as \
                 ${{keyring:{SERVICE}/{account}}}"
            );
            Ok(())
        }
        KeysAction::Rm { account } => {
            check_account(&account)?;
            let keychain = KeyringStore::native().map_err(|e| e.to_string())?;
            if keychain
                .remove(SERVICE, &account)
                .map_err(|e| format!("cannot remove the key: {e}"))?
            {
                println!("gatehouse: removed `{account}` from the keychain");
                Ok(())
            } else {
                Err(format!("no key `{account}` in the keychain"))
            }
        }
    }
}

/// `gatehouse token --local`: the local client token, for Claude Code's `apiKeyHelper`.
pub fn print_local_token() -> Result<(), String> {
    let keychain = KeyringStore::native().map_err(|e| e.to_string())?;
    match keychain
        .get(SERVICE, LOCAL_TOKEN_ACCOUNT)
        .map_err(|e| format!("cannot read the local token: {e}"))?
    {
        Some(token) => {
            // Not println!: a closed pipe is an error here, not a panic.
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", token.expose())
                .and_then(|()| out.flush())
                .map_err(|e| format!("cannot print the local token: {e}"))
        }
        None => Err(
            "no local token in the keychain; run `gatehouse configure-claude-code` \
                     or start the Gatehouse app"
                .into(),
        ),
    }
}

fn claude_settings_path() -> Result<PathBuf, String> {
    let home = directories::BaseDirs::new()
        .map(|d| d.home_dir().to_owned())
        .ok_or("cannot find the home directory for Claude Code's settings")?;
    let dir = std::env::var_os("CLAUDE_CONFIG_DIR").map(PathBuf::from);
    Ok(settings_path(&home, dir.as_deref()))
}

fn target(data: &Path) -> Result<Target, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate gatehouse: {e}"))?;
    let port = saved_port(data)?.unwrap_or(DEFAULT_LOCAL_PORT);
    Target::new(&format!("http://127.0.0.1:{port}"), &exe).map_err(|e| e.to_string())
}

/// The SQLite file of the embedded default (and the tray), in the data directory.
fn db_path(data: &Path) -> Result<PathBuf, String> {
    let config = embedded_default(&ProcessEnvironment, data, None).map_err(|e| e.to_string())?;
    match config.store {
        StoreConfig::Sqlite { path } => Ok(path),
        _ => Err("the embedded default keeps its state in SQLite".into()),
    }
}

/// The tray's (and the embedded default's) store in the data directory; it must exist.
pub(crate) fn open_data_store(data: &Path) -> Result<SqliteStore, String> {
    let path = db_path(data)?;
    if !path.exists() {
        return Err(format!("no Gatehouse database at {}", path.display()));
    }
    open_store(&path)
}

fn open_store(path: &Path) -> Result<SqliteStore, String> {
    SqliteStore::open(path, crate::chrono_now()).map_err(|e| format!("{}: {e}", path.display()))
}

/// The port in the desktop settings, when the app has saved some.
pub(crate) fn saved_port(data: &Path) -> Result<Option<u16>, String> {
    let path = db_path(data)?;
    if !path.exists() {
        return Ok(None);
    }
    let state = StateStore::new(Arc::new(open_store(&path)?));
    let settings: Option<Settings> = crate::runtime()?
        .block_on(state.get(SETTINGS_KEY))
        .map_err(|e| format!("cannot read the desktop settings: {e}"))?;
    Ok(settings.map(|s| s.port))
}

/// The native keychain, proven writable; otherwise the reason, and nothing is stored.
fn writable_keychain(what: &str) -> Result<KeyringStore, String> {
    let keychain = KeyringStore::native().map_err(|e| format!("{what}: {e}"))?;
    keychain.probe().map_err(|e| format!("{what}: {e}"))?;
    Ok(keychain)
}

/// The local token in the keychain (generated when missing) and its hash in the store.
fn ensure_local_token(keychain: &KeyringStore, data: &Path) -> Result<(), String> {
    let token = local_key::keep_in(keychain, SERVICE, LOCAL_TOKEN_ACCOUNT)
        .map_err(|e| format!("cannot keep the local token: {e}"))?;
    let path = db_path(data)?;
    let store = open_store(&path)?;
    let adopted = crate::runtime()?
        .block_on(local_key::adopt(&store, &token, crate::chrono_now()))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if adopted == local_key::Adopted::Replaced {
        println!(
            "gatehouse: the local client key is now the token in the keychain \
             (a key issued before stops working; restart a running gateway)"
        );
    }
    Ok(())
}

fn check_account(account: &str) -> Result<(), String> {
    if account.is_empty() || account.len() > 200 || account.chars().any(char::is_control) {
        return Err("the account must be 1 to 200 characters without control characters".into());
    }
    if account == LOCAL_TOKEN_ACCOUNT {
        return Err(format!(
            "`{LOCAL_TOKEN_ACCOUNT}` is managed by Gatehouse (`gatehouse configure-claude-code` \
             creates it)"
        ));
    }
    Ok(())
}

/// The secret from standard input: one line from a terminal, else everything piped in,
/// without the trailing line break.
fn read_secret() -> Result<Secret, String> {
    let stdin = std::io::stdin();
    let mut text = String::new();
    if stdin.is_terminal() {
        eprintln!("gatehouse: paste the secret and press Enter:");
        stdin
            .read_line(&mut text)
            .map_err(|e| format!("cannot read the secret from standard input: {e}"))?;
    } else {
        stdin
            .lock()
            .take(MAX_SECRET_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read the secret from standard input: {e}"))?;
        if text.len() as u64 > MAX_SECRET_BYTES {
            return Err(format!(
                "the secret is longer than {MAX_SECRET_BYTES} bytes"
            ));
        }
    }
    // Trimmed in place and moved into the Secret (zeroed on drop), not copied.
    let len = text.trim_end_matches(['\r', '\n']).len();
    text.truncate(len);
    let secret = Secret::new(text);
    if secret.is_empty() {
        return Err(
            "no secret on standard input (pipe it in, e.g. `gatehouse keys set \
                    provider:anthropic < keyfile`)"
                .into(),
        );
    }
    Ok(secret)
}
