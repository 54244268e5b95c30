//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`) and the custom resources they serve.
//!
//! The CRD object itself is an ordinary row of [`super::registry::RESOURCES`]; what makes it
//! special happens around its writes, the way upstream's apiextensions-apiserver controllers
//! do it in-process: after each write [`reconcile`] plays the naming controller (accepted names,
//! `NamesAccepted`), the establishing controller (`Established`) and the handler that starts
//! serving the custom kinds; [`finalize`] plays the finalizing controller that empties a
//! deleted CRD's resources before the CRD goes.
//!
//! Served custom kinds are [`ResourceDef`]s like the built-in ones, so every verb, watch,
//! selector and server-side apply path serves them unchanged. A def carries its CRD's facts
//! in [`Custom`] (schema, printer columns, scale paths), which the hooks in decoding
//! (`prune`), defaulting (`defaults`), validation (`schema`), Table printing and OpenAPI
//! (`serve`) read.
//!
//! Modules: `controllers` runs naming, establishing and finalizing; `conversion` converts
//! objects between versions (`None` and `Webhook`); `validate` checks a CRD; `cel` evaluates `x-kubernetes-validations` rules; `schema` validates a custom object against its
//! structural schema; `prune` drops unknown fields; `defaults` applies schema defaults;
//! `serve` builds discovery rows, OpenAPI documents, Tables and scale paths.

use std::collections::HashMap;
use std::sync::RwLock;

use serde_json::{Value, json};

use super::meta;
use super::registry::ResourceDef;
use super::state::AppState;

pub mod cel;
mod controllers;
pub mod conversion;
pub mod defaults;
pub mod prune;
pub mod schema;
pub mod serve;
pub mod validate;

pub use controllers::{after_write, finalize, mark_for_deletion, reconcile, refuse_create_while_terminating};

/// The group of CustomResourceDefinitions.
pub const GROUP: &str = "apiextensions.k8s.io";
/// The storage key of CustomResourceDefinitions.
pub const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";
/// The finalizer upstream's CRD delete adds so the finalizing controller can empty the CRD.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
/// Verbs of a custom resource, in the order upstream's discovery controller lists them.
const CR_VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

/// One additional printer column of a served version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Header.
    pub name: String,
    /// OpenAPI type (`string`, `integer`, `number`, `boolean`, `date`).
    pub ty: String,
    /// OpenAPI format.
    pub format: String,
    /// Column description.
    pub description: String,
    /// 0 for the default view, more for `-o wide`.
    pub priority: i64,
    /// Simple JSONPath into the object (`.spec.replicas`).
    pub json_path: String,
}

/// The scale subresource's paths (`.spec.replicas` style).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// Where the desired replica count lives.
    pub spec_replicas: String,
    /// Where the observed replica count lives.
    pub status_replicas: String,
    /// Where the serialized label selector lives, if any.
    pub label_selector: Option<String>,
}

/// What a CRD says of one served version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Custom {
    /// The CRD's name (`widgets.example.com`).
    pub crd_name: String,
    /// The version's `openAPIV3Schema`.
    pub schema: Value,
    /// `additionalPrinterColumns`.
    pub columns: Vec<PrinterColumn>,
    /// The scale subresource, when enabled.
    pub scale: Option<ScalePaths>,
    /// `ListKind` from the accepted names.
    pub list_kind: String,
    /// Whether objects read from storage get the schema's defaults, as upstream's storage
    /// decoder applies them (off under the `crd-storage-defaulting-off` fault).
    pub default_on_read: bool,
}

/// The custom kinds one server serves, by CRD.
///
/// Defs are leaked to `&'static` because the whole API layer (routes, watches, tables) holds
/// `&'static ResourceDef`, as it does for the built-in table. Identical specs are interned, so
/// only a CRD write that changes what is served costs a few hundred bytes for the process's
/// lifetime, which a simulated cluster's handful of CRDs never makes noticeable.
#[derive(Default)]
pub struct Table {
    served: RwLock<Vec<(String, Vec<&'static ResourceDef>)>>,
    interned: RwLock<HashMap<String, &'static ResourceDef>>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("crd::Table").finish_non_exhaustive()
    }
}

impl Table {
    /// The served custom defs, in CRD creation order.
    pub fn custom(&self) -> Vec<&'static ResourceDef> {
        self.served
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .flat_map(|(_, d)| d.iter().copied())
            .collect()
    }

    /// Built-in defs followed by custom ones: what discovery and routing see.
    pub fn all(&self) -> Vec<&'static ResourceDef> {
        let mut v = super::registry::builtin();
        v.extend(self.custom());
        v
    }

    fn set(&self, crd: &str, defs: Vec<&'static ResourceDef>) {
        let mut served = self.served.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        match served.iter_mut().find(|(n, _)| n == crd) {
            Some(entry) if defs.is_empty() => {
                let name = entry.0.clone();
                served.retain(|(n, _)| *n != name);
            }
            Some(entry) => entry.1 = defs,
            None if defs.is_empty() => {}
            None => served.push((crd.to_string(), defs)),
        }
    }

    fn intern(&self, def: ResourceDef, custom: Custom) -> &'static ResourceDef {
        let key = format!("{def:?}{custom:?}");
        let mut interned = self.interned.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(d) = interned.get(&key) {
            return d;
        }
        let custom: &'static Custom = Box::leak(Box::new(custom));
        let leaked: &'static ResourceDef = Box::leak(Box::new(ResourceDef {
            custom: Some(custom),
            ..def
        }));
        interned.insert(key, leaked);
        leaked
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn leak_all(v: &[String]) -> &'static [&'static str] {
    Box::leak(v.iter().map(|s| leak(s)).collect::<Vec<_>>().into_boxed_slice())
}

fn strs(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default()
}

fn text(v: &Value, p: &str) -> String {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// A `.spec.replicas` JSONPath as a JSON pointer.
pub fn pointer(json_path: &str) -> String {
    json_path
        .trim_start_matches('.')
        .split('.')
        .fold(String::new(), |mut acc, seg| {
            acc.push('/');
            acc.push_str(seg);
            acc
        })
}

/// Upstream's defaulting of a v1 CRD (`SetDefaults_CustomResourceDefinitionSpec`): singular
/// and list kind from the kind, `None` conversion.
pub fn default_crd(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if names
            .get("singular")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
        {
            names.insert("singular".into(), json!(kind.to_lowercase()));
        }
        if names
            .get("listKind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
            && !kind.is_empty()
        {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    spec.entry("conversion").or_insert_with(|| json!({"strategy": "None"}));
}

/// The status a new CRD is stored with (upstream's `PrepareForCreate`): no conditions, no
/// accepted names, the storage version as the only stored version.
pub fn initial_status(obj: &Value) -> Value {
    let stored: Vec<String> = versions(obj)
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .map(|v| text(v, "/name"))
        .collect();
    json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": stored})
}

/// On an update, upstream keeps the stored versions and appends a new storage version.
pub fn carry_status(old: &Value, new: &mut Value) {
    let mut status = old.get("status").cloned().unwrap_or_else(|| initial_status(old));
    let mut stored = strs(status.get("storedVersions"));
    for v in versions(new) {
        let name = text(v, "/name");
        if v.get("storage").and_then(Value::as_bool) == Some(true) && !stored.contains(&name) {
            stored.push(name);
        }
    }
    status["storedVersions"] = json!(stored);
    new["status"] = status;
}

fn versions(crd: &Value) -> &[Value] {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The `openAPIV3Schema` a version is served with (`crd-preserve-unknown-ignored`: without
/// its `x-kubernetes-preserve-unknown-fields`).
fn served_schema(st: &AppState, version: &Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("x-kubernetes-preserve-unknown-fields");
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut schema = version.pointer("/schema/openAPIV3Schema").cloned().unwrap_or(json!({}));
    if st.cfg.faults.is_on("crd-preserve-unknown-ignored") {
        strip(&mut schema);
    }
    schema
}

/// Builds the defs a CRD serves from its accepted names, one per served version.
fn defs_of(st: &AppState, crd: &Value) -> Vec<&'static ResourceDef> {
    let names = crd.pointer("/status/acceptedNames").cloned().unwrap_or_default();
    let group = leak(&text(crd, "/spec/group"));
    let plural = text(&names, "/plural");
    if plural.is_empty() {
        return Vec::new();
    }
    let namespaced = text(crd, "/spec/scope") == "Namespaced";
    let mut out = Vec::new();
    for v in versions(crd) {
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let mut subs = Vec::new();
        if v.pointer("/subresources/status").is_some() {
            subs.push("status".to_string());
        }
        let scale = v.pointer("/subresources/scale").map(|s| ScalePaths {
            spec_replicas: text(s, "/specReplicasPath"),
            status_replicas: text(s, "/statusReplicasPath"),
            label_selector: s.get("labelSelectorPath").and_then(Value::as_str).map(String::from),
        });
        if scale.is_some() {
            subs.push("scale".to_string());
        }
        let columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: text(c, "/name"),
                        ty: text(c, "/type"),
                        format: text(c, "/format"),
                        description: text(c, "/description"),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        json_path: text(c, "/jsonPath"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let def = ResourceDef {
            group,
            version: leak(&text(v, "/name")),
            kind: leak(&text(&names, "/kind")),
            plural: leak(&plural),
            singular: leak(&text(&names, "/singular")),
            short_names: leak_all(&strs(names.get("shortNames"))),
            categories: leak_all(&strs(names.get("categories"))),
            namespaced,
            verbs: CR_VERBS,
            subresources: leak_all(&subs),
            storage_of: None,
            custom: None,
        };
        let custom = Custom {
            crd_name: meta::name(crd).to_string(),
            schema: served_schema(st, v),
            columns,
            scale,
            list_kind: text(&names, "/listKind"),
            default_on_read: !st.cfg.faults.is_on("crd-storage-defaulting-off"),
        };
        out.push(st.crds.intern(def, custom));
    }
    out
}
