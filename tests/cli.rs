//! The real binary, driven as a user drives it: exit codes, one-line errors, listings, and
//! that bad input leaves no report behind.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn crossconf() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_crossconf"));
    c.env_remove("KUBECONFIG")
        .env_remove("ARTIFACTS")
        .env_remove("KUBE_TEST_REPO_LIST")
        .env_remove("CROSSCONF_LOG")
        .env("CI", "true");
    c
}

fn run(args: &[&str]) -> Output {
    crossconf().args(args).output().expect("the binary runs")
}

/// Asserts exit code 2 with exactly one non-empty line on stderr that contains `needle`.
fn assert_usage_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "expected exit 2, stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got: {stderr:?}");
    assert!(
        lines[0].to_lowercase().contains(&needle.to_lowercase()),
        "expected {needle:?} in {:?}",
        lines[0]
    );
}

fn assert_no_report(dir: &Path) {
    let entries: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(entries.is_empty(), "bad input must leave no report, found {entries:?}");
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const KUBECONFIG_CLOSED_PORT: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\n    insecure-skip-tls-verify: true\ncontexts:\n- name: a\n  context:\n    cluster: c\n    user: u\ncurrent-context: a\nusers:\n- name: u\n  user:\n    token: t\n";

#[test]
fn bad_inputs_give_one_line_and_exit_2_with_no_report() {
    let tmp = tempfile::tempdir().unwrap();
    let reports = tmp.path().join("reports");
    let rd = reports.display().to_string();
    let good_kc = write(tmp.path(), "kc", KUBECONFIG_CLOSED_PORT);
    let bad_suite = write(tmp.path(), "bad.yaml", "name: x\nfocus: [unclosed\n");
    let unknown_key = write(tmp.path(), "unknown.yaml", "name: x\nfocuss: ['a']\n");
    let malformed_kc = write(tmp.path(), "malformed", "this: [is not a kubeconfig\n");
    let missing = tmp.path().join("missing").display().to_string();

    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "--kubeconfig", &missing, "--report-dir", &rd], "kubeconfig"),
        (
            vec!["run", "--kubeconfig", &malformed_kc, "--report-dir", &rd],
            "kubeconfig",
        ),
        (
            vec![
                "run",
                "--kubeconfig",
                &good_kc,
                "--context",
                "nope",
                "--report-dir",
                &rd,
            ],
            "kubeconfig",
        ),
        (
            vec!["run", "--kubeconfig", &good_kc, "--focus", "([", "--report-dir", &rd],
            "regex",
        ),
        (
            vec![
                "run",
                "--kubeconfig",
                &good_kc,
                "--label-filter",
                "sig-windows && (",
                "--report-dir",
                &rd,
            ],
            "label",
        ),
        (
            vec![
                "run",
                "--kubeconfig",
                &good_kc,
                "--suite",
                &bad_suite,
                "--report-dir",
                &rd,
            ],
            "suite",
        ),
        (
            vec![
                "run",
                "--kubeconfig",
                &good_kc,
                "--suite",
                &unknown_key,
                "--report-dir",
                &rd,
            ],
            "focuss",
        ),
        (
            vec!["run", "--kubeconfig", &good_kc, "--shard", "3/2", "--report-dir", &rd],
            "shard",
        ),
        (
            vec!["run", "--kubeconfig", &good_kc, "--parallel", "0", "--report-dir", &rd],
            "parallel",
        ),
        (
            vec![
                "run",
                "--kubeconfig",
                &good_kc,
                "--rerun-failed",
                &missing,
                "--report-dir",
                &rd,
            ],
            "missing",
        ),
        (
            vec![
                "run",
                "--kubeconfig",
                &good_kc,
                "--provider",
                "GCE",
                "--report-dir",
                &rd,
            ],
            "unknown provider \"GCE\"",
        ),
        (
            vec!["run", "--sim", "--provider", "gce", "--report-dir", &rd],
            "contradicts --sim",
        ),
        (vec!["list", "--provider", "azure-stack"], "known providers: skeleton"),
        (vec!["run", "--no-such-flag"], "--no-such-flag"),
        (vec!["list", "--node-os-distro", "darwin"], "darwin"),
    ];
    for (args, needle) in cases {
        let out = run(&args);
        assert_usage_error(&out, needle);
        assert_no_report(&reports);
    }
}

#[test]
fn unreachable_server_is_exit_2_within_30_seconds() {
    let tmp = tempfile::tempdir().unwrap();
    let kc = write(tmp.path(), "kc", KUBECONFIG_CLOSED_PORT);
    let reports = tmp.path().join("reports");
    let t0 = Instant::now();
    let out = run(&[
        "run",
        "--kubeconfig",
        &kc,
        "--report-dir",
        &reports.display().to_string(),
    ]);
    assert!(t0.elapsed() < Duration::from_secs(30), "took {:?}", t0.elapsed());
    assert_usage_error(&out, "unreachable");
    assert_no_report(&reports);
}

#[test]
fn list_json_skips_linux_only_cases_on_windows_with_a_reason() {
    let out = run(&["list", "--node-os-distro", "windows", "--output", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("list prints a JSON array");
    let catalog = crossconf::cases::all();
    assert_eq!(rows.len(), catalog.len(), "every registered case is listed");
    let linux_only: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["name"].as_str().unwrap().contains("[LinuxOnly]"))
        .collect();
    assert!(!linux_only.is_empty(), "the catalogue has [LinuxOnly] cases");
    for r in &linux_only {
        assert_eq!(r["selected"], false, "{r}");
        assert!(r["skip_reason"].as_str().unwrap().contains("LinuxOnly"), "{r}");
    }
    let out = run(&["list", "--node-os-distro", "linux", "--output", "json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    for r in rows
        .iter()
        .filter(|r| r["name"].as_str().unwrap().contains("[LinuxOnly]"))
    {
        let disruptive = r["name"].as_str().unwrap().contains("[Disruptive]")
            || r["name"].as_str().unwrap().contains("[Feature:")
            || r["name"].as_str().unwrap().contains("[Flaky]");
        if !disruptive {
            assert_eq!(r["selected"], true, "{r}");
        }
    }
}

#[test]
fn dry_run_prints_the_plan_without_a_cluster() {
    let out = run(&["run", "--dry-run", "--focus", "Granular"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("dry run: would run"), "{text}");
}
