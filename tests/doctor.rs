//! `crossconf doctor` against the simulated cluster: every row OK on a healthy cluster (the
//! simulator runs kube-proxy and flannel DaemonSets on its Windows nodes, as a kubeadm cluster
//! joined with the sig-windows-tools guide does), and FAIL with exit 1 on the DNS row once the
//! cluster DNS Service is gone.

mod support;

use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams};
use support::sim_process::{SimProcess, describe};

fn doctor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crossconf"))
        .arg("doctor")
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("KUBE_TEST_REPO_LIST")
        .output()
        .unwrap()
}

/// The table's rows as `(level, row text)`; advice lines (starting with spaces) are skipped.
fn rows(out: &Output) -> Vec<(String, String)> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.trim().is_empty())
        .map(|l| {
            let (level, rest) = l.split_once(' ').unwrap_or((l, ""));
            (level.to_string(), rest.trim().to_string())
        })
        .collect()
}

#[test]
fn doctor_on_the_simulated_cluster_is_all_ok() {
    let out = doctor(&["--sim"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let rows = rows(&out);
    assert!(rows.len() >= 10, "{}", describe(&out));
    for (level, text) in &rows {
        assert_eq!(level, "OK", "row {text:?} is not OK\n{}", describe(&out));
    }
    let find = |name: &str| {
        rows.iter()
            .find(|(_, t)| t.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row\n{}", describe(&out)))
            .1
            .clone()
    };
    // The add-ons are found by the names real clusters give them, with a ready pod per node.
    let proxy = find("kube-proxy for Windows");
    assert!(proxy.contains("kube-proxy-windows: 2 of 2 pods ready"), "{proxy}");
    let cni = find("CNI for Windows");
    assert!(
        cni.contains("kube-flannel-ds-windows-amd64: 2 of 2 pods ready"),
        "{cni}"
    );
    assert!(find("cluster DNS Service").contains("kube-system/kube-dns"));
}

async fn delete_dns_service(sim: &SimProcess) {
    let client = sim.client().await;
    let services: Api<Service> = Api::namespaced(client, "kube-system");
    services.delete("kube-dns", &DeleteParams::default()).await.unwrap();
    assert!(services.get_opt("kube-dns").await.unwrap().is_none());
}

#[test]
fn doctor_fails_the_dns_row_without_the_dns_service() {
    let sim = SimProcess::start(&[], Duration::from_secs(60));
    let kubeconfig = sim.kubeconfig.to_str().unwrap().to_string();
    // Healthy first, so the failure below is the deletion's doing.
    let before = doctor(&["--kubeconfig", &kubeconfig]);
    assert_eq!(before.status.code(), Some(0), "{}", describe(&before));

    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(delete_dns_service(&sim));

    let out = doctor(&["--kubeconfig", &kubeconfig]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let rows = rows(&out);
    let failed: Vec<&(String, String)> = rows.iter().filter(|(l, _)| l != "OK").collect();
    assert_eq!(failed.len(), 1, "only the DNS row should fail\n{}", describe(&out));
    let (level, text) = failed[0];
    assert_eq!(level, "FAIL");
    assert!(
        text.starts_with("cluster DNS Service") && text.contains("kube-system/kube-dns not found"),
        "{text}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("→ deploy CoreDNS"), "advice missing\n{stdout}");
}
