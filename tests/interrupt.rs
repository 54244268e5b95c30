//! Interrupts and kills against a simulated cluster running in its own process, as a prow pod
//! or an engineer's terminal would deliver them.
//!
//! - SIGKILL mid-run: the JUnit file still parses and holds every case finished before the kill.
//! - SIGINT or SIGTERM mid-run: exit 130, in-flight cases reported interrupted, no namespace
//!   left with the run's id.
//! - Both hold as well while the cluster is in transient trouble ([`FAULTS`]: every transient
//!   switch at once), when cleanup itself meets refused connections and cut watches.
//! - `CI=true run | cat`: plain progress lines, no terminal escape codes.

#![expect(
    clippy::disallowed_methods,
    reason = "the test paces a real server or process with short sleeps"
)]

mod support;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::sim_process::SimProcess;

/// Every transient fault at once, at the fault matrix's rates but with the API server going down
/// more often, so that the interrupt and the cleanup after it meet it.
const FAULTS: &str = "api-errors=5%,conn-reset=2%,api-latency=3s,api-down=3s/12s,watch-cut=5s,\
                      node-flap=win-1:5s/40s,pull-fail-once,dns-servfail=10%";

fn start_sim(faults: Option<&str>) -> SimProcess {
    match faults {
        Some(f) => SimProcess::start(&["--faults", f], Duration::from_secs(60)),
        None => SimProcess::start(&[], Duration::from_secs(60)),
    }
}

fn run_cmd(sim: &SimProcess, reports: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_crossconf"));
    c.args(["run", "--kubeconfig"])
        .arg(&sim.kubeconfig)
        .arg("--report-dir")
        .arg(reports)
        .args(extra)
        .env("CI", "true")
        .env_remove("CROSSCONF_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// The names of `<testcase>` elements that have finished (anything but a plan placeholder).
fn finished_cases(junit: &Path) -> Vec<(String, String)> {
    let Ok(text) = std::fs::read_to_string(junit) else {
        return Vec::new();
    };
    let doc = roxmltree::Document::parse(&text).expect("the JUnit file always parses");
    doc.descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|n| {
            let state = n
                .children()
                .filter(|c| c.is_element())
                .map(|c| c.tag_name().name().to_string())
                .find(|t| matches!(t.as_str(), "failure" | "error" | "skipped"))
                .unwrap_or_else(|| "passed".into());
            (n.attribute("name").unwrap_or("").to_string(), state)
        })
        .collect()
}

fn wait_for_finished(junit: &Path, n: usize, child: &mut Child) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let done: Vec<_> = finished_cases(junit)
            .into_iter()
            .filter(|(_, s)| s == "passed" || s == "failure")
            .collect();
        if done.len() >= n {
            return done;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the run ended ({status}) before {n} cases finished");
        }
        assert!(Instant::now() < deadline, "fewer than {n} cases finished in 240s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const FOCUS: &str = r"\[sig-node\] Pods|ConfigMap|Secrets";

fn sigkill_keeps_every_finished_case(faults: Option<&str>) {
    let sim = start_sim(faults);
    let tmp = tempfile::tempdir().unwrap();
    let mut child = run_cmd(&sim, tmp.path(), &["--focus", FOCUS, "--node-os-distro", "linux"])
        .spawn()
        .unwrap();
    let junit = tmp.path().join("junit_01.xml");
    let before = wait_for_finished(&junit, 2, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    let after = finished_cases(&junit);
    for case in &before {
        assert!(
            after.contains(case),
            "{case:?} was finished before the kill but is missing after it"
        );
    }
}

fn signal_exits_130_reports_interrupted_and_cleans_up(signal: &str, faults: Option<&str>) {
    let sim = start_sim(faults);
    let tmp = tempfile::tempdir().unwrap();
    let mut child = run_cmd(
        &sim,
        tmp.path(),
        &["--focus", FOCUS, "--node-os-distro", "linux", "--no-progress"],
    )
    .spawn()
    .unwrap();
    let junit = tmp.path().join("junit_01.xml");
    wait_for_finished(&junit, 1, &mut child);
    Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "exit code after SIG{signal}");
    let cases = finished_cases(&junit);
    assert!(
        cases.iter().any(|(_, s)| s == "error"),
        "an in-flight case is reported interrupted: {cases:?}"
    );
    let started: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("started.json")).unwrap()).unwrap();
    let run_id = started["metadata"]["run-id"]
        .as_str()
        .expect("run-id in started.json")
        .to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_crossconf"))
        .args(["cleanup", "--kubeconfig"])
        .arg(&sim.kubeconfig)
        .args(["--run-id", &run_id])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("nothing to clean up"),
        "the interrupted run left namespaces behind: {text}"
    );
}

#[test]
fn sigkill_keeps_every_finished_case_healthy() {
    sigkill_keeps_every_finished_case(None);
}

#[test]
fn sigkill_keeps_every_finished_case_under_faults() {
    sigkill_keeps_every_finished_case(Some(FAULTS));
}

#[test]
fn sigint_exits_130_reports_interrupted_and_cleans_up() {
    signal_exits_130_reports_interrupted_and_cleans_up("INT", None);
}

#[test]
fn sigint_under_faults_still_cleans_up() {
    signal_exits_130_reports_interrupted_and_cleans_up("INT", Some(FAULTS));
}

#[test]
fn sigterm_under_faults_still_cleans_up() {
    signal_exits_130_reports_interrupted_and_cleans_up("TERM", Some(FAULTS));
}

#[test]
fn ci_output_is_plain_lines() {
    let sim = start_sim(None);
    let tmp = tempfile::tempdir().unwrap();
    let mut child = run_cmd(
        &sim,
        tmp.path(),
        &[
            "--focus",
            r"\[sig-node\] Pods should get a host IP",
            "--node-os-distro",
            "windows",
        ],
    )
    .spawn()
    .unwrap();
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let status = child.wait().unwrap();
    assert!(!stdout.contains('\u{1b}'), "escape codes in CI output: {stdout:?}");
    assert!(stdout.contains("Will run"), "{stdout}");
    assert!(status.code().is_some(), "{status}");
}
