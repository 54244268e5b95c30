//! The simulated API server against a real kube-rs client: CRUD, Status errors, auth, watch
//! resumption and 410, selectors, patches, deletion semantics and namespace lifecycle.

#![expect(
    clippy::disallowed_methods,
    reason = "the test paces a real server or process with short sleeps"
)]

use std::time::Duration;

use crossconf_sim::addr::AddressBlock;
use crossconf_sim::api::{ApiConfig, ApiServer};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Error as KubeError};
use serde_json::json;

/// A block unlikely to clash with parallel test binaries: derived from the pid; the port is
/// chosen by the OS, so even a clash cannot fail a bind.
fn block(offset: u8) -> AddressBlock {
    let base = (std::process::id() % 100) as u8;
    AddressBlock(100 + (base + offset * 7) % 120)
}

async fn start(offset: u8) -> (ApiServer, Client) {
    crossconf_sim::install_crypto_provider();
    let srv = ApiServer::start(ApiConfig::new(block(offset)).port(0))
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

fn pod(name: &str, labels: serde_json::Value, node: Option<&str>) -> Pod {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    serde_json::from_value(p).unwrap()
}

async fn wait_until<F: Fn() -> bool>(what: &str, f: F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn crud_and_status_errors() {
    let (srv, client) = start(1).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "a"}, "data": {"k": "v"}})).unwrap();
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.resource_version.is_some() && meta.creation_timestamp.is_some());
    // Upstream records the create as an Update by the manager its user agent names (none
    // here: kube-rs sends no User-Agent, so the entry has no manager).
    let mf = meta.managed_fields.as_ref().expect("managedFields recorded");
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].operation.as_deref(), Some("Update"));
    assert_eq!(mf[0].manager, None, "{mf:?}");

    let (code, reason, msg) = api_err(cms.create(&PostParams::default(), &cm).await.unwrap_err());
    assert_eq!(
        (code, reason.as_str(), msg.as_str()),
        (409, "AlreadyExists", "configmaps \"a\" already exists")
    );
    let (code, reason, _) = api_err(cms.get("missing").await.unwrap_err());
    assert_eq!((code, reason.as_str()), (404, "NotFound"));

    // A stale resourceVersion is a conflict.
    let mut fresh = created.clone();
    fresh.data = Some([("k".to_string(), "v2".to_string())].into());
    let updated = cms.replace("a", &PostParams::default(), &fresh).await.unwrap();
    assert_ne!(updated.metadata.resource_version, created.metadata.resource_version);
    let (code, reason, msg) = api_err(cms.replace("a", &PostParams::default(), &fresh).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(msg.contains("the object has been modified"), "{msg}");

    // An unchanged write does not bump the resourceVersion.
    let again = cms.replace("a", &PostParams::default(), &updated).await.unwrap();
    assert_eq!(again.metadata.resource_version, updated.metadata.resource_version);

    // 422 with causes.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let bad: Pod =
        serde_json::from_value(json!({"metadata": {"name": "Bad"}, "spec": {"containers": [{"name": "c"}]}})).unwrap();
    let (code, reason, msg) = api_err(pods.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert!(
        msg.starts_with("Pod \"Bad\" is invalid: [metadata.name: Invalid value: \"Bad\""),
        "{msg}"
    );
    assert!(msg.contains("spec.containers[0].image: Required value"), "{msg}");

    // generateName and dryRun.
    let generated: ConfigMap = serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).unwrap();
    let g = cms.create(&PostParams::default(), &generated).await.unwrap();
    assert!(g.metadata.name.as_deref().unwrap().starts_with("gen-"));
    assert_eq!(g.metadata.name.as_deref().unwrap().len(), 9);
    let dry: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "dry"}})).unwrap();
    cms.create(
        &PostParams {
            dry_run: true,
            ..Default::default()
        },
        &dry,
    )
    .await
    .unwrap();
    assert!(cms.get_opt("dry").await.unwrap().is_none());

    // Creating in a missing namespace.
    let (code, _, msg) = api_err(
        Api::<ConfigMap>::namespaced(client.clone(), "nope")
            .create(&PostParams::default(), &cm)
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 404);
    assert_eq!(msg, "namespaces \"nope\" not found");

    // Pagination.
    for i in 0..7 {
        let c: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("page-{i}"), "labels": {"page": "yes"}}}))
                .unwrap();
        cms.create(&PostParams::default(), &c).await.unwrap();
    }
    let mut names = Vec::new();
    let mut lp = ListParams::default().labels("page=yes").limit(3);
    loop {
        let page = cms.list(&lp).await.unwrap();
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(names, (0..7).map(|i| format!("page-{i}")).collect::<Vec<_>>());
    srv.shutdown().await;
}

/// As kind's kube-apiserver (anonymous auth on): no credentials is `system:anonymous`, which
/// RBAC lets read `/version` and nothing else; a token the server does not know is 401.
#[tokio::test]
async fn anonymous_requests_meet_rbac_and_wrong_tokens_get_401() {
    let (srv, _) = start(2).await;
    let client_with = |auth: serde_json::Value| {
        let mut cfg = srv.kube_config();
        cfg.auth_info = serde_json::from_value(auth).unwrap();
        Client::try_from(cfg).unwrap()
    };
    let anonymous = client_with(json!({}));
    let (code, reason, message) = api_err(
        Api::<Pod>::default_namespaced(anonymous.clone())
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        message,
        r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default""#
    );
    assert!(anonymous.apiserver_version().await.is_ok());

    let wrong = client_with(json!({"token": "wrong"}));
    let (code, reason, message) = api_err(
        Api::<Pod>::default_namespaced(wrong.clone())
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, reason.as_str(), message.as_str()),
        (401, "Unauthorized", "Unauthorized")
    );
    let (code, _, _) = api_err(wrong.apiserver_version().await.unwrap_err());
    assert_eq!(code, 401);
    srv.shutdown().await;
}

#[tokio::test]
async fn reflector_stays_consistent_across_watch_cut_and_410() {
    let (srv, client) = start(3).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (reader, writer) = reflector::store::<Pod>();
    let stream = reflector(writer, watcher(pods.clone(), watcher::Config::default())).applied_objects();
    let task = tokio::spawn(async move {
        let mut s = std::pin::pin!(stream);
        while s.try_next().await.is_ok_and(|x| x.is_some()) {}
    });
    let names = |r: &reflector::Store<Pod>| {
        let mut v: Vec<String> = r.state().iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        v.sort();
        v
    };
    for i in 0..3 {
        pods.create(&PostParams::default(), &pod(&format!("p{i}"), json!({}), None))
            .await
            .unwrap();
    }
    wait_until("3 pods in the reflector", || names(&reader).len() == 3).await;

    // A server-side cut: the watcher resumes from its resourceVersion.
    srv.state().cut_watches();
    pods.create(&PostParams::default(), &pod("p3", json!({}), None))
        .await
        .unwrap();
    pods.delete("p0", &DeleteParams::default()).await.unwrap();
    wait_until("p3 added and p0 removed after the cut", || {
        names(&reader) == ["p1", "p2", "p3"]
    })
    .await;

    // History compacted, then a cut: resuming gets 410 and the watcher re-lists.
    srv.state().compact();
    srv.state().cut_watches();
    pods.create(&PostParams::default(), &pod("p4", json!({}), None))
        .await
        .unwrap();
    pods.delete("p1", &DeleteParams::default()).await.unwrap();
    wait_until("re-listed state after 410", || names(&reader) == ["p2", "p3", "p4"]).await;

    // A raw watch from a compacted version gets an ERROR event with a 410 Expired Status.
    srv.state().compact();
    let mut w = pods.watch(&WatchParams::default(), "1").await.unwrap().boxed();
    match w.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected a 410 error event, got {other:?}"),
    }
    task.abort();
    srv.shutdown().await;
}

#[tokio::test]
async fn selectors_in_lists_and_watches() {
    let (srv, client) = start(4).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &pod("a", json!({"app": "web", "tier": "fe"}), Some("n1")),
    )
    .await
    .unwrap();
    pods.create(&PostParams::default(), &pod("b", json!({"app": "db"}), Some("n2")))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("c", json!({"app": "web"}), None))
        .await
        .unwrap();
    let names = |l: kube::core::ObjectList<Pod>| {
        l.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(pods.list(&ListParams::default().labels("app=web")).await.unwrap()),
        ["a", "c"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().labels("app in (db),!tier"))
                .await
                .unwrap()
        ),
        ["b"]
    );
    assert_eq!(
        names(pods.list(&ListParams::default().labels("app!=web")).await.unwrap()),
        ["b"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName=n1"))
                .await
                .unwrap()
        ),
        ["a"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName=,status.phase=Pending"))
                .await
                .unwrap()
        ),
        ["c"]
    );
    let (code, _, msg) = api_err(
        pods.list(&ListParams::default().fields("spec.bogus=x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 400);
    assert!(msg.contains("field label not supported: spec.bogus"), "{msg}");

    // An object leaving the selection is DELETED for that watch.
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut w = pods
        .watch(&WatchParams::default().labels("app=web"), &rv)
        .await
        .unwrap()
        .boxed();
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await
    .unwrap();
    pods.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
    )
    .await
    .unwrap();
    match w.try_next().await.unwrap() {
        Some(WatchEvent::Deleted(p)) => assert_eq!(p.metadata.name.as_deref(), Some("a")),
        other => panic!("expected a DELETED for a, got {other:?}"),
    }
    match w.try_next().await.unwrap() {
        Some(WatchEvent::Added(p)) => assert_eq!(p.metadata.name.as_deref(), Some("b")),
        other => panic!("expected an ADDED for b, got {other:?}"),
    }
    srv.shutdown().await;
}

#[tokio::test]
async fn patch_types_and_workload_defaults() {
    let (srv, client) = start(5).await;
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
            {"name": "a", "image": "nginx:1.25", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "busybox"}]}}}}))
    .unwrap();
    let d = deps.create(&PostParams::default(), &d).await.unwrap();
    let spec = d.spec.clone().unwrap();
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.revision_history_limit, Some(10));
    assert_eq!(spec.strategy.unwrap().type_.as_deref(), Some("RollingUpdate"));
    assert_eq!(d.metadata.generation, Some(1));
    let c = &spec.template.spec.unwrap().containers;
    assert_eq!(c[1].image_pull_policy.as_deref(), Some("Always"));

    let smp = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "nginx:1.26", "env": [{"name": "Y", "value": "2"}]}]}}}});
    let d = deps
        .patch("web", &PatchParams::default(), &Patch::Strategic(smp))
        .await
        .unwrap();
    let c = d
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers
        .clone();
    assert_eq!(c.len(), 2, "strategic merge keeps container b");
    assert_eq!(c[0].image.as_deref(), Some("nginx:1.26"));
    assert_eq!(c[0].env.as_ref().unwrap().len(), 2);
    assert_eq!(d.metadata.generation, Some(2));

    let d = deps
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(3));
    // kube re-exports its own json-patch version; build the patch through serde.
    let jp = serde_json::from_value(json!([{"op": "replace", "path": "/spec/replicas", "value": 4}])).unwrap();
    let d = deps
        .patch("web", &PatchParams::default(), &Patch::Json::<()>(jp))
        .await
        .unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(4));
    // Scale subresource.
    let s = deps.get_scale("web").await.unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(4));
    deps.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .unwrap();
    assert_eq!(deps.get("web").await.unwrap().spec.unwrap().replicas, Some(2));
    // Status writes change only status; main writes never change status.
    deps.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 7}, "spec": {"replicas": 9}})),
    )
    .await
    .unwrap();
    let d = deps.get("web").await.unwrap();
    assert_eq!(
        (d.spec.unwrap().replicas, d.status.unwrap().replicas),
        (Some(2), Some(7))
    );

    // Selector not matching the template is a 422.
    let bad: Deployment = serde_json::from_value(json!({"metadata": {"name": "bad"}, "spec": {
        "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "y"}}, "spec": {"containers": [{"name": "a", "image": "i"}]}}}}))
    .unwrap();
    let (code, _, msg) = api_err(deps.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(code, 422);
    assert!(msg.contains("`selector` does not match template `labels`"), "{msg}");

    // Services: allocation and a taken NodePort.
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    let s: Service = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort",
        "selector": {"app": "web"}, "ports": [{"port": 80, "nodePort": 30080}]}}))
    .unwrap();
    let s = svcs.create(&PostParams::default(), &s).await.unwrap();
    let ip: std::net::Ipv4Addr = s.spec.as_ref().unwrap().cluster_ip.as_deref().unwrap().parse().unwrap();
    assert!(srv.state().cfg.block.is_service_ip(ip));
    let s2: Service = serde_json::from_value(json!({"metadata": {"name": "web2"}, "spec": {"type": "NodePort",
        "ports": [{"port": 80, "nodePort": 30080}]}}))
    .unwrap();
    let (code, _, msg) = api_err(svcs.create(&PostParams::default(), &s2).await.unwrap_err());
    assert_eq!(code, 422);
    assert!(
        msg.contains("spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"),
        "{msg}"
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn graceful_pod_deletion_and_finalizers() {
    let (srv, client) = start(6).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("bound", json!({}), Some("n1")))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("unbound", json!({}), None))
        .await
        .unwrap();

    let r = pods.delete("unbound", &DeleteParams::default()).await.unwrap();
    assert!(r.is_left(), "pods return the deleted object");
    assert!(
        pods.get_opt("unbound").await.unwrap().is_none(),
        "unbound pods vanish at once"
    );

    pods.delete("bound", &DeleteParams::default()).await.unwrap();
    let p = pods.get("bound").await.unwrap();
    assert!(p.metadata.deletion_timestamp.is_some());
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(30));
    // The kubelet's final delete.
    pods.delete(
        "bound",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(pods.get_opt("bound").await.unwrap().is_none());

    // Finalizers hold an object until they are removed.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    cms.delete("held", &DeleteParams::foreground()).await.unwrap();
    let held = cms.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(
        held.metadata.finalizers.unwrap(),
        ["example.com/hold", "foregroundDeletion"]
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(cms.get_opt("held").await.unwrap().is_none());
    srv.shutdown().await;
}

/// A kubelet's final delete (grace 0, UID precondition) racing its own status writes must
/// succeed: upstream's store retries a delete whose object changed under it and never
/// answers "the object has been modified" to a DELETE without a resourceVersion precondition.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn final_delete_racing_status_writes_succeeds() {
    let (srv, client) = start(11).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let n = 100;
    for i in 0..n {
        let name = format!("race-{i}");
        pods.create(&PostParams::default(), &pod(&name, json!({}), Some("n1")))
            .await
            .unwrap();
        pods.delete(&name, &DeleteParams::default()).await.unwrap();
    }
    let mut tasks = Vec::new();
    for i in 0..n {
        let pods = pods.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("race-{i}");
            let uid = pods.get(&name).await.unwrap().metadata.uid.unwrap();
            let writer = {
                let (pods, name) = (pods.clone(), name.clone());
                tokio::spawn(async move {
                    for k in 0..200 {
                        let status = json!({"status": {"message": format!("write {k}")}});
                        if pods
                            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                })
            };
            tokio::time::sleep(Duration::from_millis(5 + i % 20)).await;
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(kube::api::Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..Default::default()
            };
            let out = pods
                .delete(&name, &dp)
                .await
                .map(|_| ())
                .map_err(|e| format!("{name}: {e}"));
            writer.abort();
            out
        }));
    }
    let mut failures = Vec::new();
    for t in tasks {
        if let Err(e) = t.await.unwrap() {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "final deletes failed: {failures:?}");
    let left = pods.list(&ListParams::default()).await.unwrap().items.len();
    assert_eq!(left, 0, "pods left after their final delete");
    srv.shutdown().await;
}

#[tokio::test]
async fn namespace_lifecycle() {
    let (srv, client) = start(7).await;
    let nss: Api<Namespace> = Api::all(client.clone());
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert_eq!(names, ["default", "kube-node-lease", "kube-public", "kube-system"]);
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "work"}})).unwrap();
    let ns = nss.create(&PostParams::default(), &ns).await.unwrap();
    assert_eq!(ns.spec.unwrap().finalizers.unwrap(), ["kubernetes"]);
    assert_eq!(ns.metadata.labels.unwrap()["kubernetes.io/metadata.name"], "work");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "work");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();

    nss.delete("work", &DeleteParams::background()).await.unwrap();
    let ns = nss.get("work").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let cm2: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "d"}})).unwrap();
    let (code, reason, msg) = api_err(cms.create(&PostParams::default(), &cm2).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (403, "Forbidden"));
    assert!(msg.contains("because it is being terminated"), "{msg}");

    // What the namespace controller does: empty it, then finalize.
    cms.delete("c", &DeleteParams::default()).await.unwrap();
    let mut ns = nss.get("work").await.unwrap();
    ns.spec.as_mut().unwrap().finalizers = Some(vec![]);
    let body = serde_json::to_vec(&ns).unwrap();
    let req = http::Request::put("/api/v1/namespaces/work/finalize")
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let _: Namespace = client.request(req).await.unwrap();
    assert!(nss.get_opt("work").await.unwrap().is_none());
    srv.shutdown().await;
}

#[tokio::test]
async fn discovery_and_server_side_printing() {
    let (srv, client) = start(8).await;
    let v = client.apiserver_version().await.unwrap();
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "33"));
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    for (g, k) in [
        ("apps", "Deployment"),
        ("batch", "CronJob"),
        ("", "Pod"),
        ("discovery.k8s.io", "EndpointSlice"),
    ] {
        assert!(
            discovery
                .groups()
                .any(|grp| grp.name() == g && grp.recommended_resources().iter().any(|(r, _)| r.kind == k)),
            "{g}/{k} discovered"
        );
    }
    let req = http::Request::get("/api/v1/namespaces?limit=500")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(vec![])
        .unwrap();
    let t: serde_json::Value = client.request(req).await.unwrap();
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["columnDefinitions"][1]["name"], "Status");
    assert_eq!(t["rows"][0]["cells"][1], "Active");
    srv.shutdown().await;
}

#[tokio::test]
async fn address_in_use_is_distinguishable() {
    crossconf_sim::install_crypto_provider();
    let first = ApiServer::start(ApiConfig::new(block(9)).port(0)).await.unwrap();
    let taken = first.addr().port();
    let err = ApiServer::start(ApiConfig::new(block(9)).port(taken))
        .await
        .unwrap_err();
    assert!(matches!(err, crossconf_sim::api::Error::AddressInUse { .. }), "{err:?}");
    first.shutdown().await;
}

#[tokio::test]
async fn watch_bookmarks_and_timeout() {
    crossconf_sim::install_crypto_provider();
    let cfg = ApiConfig::new(block(10))
        .port(0)
        .bookmark_interval(Duration::from_millis(100));
    let srv = ApiServer::start(cfg).await.unwrap();
    let client = Client::try_from(srv.kube_config()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let started = tokio::time::Instant::now();
    // kube asks for bookmarks by default.
    let wp = WatchParams::default().timeout(1);
    let mut w = pods.watch(&wp, "0").await.unwrap().boxed();
    pods.create(&PostParams::default(), &pod("late", json!({}), None))
        .await
        .unwrap();
    let (mut added, mut bookmarks) = (0, 0);
    while let Some(ev) = w.try_next().await.unwrap() {
        match ev {
            WatchEvent::Added(_) => added += 1,
            WatchEvent::Bookmark(b) => {
                assert!(!b.metadata.resource_version.is_empty());
                bookmarks += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let took = started.elapsed();
    assert_eq!(added, 1);
    assert!(bookmarks >= 2, "{bookmarks} bookmarks");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "timeoutSeconds=1 ended after {took:?}"
    );
    srv.shutdown().await;
}

/// Upstream's `ValidateConfigMapUpdate`/`ValidateSecretUpdate`: an immutable object's payload
/// and its `immutable` flag are frozen; metadata may still change.
#[tokio::test]
async fn immutable_config_maps_and_secrets_refuse_payload_changes() {
    use k8s_openapi::api::core::v1::Secret;
    let (srv, client) = start(11).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "frozen"}, "data": {"k": "v"}, "immutable": true})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let pp = PatchParams::default();
    let (code, reason, msg) = api_err(
        cms.patch("frozen", &pp, &Patch::Merge(json!({"data": {"k": "v2"}})))
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(
        msg,
        "ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    let (code, _, msg) = api_err(
        cms.patch("frozen", &pp, &Patch::Merge(json!({"immutable": false})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        msg.contains("immutable: Forbidden: field is immutable when `immutable` is set"),
        "{msg}"
    );
    let (code, _, msg) = api_err(
        cms.patch("frozen", &pp, &Patch::Merge(json!({"binaryData": {"b": "AAE="}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(msg.contains("binaryData: Forbidden"), "{msg}");
    // Labels are not payload.
    cms.patch(
        "frozen",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .unwrap();
    // A mutable one may become immutable.
    let open: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "open"}, "data": {"k": "v"}})).unwrap();
    cms.create(&PostParams::default(), &open).await.unwrap();
    cms.patch(
        "open",
        &pp,
        &Patch::Merge(json!({"data": {"k": "v2"}, "immutable": true})),
    )
    .await
    .unwrap();

    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let s: Secret =
        serde_json::from_value(json!({"metadata": {"name": "frozen"}, "data": {"k": "dg=="}, "immutable": true}))
            .unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
    let (code, _, msg) = api_err(
        secrets
            .patch("frozen", &pp, &Patch::Merge(json!({"stringData": {"k": "other"}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        msg.contains("data: Forbidden: field is immutable when `immutable` is set"),
        "{msg}"
    );
    let (code, _, msg) = api_err(
        secrets
            .patch("frozen", &pp, &Patch::Merge(json!({"type": "kubernetes.io/tls"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        msg.contains("type: Invalid value: \"kubernetes.io/tls\": field is immutable"),
        "{msg}"
    );
    srv.shutdown().await;
}
