//! The server deployment files checked as their tools would: the Dockerfile (hadolint, and
//! what it must keep: headless build, non-root user, /readyz healthcheck, state in a
//! volume), the Kubernetes manifests (kubernetes-validate against the real schemas, and how
//! the pieces fit), the systemd unit (`systemd-analyze verify` and `security`), and every
//! shipped gateway.yaml through `gatehouse check-config` with the values the files provide.
//! The tools come from scripts/setup.sh (a venv in .tools/); a missing tool skips its check
//! with a message, except in CI where it fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml_ng::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn yaml(rel: &str) -> Value {
    serde_yaml_ng::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The tool from setup.sh's venv, else from PATH; `None` (with a message) outside CI.
fn tool(name: &str) -> Option<PathBuf> {
    let venv = root().join(".tools/venv/bin").join(name);
    if venv.is_file() {
        return Some(venv);
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    if on_path.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is missing: scripts/setup.sh installs it"
        );
        eprintln!("SKIPPED: {name} is not installed (scripts/setup.sh installs it)");
    }
    on_path
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `gatehouse check-config` on `yaml_text` with `env` as the only environment.
fn check_config_with(yaml_text: &str, env: &BTreeMap<String, String>) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.yaml");
    std::fs::write(&file, yaml_text).unwrap();
    run(Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["--data-dir", dir.path().to_str().unwrap(), "check-config"])
        .arg(&file)
        .env_clear()
        .envs(env))
}

fn check_config(what: &str, yaml_text: &str, env: &BTreeMap<String, String>) {
    let (ok, text) = check_config_with(yaml_text, env);
    assert!(ok, "{what}: {text}");
}

/// The `${VAR}` names a config text refers to.
fn env_refs(text: &str) -> Vec<String> {
    text.split("${")
        .skip(1)
        .filter_map(|s| s.split_once('}').map(|(name, _)| name.to_owned()))
        .filter(|name| !name.contains(':'))
        .collect()
}

#[test]
fn dockerfile_builds_headless_and_runs_non_root_with_a_readyz_healthcheck() {
    let text = read("Dockerfile");
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    let final_stage = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .expect("a FROM");
    assert!(
        lines.iter().filter(|l| l.starts_with("FROM ")).count() >= 2,
        "multi-stage"
    );
    let build = lines
        .iter()
        .find(|l| l.contains("cargo build"))
        .expect("a cargo build");
    for flag in [
        "--release",
        "--locked",
        "-p gatehouse",
        "--no-default-features",
    ] {
        assert!(build.contains(flag), "the build misses {flag}: {build}");
    }
    let runtime = &lines[final_stage..];
    let user = runtime
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("the runtime stage sets USER");
    let uid = user.split(':').next().unwrap();
    assert!(!matches!(uid, "0" | "root" | ""), "USER {user}");
    let healthcheck = runtime
        .iter()
        .position(|l| l.starts_with("HEALTHCHECK"))
        .expect("a HEALTHCHECK");
    let cmd = runtime[healthcheck..=healthcheck + 1].join(" ");
    assert!(
        cmd.contains("\"healthcheck\"") && cmd.contains("/readyz"),
        "{cmd}"
    );
    assert!(runtime.contains(&"VOLUME [\"/var/lib/gatehouse\"]"));
    assert!(runtime.contains(&"STOPSIGNAL SIGTERM"));
    assert!(
        runtime
            .iter()
            .any(|l| l.starts_with("ENTRYPOINT") && l.contains("/var/lib/gatehouse")),
        "the data directory is the volume"
    );

    // The image's default config keeps its state in the volume and passes check-config.
    let config = read("deploy/container/gateway.yaml");
    let store: Value = serde_yaml_ng::from_str(&config).unwrap();
    let sqlite = store["store"]["sqlite_path"].as_str().unwrap();
    assert!(sqlite.starts_with("/var/lib/gatehouse/"), "{sqlite}");
    let env: BTreeMap<String, String> = env_refs(&config)
        .into_iter()
        .map(|name| {
            let value = match name.as_str() {
                "GATEHOUSE_PUBLIC_URL" => "https://gatehouse.example.com".to_owned(),
                _ => format!("{}-0123456789abcdef0123456789abcdef", name.to_lowercase()),
            };
            (name, value)
        })
        .collect();
    assert_eq!(
        env.keys().cloned().collect::<Vec<_>>(),
        [
            "ANTHROPIC_API_KEY",
            "GATEHOUSE_CLIENT_KEY",
            "GATEHOUSE_PUBLIC_URL"
        ]
    );
    check_config("deploy/container/gateway.yaml", &config, &env);

    let ignore = read(".dockerignore");
    for entry in ["target", "**/node_modules", "ui/dist", ".git"] {
        assert!(ignore.lines().any(|l| l == entry), ".dockerignore: {entry}");
    }

    let Some(hadolint) = tool("hadolint") else {
        return;
    };
    let (ok, text) = run(Command::new(hadolint).arg(root().join("Dockerfile")));
    assert!(ok, "hadolint: {text}");
}

/// The manifest files `kubectl apply -k deploy/kubernetes` applies, by kind.
fn manifests() -> BTreeMap<String, Value> {
    let kustomization = yaml("deploy/kubernetes/kustomization.yaml");
    let files: Vec<String> = kustomization["resources"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let mut on_disk: Vec<String> = std::fs::read_dir(root().join("deploy/kubernetes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    on_disk.sort();
    let mut listed = files.clone();
    listed.sort();
    assert_eq!(listed, on_disk, "kustomization.yaml lists every manifest");
    files
        .iter()
        .map(|f| {
            let v = yaml(&format!("deploy/kubernetes/{f}"));
            (v["kind"].as_str().unwrap().to_owned(), v)
        })
        .collect()
}

#[test]
fn kubernetes_manifests_validate_and_fit_together() {
    let m = manifests();
    let deployment = &m["Deployment"];
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"].as_u64(), Some(2));
    let labels = &spec["template"]["metadata"]["labels"];
    assert_eq!(&spec["selector"]["matchLabels"], labels);
    assert_eq!(&m["Service"]["spec"]["selector"], labels);
    assert_eq!(
        &m["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"],
        labels
    );
    assert_eq!(
        m["PodDisruptionBudget"]["spec"]["minAvailable"].as_u64(),
        Some(1)
    );

    let pod = &spec["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(
        c["readinessProbe"]["httpGet"]["path"].as_str(),
        Some("/readyz")
    );
    assert_eq!(
        c["livenessProbe"]["httpGet"]["path"].as_str(),
        Some("/healthz")
    );
    assert_eq!(
        c["securityContext"]["readOnlyRootFilesystem"].as_bool(),
        Some(true)
    );
    assert_eq!(
        c["securityContext"]["allowPrivilegeEscalation"].as_bool(),
        Some(false)
    );
    assert_eq!(pod["securityContext"]["runAsNonRoot"].as_bool(), Some(true));
    assert!(c["resources"]["requests"]["memory"].is_string());
    assert!(c["resources"]["limits"]["memory"].is_string());
    let mounts: Vec<&str> = c["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v["mountPath"].as_str().unwrap())
        .collect();
    for path in ["/etc/gatehouse", "/var/lib/gatehouse", "/tmp"] {
        assert!(mounts.contains(&path), "{path} is mounted: {mounts:?}");
    }

    // The config the ConfigMap mounts, with the Secret's values as its environment.
    let config = m["ConfigMap"]["data"]["gateway.yaml"].as_str().unwrap();
    let parsed: Value = serde_yaml_ng::from_str(config).unwrap();
    assert!(
        parsed["store"]["postgres_url"].is_string(),
        "replicas share PostgreSQL"
    );
    let secret: BTreeMap<String, String> =
        serde_yaml_ng::from_value(m["Secret"]["stringData"].clone()).unwrap();
    let refs = env_refs(config);
    for name in &refs {
        assert!(
            secret.contains_key(name),
            "${{{name}}} is not in the Secret"
        );
    }
    assert_eq!(
        c["envFrom"][0]["secretRef"]["name"],
        m["Secret"]["metadata"]["name"]
    );
    // The placeholders cannot be deployed by mistake: the server refuses them...
    let (ok, text) = check_config_with(config, &secret);
    assert!(
        !ok && text.contains("\"message\": \"must be at least 32")
            && text.contains("\"client_keys\",\n      0,\n      \"key\""),
        "{text}"
    );
    // ... and real values of the Secret's shape pass.
    let filled: BTreeMap<String, String> = secret
        .iter()
        .map(|(k, v)| {
            let value = if v == "REPLACE-ME" {
                format!("{}-0123456789abcdef0123456789abcdef", k.to_lowercase())
            } else {
                v.clone()
            };
            (k.clone(), value)
        })
        .collect();
    check_config("deploy/kubernetes configmap gateway.yaml", config, &filled);

    // Stopping: the preStop pause and the drain fit in the grace period.
    let drain_s = parsed["timeouts"]["shutdown_drain_ms"].as_u64().unwrap() / 1000;
    let pre_stop_s = c["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap();
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        pre_stop_s + drain_s < grace,
        "{pre_stop_s} + {drain_s} >= {grace}"
    );

    let Some(validator) = tool("kubernetes-validate") else {
        return;
    };
    let files: Vec<PathBuf> = ["configmap", "secret", "deployment", "service", "pdb"]
        .iter()
        .map(|f| root().join(format!("deploy/kubernetes/{f}.yaml")))
        .collect();
    let (ok, text) = run(Command::new(validator).args(["--strict"]).args(&files));
    assert!(ok, "kubernetes-validate: {text}");
    assert_eq!(
        text.matches(" passed for resource ").count(),
        files.len(),
        "{text}"
    );
}

#[test]
fn systemd_unit_is_sandboxed_and_verifies() {
    let unit = read("deploy/systemd/gatehouse.service");
    for directive in [
        "DynamicUser=yes",
        "StateDirectory=gatehouse",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=\n",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
        "KillSignal=SIGTERM",
        "ExecStart=/usr/bin/gatehouse --data-dir /var/lib/gatehouse serve --config /etc/gatehouse/gateway.yaml",
    ] {
        assert!(unit.contains(directive), "the unit misses {directive:?}");
    }
    let Some(analyze) = tool("systemd-analyze") else {
        return;
    };
    // Verify the unit against the binary under test (the unit names the installed path).
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("gatehouse.service");
    std::fs::write(
        &copy,
        unit.replace("/usr/bin/gatehouse", env!("CARGO_BIN_EXE_gatehouse")),
    )
    .unwrap();
    let (ok, text) = run(Command::new(&analyze).arg("verify").arg(&copy));
    assert!(
        ok && text.trim().is_empty(),
        "systemd-analyze verify: {text}"
    );
    // Exposure 0.0 (locked down) to 10.0; this unit scores 1.2 ("OK").
    let (ok, text) = run(Command::new(&analyze)
        .args(["security", "--offline=yes", "--threshold=20", "--no-pager"])
        .arg(&copy));
    assert!(ok, "systemd-analyze security: {text}");
    assert!(text.contains("Overall exposure level"), "{text}");
}

/// The image's runtime as far as this machine can make it without a container engine:
/// bubblewrap gives the server a read-only root with only the state volume and /tmp
/// writable, the image's config at its path, and uid 65532; it must start, answer
/// `/readyz`, keep its database in the volume and stop on SIGTERM with exit 0.
#[test]
fn the_server_runs_non_root_on_a_read_only_root_filesystem() {
    let Some(bwrap) = tool("bwrap") else {
        return;
    };
    // Namespaces may be refused where this runs nested; the tool itself is then unusable.
    let probe = Command::new(&bwrap)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--unshare-user",
            "--uid",
            "65532",
            "true",
        ])
        .status()
        .unwrap();
    if !probe.success() {
        eprintln!("SKIPPED: bubblewrap cannot make namespaces here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    // The image's config, on a free port.
    let config = dir.path().join("gateway.yaml");
    std::fs::write(
        &config,
        read("deploy/container/gateway.yaml").replace("port: 8080", "port: 0"),
    )
    .unwrap();
    let mut args: Vec<String> = Vec::new();
    let mut arg = |a: &[&str]| args.extend(a.iter().map(|s| s.to_string()));
    for ro in ["/usr", "/etc/ssl", "/etc/hosts", "/etc/resolv.conf"] {
        if Path::new(ro).exists() {
            arg(&["--ro-bind", ro, ro]);
        }
    }
    arg(&[
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
    ]);
    arg(&["--symlink", "usr/bin", "/bin"]);
    arg(&[
        "--ro-bind",
        env!("CARGO_BIN_EXE_gatehouse"),
        "/app/gatehouse",
    ]);
    arg(&[
        "--ro-bind",
        config.to_str().unwrap(),
        "/etc/gatehouse/gateway.yaml",
    ]);
    arg(&["--bind", state.to_str().unwrap(), "/var/lib/gatehouse"]);
    arg(&[
        "--tmpfs",
        "/tmp",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--remount-ro",
        "/",
    ]);
    arg(&[
        "--unshare-user",
        "--uid",
        "65532",
        "--gid",
        "65532",
        "--die-with-parent",
    ]);
    arg(&["/app/gatehouse", "--data-dir", "/var/lib/gatehouse"]);
    arg(&["serve", "--config", "/etc/gatehouse/gateway.yaml"]);
    let mut child = Command::new(&bwrap)
        .args(&args)
        .env_clear()
        .env("GATEHOUSE_PUBLIC_URL", "https://gatehouse.example.com")
        .env("ANTHROPIC_API_KEY", "sk-read-only-root-test")
        .env(
            "GATEHOUSE_CLIENT_KEY",
            "client-key-0123456789abcdef0123456789",
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let first = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .next()
        .map(|l| l.unwrap())
        .unwrap_or_default();
    let Some(port) = first
        .strip_prefix("gatehouse: listening on ")
        .and_then(|url| url.rsplit(':').next())
    else {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "no listening line: {first}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let (ok, text) = run(Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["healthcheck", &format!("http://127.0.0.1:{port}/readyz")]));
    assert!(ok, "{text}");

    // SIGTERM to the server itself (bubblewrap's child), as the container runtime sends it.
    let pid = child.id();
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
    let server = children
        .split_whitespace()
        .next()
        .expect("the server process");
    assert!(
        Command::new("kill")
            .args(["-TERM", server])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("Read-only file system"), "{stderr}");
    let mut written: Vec<String> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert!(
        written.iter().all(|n| n.starts_with("gatehouse.db")),
        "{written:?}"
    );
    assert!(written.contains(&"gatehouse.db".to_owned()), "{written:?}");
}
