//! `--prepull-images`: pull every image the plan needs on every node before the cases start.
//!
//! Windows test images are gigabytes and a cold pull takes 5–15 minutes; cases that pull on
//! first use time out. Upstream jobs prepull with a DaemonSet; so do we: one per OS pool the
//! plan uses, one container per image (`imagePullPolicy: IfNotPresent`), in a namespace
//! labelled with the run id, removed afterwards. The step row in `junit_runner.xml` says which
//! image failed on which node, and how long each pull took.
//!
//! While it waits, the step prints a `prepull [k/n]` line on stderr for each image a node has
//! pulled (or failed to pull), from the kubelets' `Pulled`/`Failed` events: a Windows prepull
//! takes many minutes, and a silent one looks hung. No progress bar is up yet at this point of
//! a run, so plain lines cannot fight one.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::{Container, Event as K8sEvent, Namespace, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

use super::StepRecord;
use super::executor::Scheduled;
use super::signal::Shutdown;
use crate::framework::{RUN_ID_LABEL, RunContext};
use crate::os::Os;

/// How long Windows pulls may take before the step fails (upstream jobs allow 30 minutes).
pub const WINDOWS_PREPULL_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How long Linux pulls may take.
pub const LINUX_PREPULL_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// The idle command for a prepull container of `image` on `os`: the image must start and stay
/// up, so the DaemonSet's readiness means "pulled everywhere".
fn idle(image: &str, os: Os) -> (Option<Vec<String>>, Option<Vec<String>>) {
    match image {
        "pause" => (None, None),
        "agnhost" => (None, Some(vec!["pause".into()])),
        _ => (Some(os.shell(os.idle_script())), None),
    }
}

/// Records `line` in the step's output and prints it, so progress shows while the step runs.
fn say(output: &mut String, line: String) {
    eprintln!("prepull: {line}");
    output.push_str(&line);
    output.push('\n');
}

/// Prints one numbered line per `Pulled`/`Failed` event in `ns` until `stop`; `expected` is the
/// number of (image, node) pulls the step waits for.
fn spawn_progress(
    client: kube::Client,
    ns: String,
    expected: usize,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let events: Api<K8sEvent> = Api::namespaced(client, &ns);
        let mut stream = watcher(events, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        let mut seen = HashSet::new();
        let mut done = 0usize;
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                e = stream.next() => match e {
                    Some(Ok(e)) => e,
                    Some(Err(_)) => continue,
                    None => return,
                },
            };
            let reason = event.reason.as_deref().unwrap_or("");
            if !matches!(reason, "Pulled" | "Failed") || !seen.insert(event.metadata.uid.clone()) {
                continue;
            }
            let message = event.message.as_deref().unwrap_or("").trim();
            // "Error: ErrImagePull" follows the Failed event that says why; one line is enough.
            if message.starts_with("Error: ") {
                continue;
            }
            if reason == "Pulled" {
                done += 1;
            }
            let node = event.source.as_ref().and_then(|s| s.host.as_deref()).unwrap_or("?");
            eprintln!("prepull [{done}/{expected}] {node} {reason}: {message}");
            if done >= expected {
                return;
            }
        }
    })
}

/// Runs the prepull step; never panics, always returns the step record.
pub async fn prepull(
    ctx: &Arc<RunContext>,
    images: &crate::images::ImageCatalog,
    scheduled: &[Scheduled],
    shutdown: &Shutdown,
) -> StepRecord {
    let t0 = Instant::now();
    let mut output = String::new();
    let result = prepull_inner(ctx, images, scheduled, shutdown, &mut output).await;
    StepRecord {
        name: "prepull images".into(),
        failure: result.err(),
        duration: t0.elapsed(),
        output,
    }
}

async fn prepull_inner(
    ctx: &Arc<RunContext>,
    images: &crate::images::ImageCatalog,
    scheduled: &[Scheduled],
    shutdown: &Shutdown,
    output: &mut String,
) -> Result<(), String> {
    let mut oses = vec![ctx.target_os];
    if scheduled
        .iter()
        .any(|s| s.skip.is_none() && s.case.pools == crate::catalog::PoolNeed::BothPools)
    {
        oses.push(ctx.target_os.other());
    }
    let client = ctx.client.clone();
    let ns_name = format!("crossconf-prepull-{}", ctx.run_id.to_ascii_lowercase());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(ns_name.clone()),
            labels: Some(BTreeMap::from([(RUN_ID_LABEL.to_string(), ctx.run_id.clone())])),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces.create(&PostParams::default(), &ns).await.map_err(|e| {
        format!(
            "creating namespace {ns_name}: {}",
            crate::framework::render_kube_error(&e)
        )
    })?;
    let result = async {
        let ds_api: Api<DaemonSet> = Api::namespaced(client.clone(), &ns_name);
        let mut started = Vec::new();
        for os in &oses {
            if !ctx.pools.has_pool(*os) {
                continue;
            }
            let mut containers = Vec::new();
            let mut wanted = Vec::new();
            let mut references = HashSet::new();
            for image in super::preflight::plan_images(images, *os) {
                let reference = ctx.image(&image, *os).map_err(|e| e.to_string())?;
                // Logical names may share a reference (cpu-burner is busybox): pull it once.
                if !references.insert(reference.clone()) {
                    continue;
                }
                let (command, args) = idle(&image, *os);
                wanted.push(image);
                containers.push(Container {
                    name: format!("img-{}", containers.len()),
                    image: Some(reference),
                    image_pull_policy: Some("IfNotPresent".into()),
                    command,
                    args,
                    ..Default::default()
                });
            }
            let name = format!("prepull-{os}");
            let labels = BTreeMap::from([
                ("app".to_string(), name.clone()),
                (RUN_ID_LABEL.to_string(), ctx.run_id.clone()),
            ]);
            let tolerations = ctx
                .pools
                .of(*os)
                .flat_map(|n| n.blocking_taints().cloned().collect::<Vec<_>>())
                .map(|t| k8s_openapi::api::core::v1::Toleration {
                    key: Some(t.key),
                    operator: Some("Exists".into()),
                    effect: Some(t.effect),
                    ..Default::default()
                })
                .collect::<Vec<_>>();
            let ds = DaemonSet {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    labels: Some(labels.clone()),
                    ..Default::default()
                },
                spec: Some(DaemonSetSpec {
                    selector: LabelSelector {
                        match_labels: Some(BTreeMap::from([("app".to_string(), name.clone())])),
                        ..Default::default()
                    },
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta {
                            labels: Some(labels),
                            ..Default::default()
                        }),
                        spec: Some(PodSpec {
                            containers,
                            node_selector: Some(BTreeMap::from([(
                                crate::os::OS_LABEL.to_string(),
                                os.as_str().to_string(),
                            )])),
                            tolerations: (!tolerations.is_empty()).then_some(tolerations),
                            termination_grace_period_seconds: Some(0),
                            ..Default::default()
                        }),
                    },
                    ..Default::default()
                }),
                status: None,
            };
            ds_api
                .create(&PostParams::default(), &ds)
                .await
                .map_err(|e| format!("creating DaemonSet {name}: {}", crate::framework::render_kube_error(&e)))?;
            let nodes = ctx.pools.schedulable(*os).len();
            say(
                output,
                format!(
                    "{name}: pulling {} image(s) on {nodes} {os} node(s): {}",
                    wanted.len(),
                    wanted.join(", ")
                ),
            );
            started.push((name, *os, wanted.len() * nodes));
        }
        let expected = started.iter().map(|(_, _, n)| n).sum();
        let stop = CancellationToken::new();
        let progress = spawn_progress(client.clone(), ns_name.clone(), expected, stop.clone());
        let waited = wait_ready(&ds_api, &started, shutdown, output).await;
        // Kubelets post events asynchronously: give the last lines a moment to arrive.
        let mut progress = progress;
        let all_shown = waited.is_ok()
            && tokio::time::timeout(Duration::from_secs(2), &mut progress)
                .await
                .is_ok();
        if !all_shown {
            stop.cancel();
            let _ = progress.await;
        }
        report_pulls(&client, &ns_name, output).await;
        if let Err(e) = waited {
            let stuck = stuck_pods(&client, &ns_name).await;
            return Err(format!("{e}; {stuck}"));
        }
        Ok(())
    }
    .await;
    if let Err(e) = crate::framework::delete_namespace(&client, &ns_name).await {
        output.push_str(&format!(
            "deleting {ns_name} failed: {}\n",
            crate::framework::render_kube_error(&e)
        ));
    }
    result
}

/// Waits until every DaemonSet in `started` has a ready pod on each node of its OS.
async fn wait_ready(
    ds_api: &Api<DaemonSet>,
    started: &[(String, Os, usize)],
    shutdown: &Shutdown,
    output: &mut String,
) -> Result<(), String> {
    for (name, os, _) in started {
        let limit = if *os == Os::Windows {
            WINDOWS_PREPULL_TIMEOUT
        } else {
            LINUX_PREPULL_TIMEOUT
        };
        let t0 = Instant::now();
        let waited = tokio::select! {
            r = crate::framework::wait::wait_object(
                ds_api, name, crate::framework::wait::conditions::is_daemonset_ready(), "to have every pod ready", limit) => r,
            _ = shutdown.stopped().cancelled() => Err(crate::framework::CaseError::failed("interrupted")),
        };
        match waited {
            Ok(_) => say(
                output,
                format!(
                    "{name}: all images present on every {os} node after {:.1?}",
                    t0.elapsed()
                ),
            ),
            Err(e) => return Err(format!("{name}: {e}")),
        }
    }
    Ok(())
}

/// Appends the pull timings the kubelets reported (`Pulled` events).
async fn report_pulls(client: &kube::Client, ns: &str, output: &mut String) {
    let events: Api<K8sEvent> = Api::namespaced(client.clone(), ns);
    if let Ok(list) = events.list(&ListParams::default()).await {
        for e in list.items {
            if matches!(e.reason.as_deref(), Some("Pulled") | Some("Failed")) {
                output.push_str(&format!(
                    "  {} {}: {}\n",
                    e.involved_object.name.as_deref().unwrap_or("?"),
                    e.reason.as_deref().unwrap_or(""),
                    e.message.as_deref().unwrap_or("").trim()
                ));
            }
        }
    }
}

/// Which image is stuck on which node, from the prepull pods' container statuses.
async fn stuck_pods(client: &kube::Client, ns: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let Ok(list) = pods.list(&ListParams::default()).await else {
        return "could not list prepull pods".into();
    };
    let mut lines = Vec::new();
    for p in list.items {
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_else(|| "unscheduled".into());
        for cs in p.status.iter().flat_map(|s| s.container_statuses.iter().flatten()) {
            if let Some(w) = cs.state.as_ref().and_then(|s| s.waiting.as_ref()) {
                lines.push(format!(
                    "image {} on node {node}: {} {}",
                    cs.image,
                    w.reason.as_deref().unwrap_or(""),
                    w.message.as_deref().unwrap_or("")
                ));
            }
        }
    }
    if lines.is_empty() {
        "no container is waiting".into()
    } else {
        lines.join("; ")
    }
}
