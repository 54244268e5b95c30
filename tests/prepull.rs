//! `--prepull-images` on the realistic latency profile (Windows pulls of minutes, replayed 20×
//! faster): the run shows prepull progress, the runner report has a passing prepull row, and
//! the cases that follow start their containers from the node's image cache — the kubelets
//! report no `Pulling` event in any case namespace, only "already present on machine".
//!
//! The simulated cluster runs in its own process (`crossconf sim`), so the test can watch every
//! event of the run as it happens: case namespaces are deleted when their case ends, and their
//! events with them. A control run without `--prepull-images` shows the watch does see the
//! pulls cases make when nothing was prepulled.

#![expect(
    clippy::disallowed_methods,
    reason = "the test paces a real server or process with short sleeps"
)]

mod support;

use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use kube::api::Api;
use kube::runtime::watcher;
use support::sim_process::{SimProcess, describe};

/// The cases the runs execute: quick Windows cases whose pods use prepulled images (agnhost).
const FOCUS: &str = r"Networking Granular Checks: Pods should function for intra-pod communication: (http|udp) \[";

/// The simulator on the realistic latency profile, replayed 20× faster.
fn start_realistic_sim() -> SimProcess {
    SimProcess::start(
        &["--profile", "realistic", "--time-scale", "0.05"],
        Duration::from_secs(90),
    )
}

/// One event as the watch delivered it.
#[derive(Debug, Clone)]
struct Seen {
    namespace: String,
    reason: String,
    object: String,
    message: String,
    at: Instant,
}

/// Watches events in every namespace into `seen` (first delivery of each event), from before
/// the run starts until the returned handle is aborted.
async fn watch_events(sim: &SimProcess) -> (Arc<Mutex<Vec<Seen>>>, tokio::task::JoinHandle<()>) {
    let api: Api<Event> = Api::all(sim.client().await);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let sink = seen.clone();
    let task = tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        let mut ready = Some(ready_tx);
        let mut uids = std::collections::HashSet::new();
        while let Some(item) = stream.next().await {
            let e = match item {
                Ok(watcher::Event::Apply(e) | watcher::Event::InitApply(e)) => e,
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                _ => continue,
            };
            if !uids.insert(e.metadata.uid.clone()) {
                continue;
            }
            sink.lock().unwrap().push(Seen {
                namespace: e.metadata.namespace.unwrap_or_default(),
                reason: e.reason.unwrap_or_default(),
                object: e.involved_object.name.unwrap_or_default(),
                message: e.message.unwrap_or_default(),
                at: Instant::now(),
            });
        }
    });
    tokio::time::timeout(Duration::from_secs(30), ready_rx)
        .await
        .expect("the event watch started")
        .unwrap();
    (seen, task)
}

/// Runs `crossconf run` against `sim` while watching events; returns the run's output, the
/// events seen, and the report directory.
fn run_watched(sim: &SimProcess, prepull: bool) -> (Output, Vec<Seen>, tempfile::TempDir) {
    let report = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (seen, task) = rt.block_on(watch_events(sim));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crossconf"));
    cmd.args(["run", "--kubeconfig"])
        .arg(&sim.kubeconfig)
        .args(["--focus", FOCUS, "--no-progress", "--report-dir"])
        .arg(report.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBE_TEST_REPO_LIST")
        .env_remove("ARTIFACTS")
        .env_remove("CI");
    if prepull {
        cmd.arg("--prepull-images");
    }
    let out = cmd.output().unwrap();
    // Kubelets post events asynchronously; let the last ones arrive.
    rt.block_on(async { tokio::time::sleep(Duration::from_secs(2)).await });
    task.abort();
    let events = seen.lock().unwrap().clone();
    (out, events, report)
}

fn is_prepull_namespace(ns: &str) -> bool {
    ns.starts_with("crossconf-prepull-")
}

/// Namespaces the cases created: not the prepull step's, not the cluster's own.
fn is_case_namespace(ns: &str) -> bool {
    !is_prepull_namespace(ns) && !matches!(ns, "kube-system" | "kube-public" | "kube-node-lease" | "default" | "")
}

fn lines(events: &[Seen], keep: impl Fn(&Seen) -> bool) -> Vec<String> {
    events
        .iter()
        .filter(|e| keep(e))
        .map(|e| format!("{}/{} {}: {}", e.namespace, e.object, e.reason, e.message))
        .collect()
}

#[test]
fn prepulled_images_let_cases_start_without_pulling() {
    let sim = start_realistic_sim();
    let (out, events, report) = run_watched(&sim, true);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);

    // Progress while prepulling: what is pulled where, then a numbered line per pull.
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("prepull: prepull-windows: pulling") && l.contains("agnhost")),
        "{}",
        describe(&out)
    );
    let progress: Vec<&str> = stderr.lines().filter(|l| l.starts_with("prepull [")).collect();
    assert!(progress.len() >= 10, "too few progress lines:\n{}", describe(&out));
    assert!(
        progress.iter().any(|l| l.contains("Pulled: Successfully pulled image")),
        "{progress:#?}"
    );
    let last = progress.last().unwrap();
    let counts = last.trim_start_matches("prepull [").split(']').next().unwrap();
    let (done, total) = counts.split_once('/').unwrap();
    assert_eq!(done, total, "the last progress line should count every pull: {last}");
    assert!(
        stderr.contains("prepull: prepull-windows: all images present on every windows node"),
        "{}",
        describe(&out)
    );

    // The runner report has the prepull step, passing, and the cases passed.
    let runner = std::fs::read_to_string(report.path().join("junit_runner.xml")).unwrap();
    let doc = roxmltree::Document::parse(&runner).unwrap();
    let row = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some("prepull images"))
        .unwrap_or_else(|| panic!("no prepull row:\n{runner}"));
    assert!(
        !row.children()
            .any(|c| c.has_tag_name("failure") || c.has_tag_name("error")),
        "{runner}"
    );
    let junit = std::fs::read_to_string(report.path().join("junit_01.xml")).unwrap();
    let doc = roxmltree::Document::parse(&junit).unwrap();
    let ran: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase") && n.attribute("name").is_some_and(|a| a.contains("intra-pod")))
        .collect();
    assert_eq!(ran.len(), 2, "{junit}");
    assert!(
        ran.iter().all(|n| !n
            .children()
            .any(|c| c.has_tag_name("failure") || c.has_tag_name("error") || c.has_tag_name("skipped"))),
        "{junit}"
    );

    // The prepull step pulled (the watch saw it), and the cases did not.
    let prepull_pulls = lines(&events, |e| is_prepull_namespace(&e.namespace) && e.reason == "Pulling");
    assert!(
        prepull_pulls.len() >= 10,
        "the prepull step pulled nothing? {prepull_pulls:#?}"
    );
    let case_pulls = lines(&events, |e| is_case_namespace(&e.namespace) && e.reason == "Pulling");
    assert!(case_pulls.is_empty(), "cases pulled after the prepull: {case_pulls:#?}");
    let cached = lines(&events, |e| {
        is_case_namespace(&e.namespace) && e.reason == "Pulled" && e.message.contains("already present on machine")
    });
    assert!(
        cached.len() >= 3,
        "cases should have started containers from cached images: {cached:#?}"
    );
    // Every pull happened before the first case event.
    let first_case = events
        .iter()
        .filter(|e| is_case_namespace(&e.namespace))
        .map(|e| e.at)
        .min()
        .unwrap();
    let last_pull = events
        .iter()
        .filter(|e| !matches!(e.namespace.as_str(), "kube-system") && e.reason == "Pulling")
        .map(|e| e.at)
        .max()
        .unwrap();
    assert!(last_pull < first_case, "a pull happened after the cases started");
}

#[test]
fn without_prepull_the_same_cases_pull() {
    // The control: the watch above would see case pulls if there were any.
    let sim = start_realistic_sim();
    let (out, events, report) = run_watched(&sim, false);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("prepull"), "{}", describe(&out));
    let runner = std::fs::read_to_string(report.path().join("junit_runner.xml")).unwrap();
    assert!(!runner.contains("prepull images"), "{runner}");
    let case_pulls = lines(&events, |e| is_case_namespace(&e.namespace) && e.reason == "Pulling");
    assert!(
        case_pulls.iter().any(|l| l.contains("agnhost")),
        "without prepull the cases pull agnhost: {case_pulls:#?}"
    );
}
