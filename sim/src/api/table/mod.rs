//! Server-side printing: `meta.k8s.io/v1` Tables with upstream's columns.
//!
//! kubectl asks for a Table (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) and prints
//! what it gets, so these columns are what a person sees in `kubectl get`. Columns with
//! priority 1 appear with `-o wide`. The main function is [`render`].
//!
//! Split by concept: `columns` holds each kind's list of columns (header and cell function
//! together), `cells` upstream's printers for the cells that need more than a field read. This
//! file keeps the Table request and response, the column type and the small field readers
//! both use.

use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::meta;
use super::registry::ResourceDef;
use columns::columns;

mod cells;
mod cluster;
mod columns;

pub use cells::pod_status;

/// What the client asked of a Table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOpts {
    /// `includeObject`: `None`, `Metadata` (default) or `Object`.
    pub include: String,
}

/// Whether the Accept header asks for a Table; `include` comes from the `includeObject`
/// query parameter.
pub fn wants(headers: &HeaderMap, include: Option<&str>) -> Option<TableOpts> {
    let accept = headers.get("accept").and_then(|v| v.to_str().ok())?;
    let table = accept.split(',').any(|range| {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
    });
    table.then(|| TableOpts {
        include: include.unwrap_or("Metadata").to_string(),
    })
}

/// Whether `Accept` asks for a Table and nothing else a resource without a Table form could be
/// served as (no plain `application/json`, `application/yaml`, protobuf or wildcard range).
/// Upstream's negotiation then fails with 406 NotAcceptable for such a resource (the review
/// kinds: their objects carry no metadata to print).
pub fn only_table(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get("accept").and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let mut table = false;
    for range in accept.split(',') {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        if params.contains(&"as=Table") {
            table = true;
        } else if !params[0].is_empty() {
            return false;
        }
    }
    table
}

/// One column of a kind's Table: the definition kubectl prints as a header and the function that
/// fills the column's cell in every row. Keeping the two in one value is what keeps a kind's
/// headers and cells in step, and lets the columns kinds share (NAME, AGE, the workload
/// CONTAINERS/IMAGES/SELECTOR...) be written once; each kind's Table is then a list of these.
#[derive(Clone, Copy)]
struct Column {
    name: &'static str,
    /// The OpenAPI type kubectl is told (`string`, `integer`, `boolean`).
    ty: &'static str,
    /// 0, or 1 for the columns only `-o wide` shows.
    priority: u8,
    cell: fn(&Value) -> Value,
}

/// A row's cells. events.k8s.io Events print as core Events, so they are read in their
/// storage (core) form.
fn cells(def: &ResourceDef, o: &Value) -> Vec<Value> {
    let converted;
    let o = if (def.group, def.plural) == ("events.k8s.io", "events") {
        converted = super::convert::to_storage(def, o.clone());
        &converted
    } else {
        o
    };
    columns(def).iter().map(|c| (c.cell)(o)).collect()
}

fn s(v: &Value, p: &str) -> String {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn i(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn or_none(x: String) -> String {
    if x.is_empty() { "<none>".into() } else { x }
}

fn age(obj: &Value) -> String {
    since(&s(obj, "/metadata/creationTimestamp"))
}

fn since(ts: &str) -> String {
    meta::age_secs(ts).map_or_else(|| "<unknown>".into(), meta::human_duration)
}

/// The array at `p`, empty when absent.
fn list<'a>(v: &'a Value, p: &str) -> &'a [Value] {
    v.pointer(p).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// How many entries the map at `key` has.
fn entries(o: &Value, key: &str) -> usize {
    o.get(key).and_then(Value::as_object).map_or(0, |m| m.len())
}

/// The string map at `p` as `k=v,k=v` (selectors and node selectors), empty when absent.
fn key_values(v: &Value, p: &str) -> String {
    v.pointer(p)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, x)| format!("{k}={}", x.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// The comma-joined `field` (`/name` or `/image`) of the containers at `spec`.
fn container_list(obj: &Value, spec: &str, field: &str) -> String {
    let values: Vec<String> = list(obj, spec).iter().map(|c| s(c, field)).collect();
    values.join(",")
}

/// A Table of `items`; `list_meta` is the list's metadata (None for one object or a watch event).
pub fn render(def: &ResourceDef, items: &[Value], opts: &TableOpts, list_meta: Option<Value>) -> Value {
    if let Some(custom) = def.custom {
        return super::crd::serve::table(custom, items, &opts.include, list_meta);
    }
    let cols: Vec<Value> = columns(def)
        .iter()
        .map(|c| {
            let format = if c.name == "Name" { "name" } else { "" };
            json!({"name": c.name, "type": c.ty, "format": format, "description": description(c.name), "priority": c.priority})
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(def, o)});
            match opts.include.as_str() {
                "Object" => row["object"] = o.clone(),
                "None" => {}
                _ => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": o.get("metadata").cloned().unwrap_or_default()})
                }
            }
            row
        })
        .collect();
    let metadata = list_meta.unwrap_or_else(
        || json!({"resourceVersion": items.first().map(|o| s(o, "/metadata/resourceVersion")).unwrap_or_default()}),
    );
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": cols, "rows": rows})
}

fn description(col: &str) -> &'static str {
    match col {
        "Name" => {
            "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
        }
        "Age" => {
            "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC."
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_selects_table() {
        let mut h = HeaderMap::new();
        h.insert(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
                .parse()
                .unwrap(),
        );
        assert_eq!(wants(&h, None).unwrap().include, "Metadata");
        h.insert("accept", "application/json".parse().unwrap());
        assert!(wants(&h, None).is_none());
    }
}
