//! CRD `Webhook` conversion on the whole simulated cluster, as upstream's
//! crd_conversion_webhook.go sets it up: the emulated `agnhost crd-conversion-webhook` pod
//! serves HTTPS behind a Service with a certificate this test generates, and a CRD serving
//! `stable.example.com` v1 (`hostPort`) and v2 (`host`, `port`) points at it. An object
//! written at v1 reads at v2 converted; after the storage version moves to v2, a list at
//! either version converts the objects stored at the other; a value the converter refuses
//! fails the request with upstream's words; with the `conversion-webhook-skipped` fault the
//! fields come back unconverted.

#![expect(
    clippy::disallowed_methods,
    reason = "the test paces a real server with short sleeps"
)]

mod support;

use std::time::{Duration, Instant};

use crossconf_sim::SimConfig;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use serde_json::{Value, json};
use support::real_clients::ClientSim;

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A CA (PEM) and a serving certificate and key for `name`, PEM.
fn certs(name: &str) -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, "conversion-test-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec![name.to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

async fn create(client: &Client, group: &str, version: &str, plural: &str, kind: &str, ns: Option<&str>, obj: Value) {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {plural}: {e}"));
}

fn crs(client: &Client, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("stable.example.com", version, "Endpoint"),
        "endpoints",
    );
    Api::namespaced_with(client.clone(), "conv", &ar)
}

fn versions(v2_stored: bool) -> Value {
    let schema = |fields: &[&str]| {
        let props: serde_json::Map<String, Value> = fields
            .iter()
            .map(|f| (f.to_string(), json!({"type": "string"})))
            .collect();
        json!({"openAPIV3Schema": {"type": "object", "properties": props}})
    };
    json!([
        {"name": "v1", "served": true, "storage": !v2_stored, "schema": schema(&["hostPort"])},
        {"name": "v2", "served": true, "storage": v2_stored, "schema": schema(&["host", "port"])},
    ])
}

/// Starts a cluster (with `faults`), the converter pod and its Service, and the CRD; returns
/// the client once a v2 write (converted to the v1 storage) succeeds.
async fn setup(faults: Option<&str>) -> (ClientSim, Client) {
    let cfg = SimConfig {
        faults: faults.map(String::from),
        ..Default::default()
    };
    let cs = ClientSim::start_with(cfg).await;
    let client = Client::try_from(cs.sim.kube_config()).unwrap();
    let (ca, cert, key) = certs("e2e-test-crd-conversion-webhook.conv.svc");
    create(
        &client,
        "",
        "v1",
        "namespaces",
        "Namespace",
        None,
        json!({"metadata": {"name": "conv"}}),
    )
    .await;
    create(
        &client,
        "",
        "v1",
        "secrets",
        "Secret",
        Some("conv"),
        json!({"metadata": {"name": "conv-secret"},
        "type": "Opaque", "data": {"tls.crt": b64(&cert), "tls.key": b64(&key)}}),
    )
    .await;
    create(&client, "", "v1", "pods", "Pod", Some("conv"), json!({"metadata": {"name": "converter", "labels": {"crd-webhook": "true"}},
        "spec": {"nodeSelector": {"kubernetes.io/os": "linux"},
            "volumes": [{"name": "certs", "secret": {"secretName": "conv-secret"}}],
            "containers": [{"name": "sample-crd-conversion-webhook", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "args": ["crd-conversion-webhook", "--tls-cert-file=/certs/tls.crt", "--tls-private-key-file=/certs/tls.key", "--port=9444"],
                "ports": [{"containerPort": 9444}],
                "readinessProbe": {"httpGet": {"scheme": "HTTPS", "port": 9444, "path": "/readyz"}, "periodSeconds": 1},
                "volumeMounts": [{"name": "certs", "mountPath": "/certs", "readOnly": true}]}]}})).await;
    create(&client, "", "v1", "services", "Service", Some("conv"), json!({"metadata": {"name": "e2e-test-crd-conversion-webhook"},
        "spec": {"selector": {"crd-webhook": "true"}, "ports": [{"port": 9443, "targetPort": 9444, "protocol": "TCP"}]}})).await;
    create(&client, "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", None, json!({
        "metadata": {"name": "endpoints.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "endpoints", "singular": "endpoint", "kind": "Endpoint"},
            "versions": versions(false),
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1", "v1beta1"],
                "clientConfig": {"caBundle": b64(&ca), "service": {"namespace": "conv", "name": "e2e-test-crd-conversion-webhook",
                    "path": "/crdconvert", "port": 9443}}}}}})).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "conv");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stub: DynamicObject = serde_json::from_value(json!({"apiVersion": "stable.example.com/v2",
            "kind": "Endpoint", "metadata": {"name": "stub"}}))
        .unwrap();
        match crs(&client, "v2").create(&PostParams::default(), &stub).await {
            Ok(_) => break,
            Err(e) => assert!(
                Instant::now() < deadline,
                "conversion never worked: {e}; pod: {:?}",
                pods.get("converter").await.map(|p| p.status)
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (cs, client)
}

fn instance(version: &str, name: &str, fields: Value) -> DynamicObject {
    let mut v =
        json!({"apiVersion": format!("stable.example.com/{version}"), "kind": "Endpoint", "metadata": {"name": name}});
    for (k, x) in fields.as_object().cloned().unwrap_or_default() {
        v[k] = x;
    }
    serde_json::from_value(v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conversion_webhook_converts_reads_writes_and_mixed_lists() {
    crossconf_sim::install_crypto_provider();
    let (_cs, client) = setup(None).await;
    let (v1, v2) = (crs(&client, "v1"), crs(&client, "v2"));
    let pp = PostParams::default();
    v1.create(&pp, &instance("v1", "one", json!({"hostPort": "localhost:8080"})))
        .await
        .unwrap();
    let got = v2.get("one").await.unwrap();
    assert_eq!(got.data["host"], "localhost");
    assert_eq!(got.data["port"], "8080");
    assert!(got.data.get("hostPort").is_none(), "{:?}", got.data);

    // The converter refuses a hostPort without exactly one colon. Written at the storage version
    // (v1) the object needs no conversion and is stored; read at v2 it must be converted, and the
    // read fails with the converter's words.
    v1.create(&pp, &instance("v1", "bad", json!({"hostPort": "a:b:c"})))
        .await
        .unwrap();
    let err = v2.get("bad").await.unwrap_err().to_string();
    assert!(
        err.contains(
            "conversion webhook for stable.example.com/v1, Kind=Endpoint failed: invalid hostPort value `a:b:c`"
        ),
        "{err}"
    );
    v1.delete("bad", &Default::default()).await.unwrap();

    // Storage moves to v2; a v1 write is stored at v2, and both lists convert what differs.
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    crds.patch(
        "endpoints.stable.example.com",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"versions": versions(true)}})),
    )
    .await
    .unwrap();
    v1.create(&pp, &instance("v1", "two", json!({"hostPort": "localhost:8080"})))
        .await
        .unwrap();
    for item in v1.list(&ListParams::default()).await.unwrap().items {
        if item.metadata.name.as_deref() == Some("stub") {
            continue;
        }
        assert_eq!(item.data["hostPort"], "localhost:8080", "{:?}", item.data);
        assert!(item.data.get("host").is_none());
    }
    let listed = v2.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(listed.len(), 3);
    for item in listed.iter().filter(|i| i.metadata.name.as_deref() != Some("stub")) {
        assert_eq!(
            (item.data["host"].as_str(), item.data["port"].as_str()),
            (Some("localhost"), Some("8080"))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_webhook_fields_stay_unconverted() {
    crossconf_sim::install_crypto_provider();
    let (_cs, client) = setup(Some("conversion-webhook-skipped")).await;
    crs(&client, "v1")
        .create(
            &PostParams::default(),
            &instance("v1", "one", json!({"hostPort": "localhost:8080"})),
        )
        .await
        .unwrap();
    let got = crs(&client, "v2").get("one").await.unwrap();
    assert_eq!(got.types.unwrap().api_version, "stable.example.com/v2");
    assert_eq!(got.data["hostPort"], "localhost:8080");
    assert!(got.data.get("host").is_none());
}
