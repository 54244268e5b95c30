//! A node lost for good mid-run (`--faults node-lost=win-2:AFTER`): its kubelet stops posting
//! status, the node lifecycle controller marks it `Ready=Unknown` after its grace period (50 s,
//! upstream's default) and taints it unreachable, and its pods can no longer be reached.
//!
//! The nightly slice runs against it (`crossconf run --kubeconfig`, a per-case timeout of 60 s
//! so that stranded cases end well after the node is marked Unknown). The test asserts:
//! - some cases fail (those whose pods went to win-2), and every failure names win-2 and its
//!   `Ready=Unknown` condition (or, before the controller noticed, its Lease no longer renewed),
//!   so the dashboard says "node lost", not "product bug";
//! - cases that did not need win-2 pass: at least the ones that pass on a healthy cluster, minus
//!   the failures;
//! - the run ends with its cleanup step done (pods stranded on win-2 are force-deleted), and no
//!   namespace with the run-id label is left.
//!
//! It lives in the fault matrix's test binary so that libtest runs it beside the matrix: it
//! mostly waits (a stranded case runs into its 60 s timeout), and as a binary of its own it
//! added its whole wall to CI's.

use std::time::{Duration, Instant};

use super::support;
use support::run_check::{failure_messages, leftovers, planned, read_junit, retrying_client, run_slice};
use support::sim_process::SimProcess;

const LOST: &str = "win-2";

#[test]
fn a_node_lost_for_good_fails_only_the_cases_on_it_and_cleanup_completes() {
    let planned = planned();
    let sim = SimProcess::start(&["--faults", &format!("node-lost={LOST}:5s")], Duration::from_secs(90));
    let reports = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = run_slice(&sim.kubeconfig, reports.path(), &["--test-timeout", "60s"]);
    let wall = t0.elapsed();
    let describe = support::sim_process::describe(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the run fails its stranded cases: {describe}"
    );
    let junit = reports.path().join("junit_01.xml");
    let results = read_junit(&junit).unwrap_or_else(|e| panic!("JUnit: {e}"));
    let missing: Vec<_> = planned.iter().filter(|c| !results.contains_key(*c)).collect();
    assert!(missing.is_empty(), "cases without a result: {missing:?}");
    let failures = failure_messages(&junit);
    let passed = results.values().filter(|s| *s == "passed").count();
    eprintln!(
        "node {LOST} lost 5 s in: {} cases, {passed} passed, {} failed, wall {:.0} s",
        results.len(),
        failures.len(),
        wall.as_secs_f64()
    );
    assert!(!failures.is_empty(), "no case had a pod on {LOST}: {describe}");
    for (case, message) in &failures {
        eprintln!("FAILED {case}: {message}");
        assert!(
            message.contains(LOST) && (message.contains("Ready=Unknown") || message.contains("Lease not renewed")),
            "the failure of {case:?} does not name node {LOST} and its condition: {message}"
        );
    }
    let runnable = planned.len() - results.values().filter(|s| *s == "skipped").count();
    assert!(
        passed + failures.len() >= runnable,
        "{passed} passed and {} failed of {runnable} runnable cases",
        failures.len()
    );
    let runner = std::fs::read_to_string(reports.path().join("junit_runner.xml")).unwrap();
    let doc = roxmltree::Document::parse(&runner).unwrap();
    let cleanup = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some("cleanup"))
        .unwrap_or_else(|| panic!("no cleanup step in junit_runner.xml: {runner}"));
    assert!(
        !cleanup.children().any(|c| c.has_tag_name("failure")),
        "cleanup failed: {runner}"
    );
    assert!(
        runner.contains("force-deleted") && runner.contains(LOST),
        "cleanup did not say which pods it force-deleted: {runner}"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let left = runtime.block_on(async { leftovers(retrying_client(&sim.kubeconfig).await).await });
    assert!(left.is_empty(), "left behind: {left:?}");
}
