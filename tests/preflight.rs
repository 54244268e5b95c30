//! The preflight step: on a simulated cluster whose Windows nodes run a build no test image
//! has a variant for (10.0.14393, Windows Server 2016), `run` fails within seconds, before any
//! case starts, with a line naming an image and the build, and the runner report says so.

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn unsupported_windows_build_fails_in_preflight_within_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_crossconf"))
        .args([
            "run",
            "--sim",
            "--windows-build",
            "10.0.14393",
            "--focus",
            r"Networking Granular Checks: Pods should function for intra-pod communication: http",
            "--no-progress",
            "--report-dir",
        ])
        .arg(dir.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBE_TEST_REPO_LIST")
        .env_remove("ARTIFACTS")
        .output()
        .unwrap();
    let elapsed = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let all = format!("{stdout}\n{stderr}");
    // README: exit 1 when the run fails (a step or a case); 2 is kept for bad input.
    assert_eq!(out.status.code(), Some(1), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        elapsed < Duration::from_secs(60),
        "preflight took {elapsed:?}; it must fail before any pull is attempted"
    );
    // One line names the image and the build (and the node).
    let line = all
        .lines()
        .find(|l| l.contains("preflight") && l.contains("FAILED"))
        .unwrap_or_else(|| panic!("no failed preflight line\n{all}"));
    assert!(
        line.contains("agnhost") && line.contains("Windows build 10.0.14393") && line.contains("win-1"),
        "{line}"
    );
    assert!(
        line.contains("10.0.17763") && line.contains("10.0.20348"),
        "the line should say which builds the image has: {line}"
    );

    // The runner report has the failing preflight row, and no case ran.
    let runner = std::fs::read_to_string(dir.path().join("junit_runner.xml")).unwrap();
    let doc = roxmltree::Document::parse(&runner).unwrap();
    let preflight = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name").is_some_and(|a| a.starts_with("preflight")))
        .expect("a preflight row");
    let failure = preflight
        .children()
        .find(|n| n.has_tag_name("failure"))
        .expect("the preflight row fails");
    assert!(
        failure.attribute("message").unwrap_or("").contains("10.0.14393"),
        "{runner}"
    );
    let cases = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some("cases"))
        .expect("a cases row");
    assert!(
        cases
            .children()
            .any(|n| n.has_tag_name("failure") && n.attribute("message") == Some("not run: preflight failed")),
        "{runner}"
    );
    // No case report: nothing started.
    let junit = dir.path().join("junit_01.xml");
    if junit.exists() {
        let text = std::fs::read_to_string(&junit).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        assert!(
            !doc.descendants()
                .any(|n| n.has_tag_name("testcase") && n.children().all(|c| !c.has_tag_name("skipped"))),
            "a case ran despite the failed preflight:\n{text}"
        );
    }
    let finished = std::fs::read_to_string(dir.path().join("finished.json")).unwrap();
    assert!(
        finished.contains("\"passed\": false") || finished.contains("\"passed\":false"),
        "{finished}"
    );
}
