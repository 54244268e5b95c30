//! The networking, policy, storage, certificates and flowcontrol kinds, PodTemplate,
//! ComponentStatus, TokenRequests and evictions against a real kube-rs client with the
//! k8s-openapi types: each kind is created, read, listed and watched through its typed API (a
//! response the types cannot deserialise fails), validation answers as upstream's, and the
//! eviction subresource honours a PodDisruptionBudget.

use std::time::Duration;

use crossconf_sim::addr::AddressBlock;
use crossconf_sim::api::{ApiConfig, ApiServer};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ComponentStatus, Pod, PodTemplate, ServiceAccount};
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::api::networking::v1::{Ingress, IngressClass, NetworkPolicy};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, Error as KubeError, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn block() -> AddressBlock {
    AddressBlock(100 + (std::process::id() % 100) as u8 + 29)
}

async fn start() -> (ApiServer, Client) {
    crossconf_sim::install_crypto_provider();
    let srv = ApiServer::start(ApiConfig::new(block()).port(0))
        .await
        .expect("api server starts");
    let client = Client::try_from(srv.kube_config()).expect("client");
    (srv, client)
}

fn api_err(e: KubeError) -> (u16, String, String) {
    match e {
        KubeError::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn obj<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("a valid object")
}

/// Creates, reads, lists and watches one object through its typed API; returns it as read.
async fn round_trip<K>(api: &Api<K>, v: Value) -> K
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = v["metadata"]["name"].as_str().unwrap().to_string();
    let mut events = api
        .watch(&WatchParams::default().timeout(10), "0")
        .await
        .expect("watch starts")
        .boxed();
    let created = api.create(&PostParams::default(), &obj(v)).await.expect("create");
    assert_eq!(created.name_any(), name);
    let got = api.get(&name).await.expect("get");
    assert_eq!(got.meta().uid, created.meta().uid);
    let listed = api.list(&ListParams::default()).await.expect("list");
    assert!(listed.items.iter().any(|o| o.name_any() == name), "{name} listed");
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(ev) = events.next().await {
            if let WatchEvent::Added(o) = ev.expect("a watch event the types read")
                && o.name_any() == name
            {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(seen, "{name}: no ADDED event");
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_kinds_round_trip_through_typed_clients() {
    let (srv, client) = start().await;
    let ns = "default";
    let np: NetworkPolicy = round_trip(
        &Api::namespaced(client.clone(), ns),
        json!({"metadata": {"name": "deny"}, "spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}}),
    )
    .await;
    let spec = np.spec.unwrap();
    assert_eq!(spec.policy_types.unwrap(), ["Ingress", "Egress"]);
    assert_eq!(
        spec.egress.unwrap()[0].ports.as_ref().unwrap()[0].protocol.as_deref(),
        Some("TCP")
    );
    assert_eq!(np.metadata.generation, Some(1));

    let ing: Ingress = round_trip(
        &Api::namespaced(client.clone(), ns),
        json!({"metadata": {"name": "web"}, "spec": {"rules": [{"host": "a.example", "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
    )
    .await;
    assert!(
        ing.status.unwrap().load_balancer.is_some(),
        "status.loadBalancer is written"
    );
    let ings: Api<Ingress> = Api::namespaced(client.clone(), ns);
    let st = ings
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.9"}]}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        st.status.unwrap().load_balancer.unwrap().ingress.unwrap()[0]
            .ip
            .as_deref(),
        Some("127.0.0.9")
    );

    let ic: IngressClass = round_trip(
        &Api::all(client.clone()),
        json!({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx",
            "parameters": {"kind": "IngressParameters", "name": "p", "apiGroup": "k8s.example.com"}}}),
    )
    .await;
    assert_eq!(ic.spec.unwrap().parameters.unwrap().scope.as_deref(), Some("Cluster"));

    let pdb: PodDisruptionBudget = round_trip(
        &Api::namespaced(client.clone(), ns),
        json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .await;
    let status = pdb.status.expect("status is written");
    assert_eq!(
        (status.disruptions_allowed, status.expected_pods, status.current_healthy),
        (0, 0, 0)
    );

    let sc: StorageClass = round_trip(
        &Api::all(client.clone()),
        json!({"metadata": {"name": "standard"}, "provisioner": "rancher.io/local-path"}),
    )
    .await;
    assert_eq!(sc.reclaim_policy.as_deref(), Some("Delete"));
    assert_eq!(sc.volume_binding_mode.as_deref(), Some("Immediate"));
    let driver: CSIDriver = round_trip(
        &Api::all(client.clone()),
        json!({"metadata": {"name": "csi.example.com"}, "spec": {}}),
    )
    .await;
    let dspec = driver.spec;
    assert_eq!(
        (
            dspec.attach_required,
            dspec.pod_info_on_mount,
            dspec.fs_group_policy.as_deref()
        ),
        (Some(true), Some(false), Some("ReadWriteOnceWithFSType"))
    );
    let _: CSINode = round_trip(
        &Api::all(client.clone()),
        json!({"metadata": {"name": "win-1"}, "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "win-1"}]}}),
    )
    .await;
    let va: VolumeAttachment = round_trip(
        &Api::all(client.clone()),
        json!({"metadata": {"name": "va"}, "spec": {"attacher": "csi.example.com", "nodeName": "win-1",
            "source": {"persistentVolumeName": "pv-1"}}}),
    )
    .await;
    assert_eq!(va.status.map(|s| s.attached), Some(false));
    let _: CSIStorageCapacity = round_trip(
        &Api::namespaced(client.clone(), ns),
        json!({"metadata": {"name": "cap"}, "storageClassName": "standard", "capacity": "10Gi"}),
    )
    .await;
    let _: PodTemplate = round_trip(
        &Api::namespaced(client.clone(), ns),
        json!({"metadata": {"name": "tpl"}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}),
    )
    .await;
    let _: FlowSchema = round_trip(
        &Api::all(client.clone()),
        json!({"metadata": {"name": "mine"}, "spec": {"priorityLevelConfiguration": {"name": "workload-low"}}}),
    )
    .await;
    let _: PriorityLevelConfiguration = round_trip(
        &Api::all(client.clone()),
        json!({"metadata": {"name": "mine"}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}}}),
    )
    .await;

    // Bootstrap objects a 1.33 server creates.
    let fss: Api<FlowSchema> = Api::all(client.clone());
    let catch_all = fss.get("catch-all").await.unwrap();
    assert_eq!(catch_all.spec.unwrap().matching_precedence, Some(10000));
    let pls: Api<PriorityLevelConfiguration> = Api::all(client.clone());
    assert_eq!(pls.list(&ListParams::default()).await.unwrap().items.len(), 9);
    let css: Api<ComponentStatus> = Api::all(client.clone());
    let names: Vec<String> = css
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(names, ["controller-manager", "etcd-0", "scheduler"]);
    let (code, _, _) = api_err(
        css.create(&PostParams::default(), &obj(json!({"metadata": {"name": "x"}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 405, "ComponentStatus is read-only");

    // A DaemonSet nobody reconciled reads back with the counts its Go type always carries.
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    let ds = dss
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}})),
        )
        .await
        .expect("a DaemonSet status without counts would not deserialise");
    assert_eq!(ds.status.unwrap().number_ready, 0);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_answers_like_upstream() {
    let (srv, client) = start().await;
    let ings: Api<Ingress> = Api::namespaced(client.clone(), "default");
    let (code, reason, msg) = api_err(
        ings.create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "empty"}, "spec": {}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(
        msg,
        "Ingress.networking.k8s.io \"empty\" is invalid: spec: Invalid value: []: either `defaultBackend` or `rules` must be specified"
    );
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let (code, _, msg) = api_err(
        pdbs.create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "both"}, "spec": {"minAvailable": 1, "maxUnavailable": 1}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        msg.contains("minAvailable and maxUnavailable cannot be both set"),
        "{msg}"
    );
    let scs: Api<StorageClass> = Api::all(client.clone());
    scs.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "sc"}, "provisioner": "p", "parameters": {"a": "1"}})),
    )
    .await
    .unwrap();
    let (code, _, msg) = api_err(
        scs.patch(
            "sc",
            &PatchParams::default(),
            &Patch::Merge(json!({"parameters": {"a": "2"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        msg.contains("parameters: Forbidden: updates to parameters are forbidden."),
        "{msg}"
    );
    srv.shutdown().await;
}

/// A PKCS#10 request for `CN=name`, as `openssl req` would write it.
fn csr_pem(name: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csr_approval_follows_the_subresource_rules() {
    use base64::Engine;
    let (srv, client) = start().await;
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    let request = base64::engine::general_purpose::STANDARD.encode(csr_pem("alice"));
    let (code, _, msg) = api_err(
        csrs.create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "bad"}, "spec": {"request": base64::engine::general_purpose::STANDARD.encode("hello"),
                "signerName": "kubernetes.io/kube-apiserver-client", "usages": []}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        msg.contains("spec.request: Invalid value") && msg.contains("PEM block type must be CERTIFICATE REQUEST"),
        "{msg}"
    );
    assert!(msg.contains("spec.usages: Required value"), "{msg}");

    let created = csrs
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "alice"}, "spec": {"request": request,
                "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"], "expirationSeconds": 3600}})),
        )
        .await
        .unwrap();
    assert!(created.status.as_ref().and_then(|s| s.conditions.as_ref()).is_none());
    // Approved is added through `approval` only.
    let approved =
        json!({"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "Test", "message": "ok"}]}});
    let (code, _, msg) = api_err(
        csrs.patch_status("alice", &PatchParams::default(), &Patch::Merge(approved.clone()))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        msg.contains("updates may not add a condition of type \"Approved\""),
        "{msg}"
    );
    let done = csrs
        .patch_approval("alice", &PatchParams::default(), &Patch::Merge(approved))
        .await
        .unwrap();
    let cond = &done.status.unwrap().conditions.unwrap()[0];
    assert_eq!((cond.type_.as_str(), cond.status.as_str()), ("Approved", "True"));
    assert!(cond.last_transition_time.is_some(), "the server stamps the transition");
    let (code, _, msg) = api_err(
        csrs.patch_approval(
            "alice",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        msg.contains("Approved and Denied conditions are mutually exclusive"),
        "{msg}"
    );
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_honours_the_disruption_budget() {
    let (srv, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b"] {
        pods.create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": name, "labels": {"app": "web"}},
                "spec": {"nodeName": "win-1", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})),
        )
        .await
        .unwrap();
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    pdbs.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})),
    )
    .await
    .unwrap();
    // kube-rs retries every 429 up to 15 times with a growing backoff (minutes in all); this
    // test wants to see the refusals themselves.
    let mut cfg = srv.kube_config();
    cfg.default_retry = false;
    let pods: Api<Pod> = Api::namespaced(Client::try_from(cfg).unwrap(), "default");
    // Not yet observed by a disruption controller: 429 saying the budget is being processed.
    let (code, reason, msg) = api_err(pods.evict("a", &EvictParams::default()).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (429, "TooManyRequests"));
    assert!(
        msg.ends_with("The disruption budget web is still being processed by the server."),
        "{msg}"
    );
    // What the disruption controller would write for two ready pods.
    pdbs.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 2,
            "desiredHealthy": 1, "expectedPods": 2}}),
        ),
    )
    .await
    .unwrap();
    pods.evict("a", &EvictParams::default())
        .await
        .expect("one disruption is allowed");
    let a = pods.get("a").await.unwrap();
    assert!(
        a.metadata.deletion_timestamp.is_some(),
        "the evicted pod is being deleted"
    );
    let target = a
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("DisruptionTarget condition");
    assert_eq!(
        (target.status.as_str(), target.reason.as_deref()),
        ("True", Some("EvictionByEvictionAPI"))
    );
    let budget = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!(budget.disruptions_allowed, 0);
    assert!(budget.disrupted_pods.unwrap().contains_key("a"));
    let cond = &budget.conditions.unwrap()[0];
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "InsufficientPods")
    );

    let (code, _, msg) = api_err(pods.evict("b", &EvictParams::default()).await.unwrap_err());
    assert_eq!(code, 429);
    assert_eq!(msg, "Cannot evict pod as it would violate the pod's disruption budget.");
    assert!(pods.get("b").await.unwrap().metadata.deletion_timestamp.is_none());
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_requests_and_status_bodies_read_like_upstream() {
    let (srv, client) = start().await;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    sas.create(&PostParams::default(), &obj(json!({"metadata": {"name": "bot"}})))
        .await
        .unwrap();
    let req = http::Request::post("/api/v1/namespaces/default/serviceaccounts/bot/token")
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}))
                .unwrap(),
        )
        .unwrap();
    let tr: Value = client.request(req).await.unwrap();
    assert_eq!(
        tr["spec"]["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    assert_eq!(tr["spec"]["expirationSeconds"], 3600);
    assert!(tr["metadata"]["creationTimestamp"].is_string(), "{tr}");
    assert!(tr["status"]["token"].as_str().is_some_and(|t| !t.is_empty()));
    let short = http::Request::post("/api/v1/namespaces/default/serviceaccounts/bot/token")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({"spec": {"expirationSeconds": 60}})).unwrap())
        .unwrap();
    let (code, _, msg) = api_err(client.request::<Value>(short).await.unwrap_err());
    assert_eq!(code, 422);
    assert!(msg.contains("may not specify a duration less than 10 minutes"), "{msg}");

    // The raw body of an error keeps the Status field order of Go's struct.
    let raw = client
        .send(
            http::Request::get("/api/v1/namespaces/default/configmaps/missing")
                .body(Vec::new())
                .unwrap()
                .map(Into::into),
        )
        .await
        .unwrap();
    assert_eq!(raw.status(), 404);
    let bytes = http_body_util::BodyExt::collect(raw.into_body())
        .await
        .unwrap()
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.starts_with(r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"missing\" not found","reason":"NotFound","details":{"name":"missing","kind":"configmaps"},"code":404}"#),
        "{text}"
    );
    srv.shutdown().await;
}

/// `writes-lost`: the named verb on the named resource answers success and changes nothing,
/// while the other verbs and resources keep working.
#[tokio::test]
async fn lost_writes_are_acknowledged_and_change_nothing() {
    use k8s_openapi::api::core::v1::{ConfigMap, Event};
    use kube::api::DeleteParams;
    let (srv, client) = start().await;
    let faults = &srv.state().cfg.faults;
    faults.set("writes-lost", "events/patch", true);
    faults.set("writes-lost", "events/deletecollection", true);
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let ev: Event = obj(json!({"metadata": {"name": "e", "labels": {"set": "a"}},
        "involvedObject": {"namespace": "default"}, "message": "before"}));
    events.create(&PostParams::default(), &ev).await.expect("create");
    let patch = json!({"message": "after"});
    let answered = events
        .patch("e", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch answered");
    assert_eq!(answered.message.as_deref(), Some("before"));
    assert_eq!(events.get("e").await.unwrap().message.as_deref(), Some("before"));
    let sel = ListParams::default().labels("set=a");
    events
        .delete_collection(&DeleteParams::default(), &sel)
        .await
        .expect("deletecollection answered");
    assert_eq!(
        events.list(&sel).await.unwrap().items.len(),
        1,
        "the lost deletecollection removed the event"
    );
    // Update still works, and so does a patch of another resource.
    let mut ev = events.get("e").await.unwrap();
    ev.message = Some("updated".into());
    let updated = events.replace("e", &PostParams::default(), &ev).await.unwrap();
    assert_eq!(updated.message.as_deref(), Some("updated"));
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "c"}, "data": {"k": "v"}})),
    )
    .await
    .unwrap();
    let patched = cms
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(&json!({"data": {"k": "w"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["k"], "w");
}
