//! `crossconf doctor` against the simulated cluster: every row OK on a healthy cluster (the
//! simulator runs kube-proxy and flannel DaemonSets on its Windows nodes, as a kubeadm cluster
//! joined with the sig-windows-tools guide does), and FAIL with exit 1 on the DNS row once the
//! cluster DNS Service is gone.

#![expect(
    clippy::disallowed_methods,
    reason = "the test paces a real server or process with short sleeps"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A `crossconf sim` in its own process, stopped with SIGINT when dropped.
struct Sim {
    child: Child,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_sim() -> Sim {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let child = Command::new(env!("CARGO_BIN_EXE_crossconf"))
        .args(["sim", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut sim = Sim {
        child,
        kubeconfig,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    // The kubeconfig is written atomically once the cluster answers.
    while !sim.kubeconfig.exists() {
        if let Ok(Some(status)) = sim.child.try_wait() {
            panic!("crossconf sim exited early: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the simulator did not write its kubeconfig in 60s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    sim
}

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

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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

async fn delete_dns_service(kubeconfig: &Path) {
    crossconf::install_crypto_provider();
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let services: Api<Service> = Api::namespaced(client, "kube-system");
    services.delete("kube-dns", &DeleteParams::default()).await.unwrap();
    assert!(services.get_opt("kube-dns").await.unwrap().is_none());
}

#[test]
fn doctor_fails_the_dns_row_without_the_dns_service() {
    let sim = start_sim();
    let kubeconfig = sim.kubeconfig.to_str().unwrap().to_string();
    // Healthy first, so the failure below is the deletion's doing.
    let before = doctor(&["--kubeconfig", &kubeconfig]);
    assert_eq!(before.status.code(), Some(0), "{}", describe(&before));

    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(delete_dns_service(&sim.kubeconfig));

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
