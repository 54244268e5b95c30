//! Duration-aware scheduling through the command line: a previous run's JUnit file orders the
//! parallel lane longest first; a file that cannot be used costs one warning line and the run
//! goes on with estimates; `--provider` skips cloud-only cases at once.

use std::path::Path;
use std::process::{Command, Output};

/// Three quick cases that pass on the simulator's Windows nodes.
const CASES: [&str; 3] = [
    "[sig-windows] [sig-network] Windows pod networking Pod to Pod should connect by pod IP over TCP",
    "[sig-windows] [sig-network] Windows pod networking Pod to Pod should connect by pod IP over UDP",
    "[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]",
];

fn focus_all() -> Vec<String> {
    CASES
        .iter()
        .flat_map(|c| ["--focus".to_string(), format!("^{}$", regex::escape(c))])
        .collect()
}

fn run(report_dir: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crossconf"))
        .args(["run", "--sim", "--parallel", "1", "--no-progress", "--report-dir"])
        .arg(report_dir)
        .args(focus_all())
        .args(extra)
        .env_remove("KUBECONFIG")
        .env_remove("KUBE_TEST_REPO_LIST")
        .env_remove("ARTIFACTS")
        .env_remove("CROSSCONF_LOG")
        .output()
        .expect("crossconf runs")
}

/// The case names in the order the progress lines report them finished.
fn finish_order(stdout: &str) -> Vec<&'static str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("PASS") || l.starts_with("FAIL"))
        .filter_map(|l| CASES.iter().copied().find(|c| l.contains(c)))
        .collect()
}

fn junit(times: [f64; 3]) -> String {
    let rows: String = CASES
        .iter()
        .zip(times)
        .map(|(name, t)| {
            let name = name.replace('&', "&amp;").replace('"', "&quot;");
            format!("  <testcase name=\"{name}\" time=\"{t}\"/>\n")
        })
        .collect();
    format!("<testsuites><testsuite name=\"crossconf\">\n{rows}</testsuite></testsuites>\n")
}

#[test]
fn a_previous_junit_file_orders_the_lane_longest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let durations = tmp.path().join("previous.xml");
    // The catalogue order is 0, 1, 2 (networking before pods); the file says 2 > 0 > 1.
    std::fs::write(&durations, junit([30.0, 5.0, 90.0])).unwrap();
    let out = run(
        &tmp.path().join("r1"),
        &["--durations-from", durations.to_str().unwrap()],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(
        finish_order(&stdout),
        [CASES[2], CASES[0], CASES[1]],
        "stdout:\n{stdout}"
    );
    let schedule = stdout
        .lines()
        .find(|l| l.starts_with("Schedule:"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        schedule.contains("3 parallel cases on 1 lane") && schedule.contains("3 measured in"),
        "{schedule}"
    );
    // One lane: the expected wall is the sum, 2m05s, which is also the bound.
    assert!(
        schedule.contains("expected wall 2m05s (critical-path bound 2m05s)"),
        "{schedule}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("Wall ") && l.contains("x the critical-path bound")),
        "{stdout}"
    );
    assert!(!stderr.contains("warning"), "{stderr}");

    // Without --durations-from, the report directory's previous JUnit file is used: this
    // run's own times, so the order follows what the first run measured.
    let again = run(&tmp.path().join("r1"), &[]);
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(0), "{stdout}");
    let schedule = stdout
        .lines()
        .find(|l| l.starts_with("Schedule:"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        schedule.contains("3 measured in") && schedule.contains("junit_01.xml"),
        "{schedule}"
    );
}

#[test]
fn an_unusable_durations_file_falls_back_to_estimates_with_one_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let malformed = tmp.path().join("bad.xml");
    std::fs::write(&malformed, "<testsuites><testcase name='x' time='soon'/></testsuites>").unwrap();
    let missing = tmp.path().join("missing.xml");
    for (file, problem) in [
        (&malformed, "is not JUnit XML"),
        (&missing, "cannot read durations file"),
    ] {
        let out = run(&tmp.path().join("r"), &["--durations-from", file.to_str().unwrap()]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
        let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
        assert_eq!(warnings.len(), 1, "exactly one warning line:\n{stderr}");
        assert!(
            warnings[0].contains(problem) && warnings[0].ends_with("ordering cases by estimates from their timeouts"),
            "{}",
            warnings[0]
        );
        let schedule = stdout
            .lines()
            .find(|l| l.starts_with("Schedule:"))
            .unwrap_or_else(|| panic!("{stdout}"));
        assert!(schedule.contains("all 3 estimated from timeouts"), "{schedule}");
    }
}

#[test]
fn provider_skips_cloud_load_balancer_cases_at_once() {
    let lb = "[sig-network] LoadBalancers should be able to change the type and ports of a TCP service [Slow]";
    for (args, expected) in [
        (vec!["--sim"], "Only supported for providers [gce gke aws] (not sim)"),
        (
            vec!["--provider", "local"],
            "Only supported for providers [gce gke aws] (not local)",
        ),
        (vec![], "Only supported for providers [gce gke aws] (not skeleton)"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_crossconf"))
            .arg("list")
            .args(&args)
            .args(["--focus", "LoadBalancers", "--output", "json"])
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == lb)
            .unwrap_or_else(|| panic!("{stdout}"));
        assert_eq!(row["selected"], false, "{args:?}: {row}");
        assert_eq!(row["skip_reason"], format!("Provider: {expected}"), "{args:?}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_crossconf"))
        .args([
            "list",
            "--provider",
            "gce",
            "--focus",
            "LoadBalancers",
            "--output",
            "json",
        ])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == lb && r["selected"] == true)
    );
}
