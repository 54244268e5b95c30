//! Running `crossconf run` against a `crossconf sim` process and checking what it left: the
//! JUnit file, failure messages, log lines, and objects still labelled with a run id. Shared by
//! the fault matrix and the node-lost test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// The nightly suite the checks run.
pub const SUITE: &str = "suites/windows-nightly.yaml";
/// Cases slower than this on the fast profile are left out of the slice.
pub const SLOW_CASE: f64 = 30.0;

pub fn crossconf() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_crossconf"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// `--skip` regexes for the cases over [`SLOW_CASE`], from the recorded durations.
pub fn slow_skips() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/durations/e2e.tsv");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .filter_map(|(secs, name)| Some((secs.parse::<f64>().ok()?, name.strip_prefix("[windows] ")?)))
        .filter(|(secs, _)| *secs > SLOW_CASE)
        .map(|(_, name)| format!("^{}$", regex::escape(name)))
        .collect()
}

/// `--skip` regexes for the Windows cases `tests/fixtures/known_failures.tsv` lists: they fail
/// on the simulator with or without faults, so they would only spend their timeout.
pub fn known_failure_skips() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/known_failures.tsv");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("windows\t"))
        .filter_map(|rest| rest.split('\t').next())
        .map(|name| format!("^{}$", regex::escape(name)))
        .collect()
}

pub fn selection_args() -> Vec<String> {
    let mut args = vec!["--suite".to_string(), SUITE.to_string()];
    for s in slow_skips().into_iter().chain(known_failure_skips()) {
        args.push("--skip".into());
        args.push(s);
    }
    args
}

/// The cases the run will start (selected, not skipped by a rule).
pub fn planned() -> BTreeSet<String> {
    let out = crossconf()
        .arg("list")
        .args(selection_args())
        .args(["--output", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", super::sim_process::describe(&out));
    let list: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    list.iter()
        .filter(|c| c["selected"] == true && c["skip_reason"].is_null())
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// Reads the JUnit file: each case's state, or why the file is not valid JUnit.
pub fn read_junit(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let doc = roxmltree::Document::parse(&text).map_err(|e| format!("not XML: {e}"))?;
    let mut results = BTreeMap::new();
    let mut failures = 0;
    for suite in doc.descendants().filter(|n| n.has_tag_name("testsuite")) {
        let cases: Vec<_> = suite.children().filter(|n| n.has_tag_name("testcase")).collect();
        let declared: usize = suite
            .attribute("tests")
            .and_then(|t| t.parse().ok())
            .ok_or("testsuite without tests=")?;
        if declared != cases.len() {
            return Err(format!("testsuite says tests={declared} but holds {}", cases.len()));
        }
        for case in cases {
            let name = case.attribute("name").ok_or("testcase without a name")?.to_string();
            let state = case
                .children()
                .filter(|c| c.is_element())
                .map(|c| c.tag_name().name())
                .find(|t| matches!(*t, "failure" | "error" | "skipped"))
                .unwrap_or("passed")
                .to_string();
            if state == "failure" {
                failures += 1;
            }
            results.insert(name, state);
        }
        let declared: usize = suite.attribute("failures").and_then(|t| t.parse().ok()).unwrap_or(0);
        if declared != failures {
            return Err(format!("testsuite says failures={declared} but holds {failures}"));
        }
        failures = 0;
    }
    Ok(results)
}

/// The failure messages of the JUnit file, by case.
pub fn failure_messages(path: &Path) -> BTreeMap<String, String> {
    messages_of(path, "failure")
}

/// The cases of a JUnit file that passed on a retry, each with its first failed attempt's
/// message (`<flakyFailure>`).
pub fn flaky_messages(path: &Path) -> BTreeMap<String, String> {
    messages_of(path, "flakyFailure")
}

/// Case name to the message of its first `tag` element.
fn messages_of(path: &Path, tag: &str) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let Ok(doc) = roxmltree::Document::parse(&text) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for f in doc.descendants().filter(|n| n.has_tag_name(tag)) {
        if let Some(case) = f.parent().and_then(|p| p.attribute("name")) {
            out.entry(case.to_string())
                .or_insert_with(|| f.attribute("message").unwrap_or("").to_string());
        }
    }
    out
}

/// Panics and ERROR lines of a log.
pub fn log_problems(what: &str, text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains("panicked") || l.contains(" ERROR "))
        .take(5)
        .map(|l| format!("{what}: {l}"))
        .collect()
}

/// Namespaces and cluster-scoped objects still carrying the run-id label.
pub async fn leftovers(client: kube::Client) -> Vec<String> {
    use k8s_openapi::api::core::v1::{Namespace, PersistentVolume};
    use k8s_openapi::api::node::v1::RuntimeClass;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    use k8s_openapi::api::storage::v1::StorageClass;
    use kube::api::{Api, ListParams};

    async fn names<K>(client: &kube::Client, kind: &str) -> Vec<String>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let lp = ListParams::default().labels(crossconf::framework::RUN_ID_LABEL);
        match Api::<K>::all(client.clone()).list(&lp).await {
            Ok(list) => list
                .items
                .iter()
                .map(|o| format!("{kind}/{}", o.meta().name.clone().unwrap_or_default()))
                .collect(),
            // A kind the cluster does not serve holds nothing.
            Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
            Err(e) => vec![format!("{kind}: cannot list: {e}")],
        }
    }
    let mut all = names::<Namespace>(&client, "namespace").await;
    // What holds a namespace up, for whoever reads the failure.
    for entry in all.iter_mut() {
        let Some(ns) = entry.strip_prefix("namespace/") else {
            continue;
        };
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
        if let Ok(list) = pods.list(&ListParams::default()).await {
            let held: Vec<String> = list
                .items
                .iter()
                .map(|p| {
                    format!(
                        "pod {} on {} {}",
                        p.metadata.name.clone().unwrap_or_default(),
                        p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default(),
                        if p.metadata.deletion_timestamp.is_some() {
                            "terminating"
                        } else {
                            "live"
                        }
                    )
                })
                .collect();
            entry.push_str(&format!(" ({})", held.join(", ")));
        }
    }
    all.extend(names::<PersistentVolume>(&client, "persistentvolume").await);
    all.extend(names::<PriorityClass>(&client, "priorityclass").await);
    all.extend(names::<ClusterRole>(&client, "clusterrole").await);
    all.extend(names::<ClusterRoleBinding>(&client, "clusterrolebinding").await);
    all.extend(names::<RuntimeClass>(&client, "runtimeclass").await);
    all.extend(names::<StorageClass>(&client, "storageclass").await);
    all.extend(
        names::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(
            &client,
            "customresourcedefinition",
        )
        .await,
    );
    all.extend(
        names::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>(
            &client,
            "validatingwebhookconfiguration",
        )
        .await,
    );
    all.extend(
        names::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>(
            &client,
            "mutatingwebhookconfiguration",
        )
        .await,
    );
    all
}

/// A client for the cluster of `kubeconfig` that retries transient faults as the harness does.
pub async fn retrying_client(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    crossconf::cluster::retry::retrying_client(config).unwrap()
}

/// Runs the slice as a nightly job would (16 lanes, flake attempts off, CI output) against the
/// cluster of `kubeconfig`, reports into `reports`, with `extra` flags.
pub fn run_slice(kubeconfig: &Path, reports: &Path, extra: &[&str]) -> std::process::Output {
    run_slice_on(kubeconfig, reports, 16, 1, extra)
}

/// [`run_slice`] with `lanes` cases at a time (a configuration whose cases mostly wait, under
/// API latency spikes, gets more lanes so its wall stays near the others') and `attempts`
/// attempts per case.
pub fn run_slice_on(
    kubeconfig: &Path,
    reports: &Path,
    lanes: usize,
    attempts: usize,
    extra: &[&str],
) -> std::process::Output {
    crossconf()
        .args(["run", "--kubeconfig"])
        .arg(kubeconfig)
        .args(selection_args())
        .args([
            "--parallel",
            &lanes.to_string(),
            "--flake-attempts",
            &attempts.to_string(),
            "--no-progress",
        ])
        .args(extra)
        .arg("--report-dir")
        .arg(reports)
        .env("CI", "true")
        .env_remove("CROSSCONF_LOG")
        .output()
        .unwrap()
}
