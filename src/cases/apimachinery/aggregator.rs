//! `[sig-api-machinery] Aggregator` (upstream test/e2e/apimachinery/aggregator.go): the
//! sample-apiserver and its etcd run in a Deployment behind Service `sample-api` (7443 to
//! 443), an APIService hands it `wardle.example.com/v1alpha1` with the case's CA, and the
//! API server must proxy Flunder reads and writes to it (REST and dynamic client), list it in
//! discovery, and serve the APIService's own status, patch, update, list and deletecollection.
//!
//! The sample-apiserver and etcd images are Linux-only (their BASEIMAGE lists no Windows
//! variant), so the Deployment is pinned to Linux nodes on either target; what the case
//! checks is the API server's aggregation, the same for both OSes. Upstream's test gives the
//! pod no nodeSelector, which on a cluster with Windows workers leaves placement to chance.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{HTTPGetAction, Probe, Service, ServiceAccount, ServicePort, ServiceSpec};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::pods::PodBuilder;
use crate::framework::wait::conditions as wc;
use crate::framework::workloads::{deployment, secret, secret_volume, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, delete_ignoring_absent};
use crate::os::Os;
use crate::{ensure, fail};

/// Upstream aggregator.go "Should be able to support the 1.17 Sample API Server using the
/// current Aggregator".
pub(crate) const SAMPLE_API_SERVER: &str = "[sig-api-machinery] Aggregator Should be able to support the 1.17 Sample API Server using the current Aggregator [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(SAMPLE_API_SERVER, Kind::Adapted, sample_api_server)]
}

/// Upstream's `samplev1alpha1.GroupName`.
const GROUP: &str = "wardle.example.com";
/// Upstream's `defaultApiServiceVersion`.
const VERSION: &str = "v1alpha1";
/// Upstream's `aggregatorServicePort`.
const SERVICE_PORT: i32 = 7443;
const DEPLOYMENT: &str = "sample-apiserver-deployment";
const SECRET: &str = "sample-apiserver-secret";
const SERVICE: &str = "sample-api";
/// How long upstream waits for the first proxied list (its `pollTimed` 60 s, at 100 ms).
const READY_WITHIN: Duration = Duration::from_secs(60);
const READY_EVERY: Duration = Duration::from_millis(100);
/// Upstream's `apiServiceRetryTimeout`.
const DELETED_WITHIN: Duration = Duration::from_secs(120);

/// `v1alpha1.wardle.example.com`.
fn api_service_name() -> String {
    format!("{VERSION}.{GROUP}")
}

fn api_services(f: &Framework) -> Api<DynamicObject> {
    api_services_of(f.client())
}

fn api_services_of(client: kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "apiregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiregistration.k8s.io/v1".into(),
        kind: "APIService".into(),
        plural: "apiservices".into(),
    };
    Api::all_with(client, &ar)
}

/// Upstream's `sampleAPIServerObjectNames`.
struct Names {
    role_binding: String,
    cluster_role: String,
    cluster_role_binding: String,
    auth_delegator: String,
}

impl Names {
    fn of(ns: &str) -> Self {
        Names {
            role_binding: format!("wardler-auth-reader-{ns}"),
            cluster_role: format!("sample-apiserver-reader-{ns}"),
            cluster_role_binding: format!("wardler:{ns}sample-apiserver-reader-{ns}"),
            auth_delegator: format!("wardler:{ns}:auth-delegator"),
        }
    }
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

fn default_sa(ns: &str) -> Vec<Subject> {
    vec![Subject {
        kind: "ServiceAccount".into(),
        name: "default".into(),
        namespace: Some(ns.into()),
        api_group: Some(String::new()),
    }]
}

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: verbs.iter().map(ToString::to_string).collect(),
        api_groups: Some(vec![group.into()]),
        resources: Some(resources.iter().map(ToString::to_string).collect()),
        ..Default::default()
    }
}

/// A raw request: status code and body text.
async fn raw(
    f: &Framework,
    method: http::Method,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<(u16, String), CaseError> {
    let req = http::Request::builder()
        .method(method.clone())
        .uri(path)
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body)
        .map_err(|e| CaseError::failed(format!("building {method} {path}: {e}")))?;
    let resp = f
        .client()
        .send(req.map(kube::client::Body::from))
        .await
        .map_err(|e| CaseError::from(e).context(format!("{method} {path}")))?;
    let code = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| CaseError::from(e).context(format!("reading the answer to {method} {path}")))?;
    Ok((code, String::from_utf8_lossy(&bytes).into_owned()))
}

/// A raw request that must succeed; its JSON answer.
async fn raw_ok(
    f: &Framework,
    method: http::Method,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<Value, CaseError> {
    let (code, text) = raw(f, method.clone(), path, content_type, body).await?;
    ensure!(
        (200..300).contains(&code),
        "{method} {path}: expected a 2xx answer, got {code}: {text}"
    );
    serde_json::from_str(&text)
        .map_err(|e| CaseError::failed(format!("{method} {path} answered what is not JSON: {e}: {text}")))
}

/// Upstream's `SetUpSampleAPIServer`.
async fn set_up(f: &Framework, n: &Names) -> CaseResult {
    let ns = f.ns().to_string();
    f.require_nodes(Os::Linux, 1).await?;
    f.step("registering the sample API server");
    let c = crate::framework::webhook::certs(&format!("{SERVICE}.{ns}.svc"))
        .map_err(|e| CaseError::failed(e.to_string()))?;
    f.create(&secret(SECRET, &[("tls.crt", &c.cert), ("tls.key", &c.key)]))
        .await?;

    f.step(format!("creating ClusterRole {} and its bindings", n.cluster_role));
    let role = ClusterRole {
        metadata: meta(&n.cluster_role),
        rules: Some(vec![
            rule(&["get", "list", "watch"], "", &["namespaces"]),
            rule(&["get", "list", "watch"], "admissionregistration.k8s.io", &["*"]),
            rule(
                &["get", "list", "watch"],
                "flowcontrol.apiserver.k8s.io",
                &["prioritylevelconfigurations", "flowschemas"],
            ),
        ]),
        ..Default::default()
    };
    f.api_all::<ClusterRole>().create(&PostParams::default(), &role).await?;
    f.defer_cleanup(
        format!("ClusterRole {}", n.cluster_role),
        delete_ignoring_absent(
            f.api_all::<ClusterRole>(),
            n.cluster_role.clone(),
            n.cluster_role.clone(),
        ),
    );
    let binding = |name: &str, role: &str| ClusterRoleBinding {
        metadata: meta(name),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(default_sa(&ns)),
    };
    let crbs = f.api_all::<ClusterRoleBinding>();
    for (name, role) in [
        (&n.cluster_role_binding, n.cluster_role.as_str()),
        (&n.auth_delegator, "system:auth-delegator"),
    ] {
        crbs.create(&PostParams::default(), &binding(name, role)).await?;
        f.defer_cleanup(
            format!("ClusterRoleBinding {name}"),
            delete_ignoring_absent(crbs.clone(), name.clone(), name.clone()),
        );
    }

    f.step(format!("deploying {DEPLOYMENT}"));
    let image = f.image("sample-apiserver", Os::Linux)?;
    let etcd_image = f.image("etcd", Os::Linux)?;
    let etcd_url = "http://127.0.0.1:2379";
    let mount = "/apiserver.local.config/certificates";
    let probe = Probe {
        http_get: Some(HTTPGetAction {
            scheme: Some("HTTPS".into()),
            port: IntOrString::Int(443),
            path: Some("/readyz".into()),
            ..Default::default()
        }),
        initial_delay_seconds: Some(20),
        period_seconds: Some(1),
        success_threshold: Some(1),
        failure_threshold: Some(3),
        ..Default::default()
    };
    let server = ContainerBuilder::literal("sample-apiserver", &image)
        .args([
            format!("--etcd-servers={etcd_url}"),
            format!("--tls-cert-file={mount}/tls.crt"),
            format!("--tls-private-key-file={mount}/tls.key"),
            "--audit-log-path=-".into(),
            "--audit-log-maxage=0".into(),
            "--audit-log-maxbackup=0".into(),
        ])
        .mount("apiserver-certs", mount, true)
        .with(move |c| c.readiness_probe = Some(probe.clone()));
    let etcd = ContainerBuilder::literal("etcd", &etcd_image).command([
        "/usr/local/bin/etcd",
        "--listen-client-urls",
        etcd_url,
        "--advertise-client-urls",
        etcd_url,
    ]);
    let pod = PodBuilder::new("sample-apiserver", Os::Linux)
        .label("app", "sample-apiserver")
        .label("apiserver", "true")
        .volume(secret_volume("apiserver-certs", SECRET, &[]))
        .container(server)
        .container(etcd)
        .build(f)?;
    f.create(&deployment(DEPLOYMENT, 1, template_of(pod))).await?;
    // Upstream's WaitForDeploymentRevisionAndImage, for each image.
    for img in [&image, &etcd_image] {
        let want = img.clone();
        f.wait_for(
            &f.api::<Deployment>(),
            DEPLOYMENT,
            move |d: Option<&Deployment>| {
                d.is_some_and(|d| {
                    let revision = d
                        .annotations()
                        .get("deployment.kubernetes.io/revision")
                        .map(String::as_str);
                    let images = d
                        .spec
                        .as_ref()
                        .and_then(|s| s.template.spec.as_ref())
                        .is_some_and(|s| s.containers.iter().any(|c| c.image.as_deref() == Some(want.as_str())));
                    revision == Some("1") && images
                })
            },
            &format!("to reach revision 1 with image {img}"),
        )
        .await?;
    }

    f.create(&Service {
        metadata: ObjectMeta {
            name: Some(SERVICE.into()),
            labels: Some([("test".to_string(), "aggregator".to_string())].into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some([("apiserver".to_string(), "true".to_string())].into()),
            ports: Some(vec![ServicePort {
                protocol: Some("TCP".into()),
                port: SERVICE_PORT,
                target_port: Some(IntOrString::Int(443)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await?;
    f.create(&ServiceAccount {
        metadata: meta("sample-apiserver"),
        ..Default::default()
    })
    .await?;
    let reader = RoleBinding {
        metadata: ObjectMeta {
            name: Some(n.role_binding.clone()),
            annotations: Some(
                [(
                    "rbac.authorization.kubernetes.io/autoupdate".to_string(),
                    "true".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: String::new(),
            kind: "Role".into(),
            name: "extension-apiserver-authentication-reader".into(),
        },
        subjects: Some(default_sa(&ns)),
    };
    let kube_system = Api::<RoleBinding>::namespaced(f.client(), "kube-system");
    kube_system.create(&PostParams::default(), &reader).await?;
    f.defer_cleanup(
        format!("RoleBinding kube-system/{}", n.role_binding),
        delete_ignoring_absent(kube_system, n.role_binding.clone(), n.role_binding.clone()),
    );

    f.wait_for(
        &f.api::<Deployment>(),
        DEPLOYMENT,
        wc::is_deployment_rolled_out(),
        "deploying extension apiserver",
    )
    .await?;

    f.step(format!("creating APIService {}", api_service_name()));
    let apiservice: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": api_service_name()},
        "spec": {"service": {"namespace": ns, "name": SERVICE, "port": SERVICE_PORT},
            "group": GROUP, "version": VERSION,
            "caBundle": base64_of(&c.ca), "groupPriorityMinimum": 2000, "versionPriority": 200}
    }))
    .map_err(|e| CaseError::failed(format!("building the APIService: {e}")))?;
    // The APIService name is cluster-wide: a run's other lane may hold it in the same cluster
    // (upstream runs the case once per cluster). Wait for that one to go, then take it.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        match api_services(f).create(&PostParams::default(), &apiservice).await {
            Ok(_) => {
                // Gone before its backend's namespace: an APIService outliving its backend
                // fails aggregated discovery, which holds every terminating namespace.
                f.defer_cleanup(
                    format!("APIService {}", api_service_name()),
                    delete_own_api_service(f.client(), ns.clone()),
                );
                break;
            }
            Err(kube::Error::Api(s)) if s.code == 409 && f.remaining() > READY_WITHIN => {}
            Err(e) => return Err(CaseError::from(e).context(format!("creating APIService {}", api_service_name()))),
        }
    }

    f.step("waiting for the sample-apiserver to be ready to handle requests");
    let path = format!("/apis/{GROUP}/{VERSION}/namespaces/default/flunders");
    let deadline = Instant::now() + READY_WITHIN.min(f.remaining());
    let mut tick = tokio::time::interval(READY_EVERY);
    loop {
        tick.tick().await;
        let (code, text) = raw(f, http::Method::GET, &path, "application/json", Vec::new()).await?;
        let retry = code == 403
            || code == 503
            || (code == 404 && message_of(&text).starts_with("the server could not find the requested resource"));
        match code {
            200..=299 => return Ok(()),
            _ if !retry => fail!("GET {path}: expected the flunder list, got {code}: {text}"),
            _ if Instant::now() >= deadline => {
                let current = api_services(f).get(&api_service_name()).await.ok();
                fail!(
                    "gave up waiting for apiservice wardle to come up successfully: GET {path} still answers {code} ({text}) after {READY_WITHIN:?}; APIService status: {}",
                    current.map(|s| s.data["status"].to_string()).unwrap_or_default()
                );
            }
            _ => {}
        }
    }
}

fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The `message` of a Status body, or the body itself (a plain-text proxy error).
fn message_of(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v["message"].as_str().map(String::from))
        .unwrap_or_else(|| text.trim().to_string())
}

/// Upstream's `cleanupSampleAPIServer` for the APIService: deleted only while it still points
/// at this case's namespace (another lane may hold the cluster-wide name by now); absent is fine.
/// The ClusterRole and the bindings have their own deferred clean-ups, and the namespace takes
/// the rest.
async fn delete_own_api_service(client: kube::Client, ns: String) -> CaseResult {
    let api = api_services_of(client);
    let ours = match api.get(&api_service_name()).await {
        Ok(s) => s.data.pointer("/spec/service/namespace").and_then(Value::as_str) == Some(ns.as_str()),
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => return Err(CaseError::from(e).context("reading the APIService before deleting it")),
    };
    if !ours {
        return Ok(());
    }
    delete_ignoring_absent(api, api_service_name(), "the APIService".into()).await
}

async fn sample_api_server(f: &Framework) -> CaseResult {
    set_up(f, &Names::of(f.ns())).await?;
    exercise(f).await
}

fn flunder_name(base: &str) -> String {
    format!("{base}-{}", uuid::Uuid::new_v4().as_u128() % 2_147_483_647)
}

/// Upstream's `TestSampleAPIServer` after the set-up.
async fn exercise(f: &Framework) -> CaseResult {
    let ns = f.ns().to_string();
    let base = format!("/apis/{GROUP}/{VERSION}/namespaces/default/flunders");
    let name = flunder_name("rest-flunder");
    let flunder = json!({"apiVersion": format!("{GROUP}/{VERSION}"), "kind": "Flunder",
        "metadata": {"labels": {"sample-label": "true"}, "name": name, "namespace": "default"}});
    f.step(format!("creating flunder {name} through the aggregator"));
    let (code, text) = raw(
        f,
        http::Method::POST,
        &base,
        "application/json",
        flunder.to_string().into_bytes(),
    )
    .await?;
    ensure!(
        code == 201,
        "Flunders client creation response was status {code}, not 201: {text}"
    );
    let created: Value =
        serde_json::from_str(&text).map_err(|e| CaseError::failed(format!("reading created response: {e}: {text}")))?;
    ensure!(
        created["apiVersion"] == format!("{GROUP}/{VERSION}")
            && created["kind"] == "Flunder"
            && created["metadata"]["name"] == name,
        "the created flunder: expected {GROUP}/{VERSION} Flunder {name}, got {} {} {}",
        created["apiVersion"],
        created["kind"],
        created["metadata"]["name"]
    );
    let list = raw_ok(f, http::Method::GET, &base, "application/json", Vec::new()).await?;
    let count = list["items"].as_array().map_or(0, Vec::len);
    ensure!(
        count == 1,
        "failed to get back the correct flunders list: expected 1 item, got {count}: {list}"
    );
    raw_ok(
        f,
        http::Method::DELETE,
        &format!("{base}/{name}"),
        "application/json",
        Vec::new(),
    )
    .await?;
    let list = raw_ok(f, http::Method::GET, &base, "application/json", Vec::new()).await?;
    let count = list["items"].as_array().map_or(0, Vec::len);
    ensure!(
        count == 0,
        "failed to get back the correct deleted flunders list: expected 0 items, got {count}: {list}"
    );

    // The dynamic client, after finding the resource through discovery.
    f.step("finding flunders through discovery");
    let discovery = kube::discovery::Discovery::new(f.client())
        .filter(&[GROUP])
        .run()
        .await
        .map_err(|e| CaseError::from(e).context("discovering the wardle group"))?;
    let Some((ar, caps)) = discovery
        .groups()
        .flat_map(|g| g.versioned_resources(VERSION))
        .find(|(ar, _)| ar.plural == "flunders" && ar.group == GROUP)
    else {
        fail!("could not find group version resource for dynamic client and wardle/flunders in discovery");
    };
    ensure!(
        caps.scope == kube::discovery::Scope::Namespaced,
        "flunders: expected a namespaced resource in discovery, got {:?}",
        caps.scope
    );
    let flunders: Api<DynamicObject> = Api::namespaced_with(f.client(), &ns, &ar);
    let dynamic_name = flunder_name("dynamic-flunder");
    let test_flunder: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/{VERSION}"), "kind": "Flunder",
        "metadata": {"name": dynamic_name}, "spec": {}}))
    .map_err(|e| CaseError::failed(format!("building the dynamic flunder: {e}")))?;
    flunders.create(&PostParams::default(), &test_flunder).await?;
    let listed = flunders.list(&ListParams::default()).await?;
    ensure!(
        listed.items.len() == 1,
        "failed to get back the correct flunders list from the dynamic client: expected 1, got {}",
        listed.items.len()
    );

    let name = api_service_name();
    let status_path = format!("/apis/apiregistration.k8s.io/v1/apiservices/{name}/status");
    f.step(format!("reading the status of {name}"));
    let status = raw_ok(f, http::Method::GET, &status_path, "application/json", Vec::new()).await?;
    let first = &status["status"]["conditions"][0]["message"];
    ensure!(
        first == "all checks passed",
        "The Message returned was {first}, expected \"all checks passed\""
    );

    f.step(format!(
        "kubectl patch apiservice {name} -p '{{\"spec\":{{\"versionPriority\": 400}}}}'"
    ));
    let patched = raw_ok(
        f,
        http::Method::PATCH,
        &format!("/apis/apiregistration.k8s.io/v1/apiservices/{name}"),
        "application/merge-patch+json",
        br#"{"spec":{"versionPriority": 400}}"#.to_vec(),
    )
    .await?;
    ensure!(
        patched["spec"]["versionPriority"] == 400,
        "The VersionPriority returned was {}, expected 400",
        patched["spec"]["versionPriority"]
    );

    f.step("listing APIServices");
    let all = raw_ok(
        f,
        http::Method::GET,
        "/apis/apiregistration.k8s.io/v1/apiservices",
        "application/json",
        Vec::new(),
    )
    .await?;
    let found = all["items"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|i| i["metadata"]["name"] == name);
    ensure!(found, "Unable to find {name} in APIServiceList");

    f.step("adding a label to the APIService");
    let svcs = api_services(f);
    svcs.patch(
        &name,
        &PatchParams::default(),
        &Patch::Strategic(json!({"metadata": {"labels": {"e2e-apiservice": "patched"}}})),
    )
    .await?;

    f.step("updating the APIService status");
    let mut current = raw_ok(f, http::Method::GET, &status_path, "application/json", Vec::new()).await?;
    push_condition(&mut current, "StatusUpdated", "Set from e2e test");
    raw_ok(
        f,
        http::Method::PUT,
        &status_path,
        "application/json",
        current.to_string().into_bytes(),
    )
    .await?;
    let read = raw_ok(f, http::Method::GET, &status_path, "application/json", Vec::new()).await?;
    ensure!(
        has_condition(&read, "StatusUpdated", "Set from e2e test"),
        "The updated status condition was not found in: {}",
        read["status"]["conditions"]
    );

    f.step(format!("replacing APIService {name}"));
    let mut current = svcs.get(&name).await?;
    current.metadata.labels = Some([(name.clone(), "updated".to_string())].into());
    let updated = svcs.replace(&name, &PostParams::default(), &current).await?;
    let label = updated.labels().get(&name).cloned().unwrap_or_default();
    ensure!(label == "updated", "should have the updated label but have {label:?}");

    f.step(format!("deleting flunder {dynamic_name}"));
    flunders.delete(&dynamic_name, &DeleteParams::default()).await?;
    let listed = flunders.list(&ListParams::default()).await?;
    ensure!(
        listed.items.is_empty(),
        "failed to get back the correct deleted flunders list from the dynamic client: {} left",
        listed.items.len()
    );
    f.step("recreating the flunder before removing the APIService via deleteCollection");
    flunders.create(&PostParams::default(), &test_flunder).await?;
    let listed = flunders.list(&ListParams::default()).await?;
    ensure!(
        listed.items.len() == 1,
        "failed to get back the correct flunders list from the dynamic client: expected 1, got {}",
        listed.items.len()
    );

    f.step("patching the APIService status");
    let before = raw_ok(f, http::Method::GET, &status_path, "application/json", Vec::new()).await?;
    let mut conditions = before["status"]["conditions"].as_array().cloned().unwrap_or_default();
    conditions.push(json!({"type": "StatusPatched", "status": "True", "reason": "E2E", "message": "Set by e2e test"}));
    raw_ok(
        f,
        http::Method::PATCH,
        &status_path,
        "application/merge-patch+json",
        json!({"status": {"conditions": conditions}}).to_string().into_bytes(),
    )
    .await?;
    let read = raw_ok(f, http::Method::GET, &status_path, "application/json", Vec::new()).await?;
    ensure!(
        has_condition(&read, "StatusPatched", "Set by e2e test"),
        "The patched status condition was not found in: {}",
        read["status"]["conditions"]
    );

    let selector = format!("{name}=updated");
    f.step(format!("APIService deleteCollection with labelSelector {selector:?}"));
    svcs.delete_collection(&DeleteParams::default(), &ListParams::default().labels(&selector))
        .await?;
    // Upstream's checkAPIServiceListQuantity, every second for up to two minutes.
    let deadline = Instant::now() + DELETED_WITHIN.min(f.remaining());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let left = svcs.list(&ListParams::default().labels(&selector)).await?.items.len();
        if left == 0 {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "failed to count the required APIServices: expected 0 with label {selector:?}, found {left} after {DELETED_WITHIN:?}"
        );
    }
}

fn push_condition(obj: &mut Value, kind: &str, message: &str) {
    let cond = json!({"type": kind, "status": "True", "reason": "E2E", "message": message});
    match obj["status"]["conditions"].as_array_mut() {
        Some(list) => list.push(cond),
        None => obj["status"]["conditions"] = json!([cond]),
    }
}

fn has_condition(obj: &Value, kind: &str, message: &str) -> bool {
    obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["reason"] == "E2E" && c["message"] == message)
}
