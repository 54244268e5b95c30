//! Image pulls: pull policy, pull credentials from imagePullSecrets, ErrImagePull and
//! ImagePullBackOff, and the `pull-fail-once` switch (the first pull of each image on each node
//! meets a registry answering 503; the back-off retry succeeds). Separate because pulling
//! talks to the registry model, not the runtime.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use kube::Api;
use tracing::debug;

use crate::node::registry::{self, Image};

use super::restart::StartFailure;
use super::{Kubelet, PodRt, Role, sleep_or};

/// Registry hosts the pod has pull credentials for (from its imagePullSecrets).
async fn credential_hosts(kl: &Kubelet, pod: &Pod) -> Vec<String> {
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let api: Api<Secret> = Api::namespaced(kl.client.clone(), &ns);
    let mut hosts = Vec::new();
    for r in pod
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.clone())
        .unwrap_or_default()
    {
        // The kubelet reads secrets through its watch-based secret manager, whose cache rides
        // out an API blip; a read that fails now is tried again (a missing secret is not).
        let mut got = api.get_opt(&r.name).await;
        for attempt in 1..=5u64 {
            if got.is_ok() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200 * attempt)).await;
            got = api.get_opt(&r.name).await;
        }
        // As the kubelet does, a secret it cannot read is logged and the pull goes on without it.
        let s = match got {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(secret = %r.name, error = %e, "unable to retrieve pull secret; pulling without it");
                continue;
            }
        };
        let data = s.data.unwrap_or_default();
        let Some(raw) = data.get(".dockerconfigjson").or_else(|| data.get(".dockercfg")) else {
            continue;
        };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&raw.0) else {
            continue;
        };
        let auths = v.get("auths").unwrap_or(&v);
        if let Some(m) = auths.as_object() {
            for k in m.keys() {
                let host = k
                    .trim_start_matches("https://")
                    .trim_start_matches("http://")
                    .split('/')
                    .next()
                    .unwrap_or(k);
                hosts.push(host.to_string());
            }
        }
    }
    hosts
}

/// The error containerd gives when the registry answers its manifest request with 503 (the
/// `pull-fail-once` switch fails the first pull of each image on each node so): the resolver's
/// `unexpected status from HEAD request to URL: STATUS` (containerd 1.7
/// `remotes/errors.ErrUnexpectedStatus`) wrapped as the CRI plugin wraps pull errors. Docker
/// Hub references are fetched from `registry-1.docker.io`, as containerd does.
fn registry_unavailable(r: &registry::ImageRef) -> String {
    let key = r.full();
    let host = if r.registry == "docker.io" {
        "registry-1.docker.io"
    } else {
        r.registry.as_str()
    };
    let reference = r.digest.as_deref().unwrap_or(&r.tag);
    format!(
        "failed to pull and unpack image \"{key}\": failed to resolve reference \"{key}\": unexpected status from HEAD request to https://{host}/v2/{}/manifests/{reference}: 503 Service Unavailable",
        r.repository
    )
}

pub(super) async fn pull(kl: &Kubelet, rt: &PodRt, c: &Container, role: Role) -> Result<Arc<Image>, StartFailure> {
    let image = c.image.clone().unwrap_or_default();
    let r = registry::ImageRef::parse(&image);
    let default_policy = if r.tag == "latest" && r.digest.is_none() {
        "Always"
    } else {
        "IfNotPresent"
    };
    let mut policy = c.image_pull_policy.clone().unwrap_or_else(|| default_policy.into());
    if kl.net.faults().pull_policy_ignored() {
        policy = "IfNotPresent".into();
    }
    let key = r.full();
    // A runtime with the `image-cache-off` fault keeps no image store: nothing is ever present.
    let cached = if kl.net.faults().is_on("image-cache-off") {
        None
    } else {
        kl.images.lock().expect("images lock").get(&key).cloned()
    };
    let field = Some((c.name.as_str(), role));
    match (policy.as_str(), cached) {
        ("Never", None) => {
            let msg = format!("Container image \"{image}\" is not present with pull policy of Never");
            kl.pod_event(rt, field, "Warning", "ErrImageNeverPull", &msg);
            kl.pod_event(rt, field, "Warning", "Failed", "Error: ErrImageNeverPull");
            return Err(StartFailure::Waiting {
                reason: "ErrImageNeverPull",
                message: msg,
            });
        }
        ("Never" | "IfNotPresent", Some(img)) => {
            kl.pod_event(
                rt,
                field,
                "Normal",
                "Pulled",
                &format!("Container image \"{image}\" already present on machine"),
            );
            return Ok(img);
        }
        _ => {}
    }
    kl.pod_event(rt, field, "Normal", "Pulling", &format!("Pulling image \"{image}\""));
    // `pull-secrets-ignored`: the kubelet hands the runtime no credentials. `registry-auth-off`:
    // the private registry serves everyone (it is misconfigured public).
    let mut creds = if kl.net.faults().is_on("pull-secrets-ignored") {
        Vec::new()
    } else {
        credential_hosts(kl, &rt.pod()).await
    };
    if kl.net.faults().is_on("registry-auth-off") {
        creds.push(r.registry.clone());
    }
    let started = Instant::now();
    let resolved = if kl.net.faults().is_on("registry-unreachable") {
        Err(format!(
            "failed to pull and unpack image \"{image}\": failed to resolve reference \"{key}\": failed to do request: dial tcp {}:443: i/o timeout (registry unreachable from node {})",
            r.registry, kl.cfg.name
        ))
    } else if kl.net.faults().is_on("pull-fail-once")
        && kl.pull_failed_once.lock().expect("pull lock").insert(key.clone())
    {
        Err(registry_unavailable(&r))
    } else {
        registry::resolve(&image, kl.cfg.os, kl.cfg.windows_build.as_deref(), &creds).map_err(|e| e.to_string())
    };
    if let Err(e) = &resolved
        && kl.net.faults().is_on("pull-errors-hidden")
    {
        debug!(image, error = %e, "pull failed; hidden by the pull-errors-hidden fault");
        return Err(StartFailure::Waiting {
            reason: "ContainerCreating",
            message: String::new(),
        });
    }
    // The `errors-unexplained` fault: the runtime reports failures without their cause.
    let resolved = resolved.map_err(|e| {
        if kl.net.faults().is_on("errors-unexplained") {
            format!("failed to pull and unpack image \"{image}\": unknown error")
        } else {
            e
        }
    });
    match resolved {
        Ok(img) => {
            let already = kl.images.lock().expect("images lock").contains_key(&key);
            let d = if already {
                kl.cfg.profile.pull(img.weight) / 20
            } else {
                kl.cfg.profile.pull(img.weight)
            };
            if !sleep_or(d, &rt.halted).await {
                return Err(StartFailure::Waiting {
                    reason: "ContainerCreating",
                    message: "pod is being deleted".into(),
                });
            }
            let took = started.elapsed().as_secs_f64();
            kl.pod_event(
                rt,
                field,
                "Normal",
                "Pulled",
                &format!("Successfully pulled image \"{image}\" in {took:.3}s ({took:.3}s including waiting). Image size: {} bytes.", img.size_bytes),
            );
            let img = Arc::new(img);
            kl.images.lock().expect("images lock").insert(key, img.clone());
            Ok(img)
        }
        Err(e) => {
            kl.pod_event(
                rt,
                field,
                "Warning",
                "Failed",
                &format!("Failed to pull image \"{image}\": {e}"),
            );
            kl.pod_event(rt, field, "Warning", "Failed", "Error: ErrImagePull");
            Err(StartFailure::Waiting {
                reason: "ErrImagePull",
                message: e,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_503_from_the_registry_reads_as_containerd_reports_it() {
        assert_eq!(
            registry_unavailable(&registry::ImageRef::parse(
                "registry.k8s.io/e2e-test-images/agnhost:2.53"
            )),
            "failed to pull and unpack image \"registry.k8s.io/e2e-test-images/agnhost:2.53\": failed to resolve reference \"registry.k8s.io/e2e-test-images/agnhost:2.53\": unexpected status from HEAD request to https://registry.k8s.io/v2/e2e-test-images/agnhost/manifests/2.53: 503 Service Unavailable"
        );
        let hub = registry_unavailable(&registry::ImageRef::parse("busybox"));
        assert!(
            hub.contains("https://registry-1.docker.io/v2/library/busybox/manifests/latest: 503 Service Unavailable"),
            "{hub}"
        );
    }
}
