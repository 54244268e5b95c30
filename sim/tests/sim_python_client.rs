//! The official Python Kubernetes client (PyPI `kubernetes`) against the whole simulated
//! cluster, with only the kubeconfig it writes: the second real client the simulator is
//! checked with, next to kubectl. Each test runs one script of checks:
//! - `tests/python_client_check.py`: typed reads and writes of every workload kind, watches,
//!   errors, a PodDisruptionBudget refusing an eviction;
//! - `tests/python_rbac_check.py`: Role and RoleBinding as the admin, then a client holding only
//!   a ServiceAccount token is allowed and refused as RBAC says;
//! - `tests/python_stream_check.py`: exec with stdin written while the process runs, and
//!   port-forward over the v4 channel protocol to a Linux and a Windows pod.
//!
//! `.ci/run` installs the package; without it each test fails under CI (`CI` set) and is
//! skipped, saying why, elsewhere.

mod support;

use std::path::Path;
use std::process::Command;

use support::real_clients::{ClientSim, present_or_skip};

/// Whether `python3` can import the `kubernetes` package.
fn python_client_available() -> bool {
    Command::new("python3")
        .args(["-c", "import kubernetes"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `tests/SCRIPT` against a fresh simulated cluster and requires it to exit 0 and end its
/// output with `ok` (a script that stopped early without an exception would not).
async fn run_check(script: &str) {
    if !present_or_skip(
        python_client_available(),
        "CI is set but the Python `kubernetes` package is missing (python3 -m pip install kubernetes; .ci/run does this)",
        "skipped: the Python `kubernetes` package is not installed (python3 -m pip install kubernetes)",
    ) {
        return;
    }
    let ClientSim { sim, dir, kubeconfig } = ClientSim::start().await;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(script);
    let home = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(&path)
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
        "{script} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(stdout.trim_end().ends_with("ok"), "{script}: {stdout}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_kubernetes_client_drives_the_simulated_cluster() {
    run_check("python_client_check.py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_kubernetes_client_rbac_round_trip() {
    run_check("python_rbac_check.py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_client_streams_exec_stdin_and_port_forward() {
    run_check("python_stream_check.py").await;
}
