//! The Python Kubernetes client's streaming calls against the simulated cluster: exec with
//! stdin written while the process runs, and port-forward over the v4 channel protocol to a
//! Linux and a Windows pod. The checks live in `tests/python_stream_check.py`.
//!
//! As in `sim_python_client`, a missing package fails under CI and is skipped elsewhere.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_client_streams_exec_stdin_and_port_forward() {
    if !present_or_skip(
        python_client_available(),
        "CI is set but the Python `kubernetes` package is missing (python3 -m pip install kubernetes; .ci/run does this)",
        "skipped: the Python `kubernetes` package is not installed (python3 -m pip install kubernetes)",
    ) {
        return;
    }
    let ClientSim { sim, dir, kubeconfig } = ClientSim::start().await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python_stream_check.py");
    let home = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(&script)
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
        "python_stream_check.py failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(stdout.trim_end().ends_with("ok"), "{stdout}");
    sim.shutdown().await;
}
