//! The IT bootstrap file: a central Gatehouse URL and the choices IT locks for the desktop.
//!
//! The file sits at a per-OS system path ([`system_path`]): `/etc/gatehouse/bootstrap.json`
//! on Linux and other Unixes, `/Library/Application Support/Gatehouse/bootstrap.json` on
//! macOS, `%ProgramData%\Gatehouse\bootstrap.json` on Windows. The environment variable
//! [`OVERRIDE_VAR`] points elsewhere (tests, packaging checks). JSON is the format; a path
//! ending in `.yaml` or `.yml` is read as YAML.
//!
//! The schema is strict (`deny_unknown_fields`): a typo is an error, not an ignored lock.
//! [`load`] answers `Ok(None)` when there is no file, and otherwise either the parsed
//! [`Bootstrap`] or an error naming the file and the field path. Callers show that error in
//! the UI and the log; it is never silently ignored.

use std::path::{Path, PathBuf};

use gatehouse_engine::deps::Environment;
use serde::Deserialize;

/// Overrides the system path of the bootstrap file.
pub const OVERRIDE_VAR: &str = "GATEHOUSE_BOOTSTRAP_FILE";

/// Longest accepted `login_notice`, in characters.
pub const MAX_LOGIN_NOTICE_CHARS: usize = 1000;

/// What IT set for this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bootstrap {
    /// The central Gatehouse (https; http only on a loopback host).
    pub central_url: url::Url,
    /// The user cannot switch to standalone mode.
    pub force_connected_mode: bool,
    /// The user may add their own providers (standalone mode). Default true.
    pub allow_local_providers: bool,
    /// Configure Claude Code on first start without asking.
    pub auto_configure_claude_code: bool,
    /// Shown on the login prompt.
    pub login_notice: Option<String>,
}

/// Why the bootstrap file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("cannot read the bootstrap file {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("bootstrap file {path}: {field}: {reason}")]
    Invalid {
        path: PathBuf,
        /// The field path (`.` when the document itself is wrong).
        field: String,
        reason: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBootstrap {
    central_url: String,
    #[serde(default)]
    force_connected_mode: bool,
    #[serde(default = "yes")]
    allow_local_providers: bool,
    #[serde(default)]
    auto_configure_claude_code: bool,
    #[serde(default)]
    login_notice: Option<String>,
}

fn yes() -> bool {
    true
}

/// Where the bootstrap file is looked for: [`OVERRIDE_VAR`] when set and not empty, else
/// this platform's system path.
pub fn path(env: &dyn Environment) -> PathBuf {
    match env.var(OVERRIDE_VAR) {
        Some(p) if !p.trim().is_empty() => PathBuf::from(p),
        _ => system_path(env),
    }
}

/// This platform's system path of the bootstrap file.
pub fn system_path(env: &dyn Environment) -> PathBuf {
    if cfg!(windows) {
        let base = env
            .var("ProgramData")
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| r"C:\ProgramData".to_owned());
        PathBuf::from(base).join("Gatehouse").join("bootstrap.json")
    } else if cfg!(target_os = "macos") {
        PathBuf::from("/Library/Application Support/Gatehouse/bootstrap.json")
    } else {
        let _ = env;
        PathBuf::from("/etc/gatehouse/bootstrap.json")
    }
}

/// Reads the bootstrap file at [`path`]. `Ok(None)` when it does not exist.
pub fn load(env: &dyn Environment) -> Result<Option<Bootstrap>, BootstrapError> {
    load_from(env, &path(env))
}

/// Reads the bootstrap file at `file`. `Ok(None)` when it does not exist.
pub fn load_from(env: &dyn Environment, file: &Path) -> Result<Option<Bootstrap>, BootstrapError> {
    let text = match env.read_file(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(BootstrapError::Read {
                path: file.to_owned(),
                reason: e.to_string(),
            });
        }
    };
    parse(file, &text).map(Some)
}

/// Parses the text of a bootstrap file; `file` names it in errors and picks YAML for
/// `.yaml`/`.yml`.
pub fn parse(file: &Path, text: &str) -> Result<Bootstrap, BootstrapError> {
    let invalid = |field: String, reason: String| BootstrapError::Invalid {
        path: file.to_owned(),
        field,
        reason,
    };
    let yaml = file
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    // A document first (syntax errors carry line and column), then the schema with field
    // paths. Only an object is a bootstrap document: serde would fill a struct from an array.
    let doc: serde_json::Value = if yaml {
        serde_yaml_ng::from_str(text).map_err(|e| invalid(".".into(), e.to_string()))?
    } else {
        serde_json::from_str(text).map_err(|e| invalid(".".into(), e.to_string()))?
    };
    if !doc.is_object() {
        return Err(invalid(
            ".".into(),
            "the document must be an object with `central_url`".into(),
        ));
    }
    let raw: RawBootstrap = serde_path_to_error::deserialize(doc)
        .map_err(|e| invalid(field_path(e.path()), e.inner().to_string()))?;
    let central_url =
        check_url(&raw.central_url).map_err(|reason| invalid("central_url".into(), reason))?;
    let login_notice = match raw.login_notice {
        Some(n) => Some(check_notice(n).map_err(|reason| invalid("login_notice".into(), reason))?),
        None => None,
    };
    Ok(Bootstrap {
        central_url,
        force_connected_mode: raw.force_connected_mode,
        allow_local_providers: raw.allow_local_providers,
        auto_configure_claude_code: raw.auto_configure_claude_code,
        login_notice,
    })
}

fn field_path(p: &serde_path_to_error::Path) -> String {
    let s = p.to_string();
    if s.is_empty() { ".".into() } else { s }
}

fn check_url(s: &str) -> Result<url::Url, String> {
    let u = url::Url::parse(s.trim()).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(format!("must be an http or https URL, not {}:", u.scheme()));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err("the URL has no host".into());
    }
    if !crate::central::secure_enough(&u) {
        return Err(
            "must use https: plain http is allowed only for a loopback host (localhost, 127.0.0.1, [::1])"
                .into(),
        );
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err("the URL must not carry a user name or password".into());
    }
    if u.query().is_some() || u.fragment().is_some() {
        return Err("the URL must not have a query or fragment".into());
    }
    Ok(u)
}

fn check_notice(n: String) -> Result<String, String> {
    let chars = n.chars().count();
    if chars > MAX_LOGIN_NOTICE_CHARS {
        return Err(format!(
            "is {chars} characters long; at most {MAX_LOGIN_NOTICE_CHARS} are allowed"
        ));
    }
    if n.chars().any(|c| c.is_control() && c != '\n') {
        return Err("must not contain control characters other than line breaks".into());
    }
    let trimmed = n.trim();
    if trimmed.is_empty() {
        return Err("must not be empty (leave it out instead)".into());
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use gatehouse_engine::deps::MapEnvironment;

    const FILE: &str = "/etc/gatehouse/bootstrap.json";

    fn env_with(text: &str) -> MapEnvironment {
        MapEnvironment::default().with_file(FILE, text)
    }

    fn ok(text: &str) -> Bootstrap {
        load_from(&env_with(text), Path::new(FILE))
            .unwrap()
            .unwrap()
    }

    fn err(text: &str) -> String {
        load_from(&env_with(text), Path::new(FILE))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn absent_file_is_none() {
        assert_eq!(
            load_from(&MapEnvironment::default(), Path::new(FILE)).unwrap(),
            None
        );
    }

    #[test]
    fn minimal_file_takes_the_defaults() {
        let b = ok(r#"{"central_url": "https://gatehouse.corp.example"}"#);
        assert_eq!(b.central_url.as_str(), "https://gatehouse.corp.example/");
        assert!(!b.force_connected_mode);
        assert!(b.allow_local_providers);
        assert!(!b.auto_configure_claude_code);
        assert_eq!(b.login_notice, None);
    }

    #[test]
    fn every_field_is_read() {
        let b = ok(r#"{
            "central_url": "https://10.0.0.5:8080/gw",
            "force_connected_mode": true,
            "allow_local_providers": false,
            "auto_configure_claude_code": true,
            "login_notice": "  Use your corp account.\nQuestions: #it-help  "
        }"#);
        assert_eq!(b.central_url.as_str(), "https://10.0.0.5:8080/gw");
        assert!(b.force_connected_mode);
        assert!(!b.allow_local_providers);
        assert!(b.auto_configure_claude_code);
        assert_eq!(
            b.login_notice.as_deref(),
            Some("Use your corp account.\nQuestions: #it-help")
        );
    }

    #[test]
    fn central_url_is_required_and_checked() {
        assert_eq!(
            err("{}"),
            "bootstrap file /etc/gatehouse/bootstrap.json: .: missing field `central_url`"
        );
        for (url, why) in [
            ("gatehouse.corp", "not a URL"),
            (
                "ftp://gatehouse.corp",
                "must be an http or https URL, not ftp:",
            ),
            ("https://user:pw@gatehouse.corp", "user name or password"),
            ("https://gatehouse.corp/?a=1", "query or fragment"),
            ("file:///etc/passwd", "must be an http or https URL"),
            (
                "http://gatehouse.corp",
                "plain http is allowed only for a loopback host",
            ),
        ] {
            let e = err(&format!(r#"{{"central_url": "{url}"}}"#));
            assert!(
                e.starts_with("bootstrap file /etc/gatehouse/bootstrap.json: central_url: "),
                "{e}"
            );
            assert!(e.contains(why), "{url}: {e}");
        }
        let e = err(r#"{"central_url": 5}"#);
        assert!(
            e.contains(": central_url: invalid type: integer `5`"),
            "{e}"
        );
    }

    #[test]
    fn each_lock_must_be_a_bool() {
        for field in [
            "force_connected_mode",
            "allow_local_providers",
            "auto_configure_claude_code",
        ] {
            let e = err(&format!(
                r#"{{"central_url": "https://g.example", "{field}": "yes"}}"#
            ));
            assert!(
                e.contains(&format!(
                    ": {field}: invalid type: string \"yes\", expected a boolean"
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn login_notice_is_limited() {
        let long = "x".repeat(MAX_LOGIN_NOTICE_CHARS + 1);
        let e = err(&format!(
            r#"{{"central_url": "https://g.example", "login_notice": "{long}"}}"#
        ));
        assert!(
            e.contains(": login_notice: is 1001 characters long; at most 1000"),
            "{e}"
        );
        let exact = "é".repeat(MAX_LOGIN_NOTICE_CHARS);
        let b = ok(&format!(
            r#"{{"central_url": "https://g.example", "login_notice": "{exact}"}}"#
        ));
        assert_eq!(b.login_notice.map(|n| n.chars().count()), Some(1000));
        let e = err(r#"{"central_url": "https://g.example", "login_notice": "a\u0007b"}"#);
        assert!(
            e.contains(": login_notice: must not contain control characters"),
            "{e}"
        );
        let e = err(r#"{"central_url": "https://g.example", "login_notice": "   "}"#);
        assert!(e.contains(": login_notice: must not be empty"), "{e}");
        let e = err(r#"{"central_url": "https://g.example", "login_notice": ["a"]}"#);
        assert!(e.contains(": login_notice: invalid type: sequence"), "{e}");
    }

    #[test]
    fn unknown_fields_and_bad_documents_are_errors() {
        let e = err(r#"{"central_url": "https://g.example", "force_conected_mode": true}"#);
        assert!(e.contains("unknown field `force_conected_mode`"), "{e}");
        let e = err(r#"{"central_url": "https://g.example""#);
        assert!(
            e.starts_with("bootstrap file /etc/gatehouse/bootstrap.json: "),
            "{e}"
        );
        assert!(e.contains("EOF"), "{e}");
        let e = err(r#"["https://g.example"]"#);
        assert!(
            e.ends_with(": .: the document must be an object with `central_url`"),
            "{e}"
        );
        let e = err("null");
        assert!(
            e.ends_with(": .: the document must be an object with `central_url`"),
            "{e}"
        );
        let e = err(r#"{"central_url": "https://g.example"} {}"#);
        assert!(
            e.contains(": .: trailing characters at line 1 column 38"),
            "{e}"
        );
        let e = err("");
        assert!(e.contains("EOF"), "{e}");
    }

    #[test]
    fn unreadable_file_is_an_error_not_absent() {
        struct Broken;
        impl Environment for Broken {
            fn var(&self, _: &str) -> Option<String> {
                None
            }
            fn read_file(&self, _: &Path) -> std::io::Result<String> {
                Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
            }
        }
        let e = load(&Broken).unwrap_err().to_string();
        assert!(e.starts_with("cannot read the bootstrap file "), "{e}");
        assert!(e.contains("permission denied"), "{e}");
    }

    #[test]
    fn yaml_by_extension() {
        let env = MapEnvironment::default().with_file(
            "/tmp/b.yaml",
            "central_url: https://g.example\nforce_connected_mode: true\n",
        );
        let b = load_from(&env, Path::new("/tmp/b.yaml")).unwrap().unwrap();
        assert!(b.force_connected_mode);
        let env = MapEnvironment::default()
            .with_file("/tmp/b.yml", "central_url: https://g.example\nlocks: {}\n");
        let e = load_from(&env, Path::new("/tmp/b.yml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bootstrap file /tmp/b.yml: "), "{e}");
        assert!(e.contains("unknown field `locks`"), "{e}");
    }

    #[test]
    fn override_variable_picks_the_file() {
        let env = MapEnvironment::default()
            .with_var(OVERRIDE_VAR, "/tmp/test-bootstrap.json")
            .with_file(
                "/tmp/test-bootstrap.json",
                r#"{"central_url": "https://override.example"}"#,
            )
            .with_file(FILE, r#"{"central_url": "https://system.example"}"#);
        assert_eq!(path(&env), PathBuf::from("/tmp/test-bootstrap.json"));
        let b = load(&env).unwrap().unwrap();
        assert_eq!(b.central_url.host_str(), Some("override.example"));
        // Set but missing: absent (the override is not a fallback to the system file).
        let env = MapEnvironment::default()
            .with_var(OVERRIDE_VAR, "/tmp/none.json")
            .with_file(FILE, r#"{"central_url": "https://system.example"}"#);
        assert_eq!(load(&env).unwrap(), None);
        // Empty: the system path.
        let env = MapEnvironment::default().with_var(OVERRIDE_VAR, " ");
        assert_eq!(path(&env), system_path(&env));
    }

    #[test]
    fn system_path_per_platform() {
        let env = MapEnvironment::default().with_var("ProgramData", r"D:\PD");
        let p = system_path(&env);
        if cfg!(windows) {
            assert_eq!(p, PathBuf::from(r"D:\PD\Gatehouse\bootstrap.json"));
        } else if cfg!(target_os = "macos") {
            assert_eq!(
                p,
                PathBuf::from("/Library/Application Support/Gatehouse/bootstrap.json")
            );
        } else {
            assert_eq!(p, PathBuf::from("/etc/gatehouse/bootstrap.json"));
        }
    }
}
