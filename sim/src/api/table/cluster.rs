//! Columns of the networking, policy, storage, certificates, flowcontrol, admission webhook
//! configuration and pod-template kinds,
//! from upstream's `pkg/printers/internalversion/printers.go` (`AddHandlers` for the column
//! definitions, `print<Kind>` for the cells). [`columns`] picks a kind's list.

use serde_json::{Value, json};

use super::{Column, age, container_list, i, key_values, list, or_none, s};
use crate::api::meta;
use crate::api::objects::selector_string;
use crate::api::registry::ResourceDef;

const fn string(name: &'static str, cell: fn(&Value) -> Value) -> Column {
    Column {
        name,
        ty: "string",
        priority: 0,
        cell,
    }
}

const fn typed(name: &'static str, ty: &'static str, cell: fn(&Value) -> Value) -> Column {
    Column {
        name,
        ty,
        priority: 0,
        cell,
    }
}

const NAME: Column = string("Name", |o| json!(meta::name(o)));
const AGE: Column = string("Age", |o| json!(age(o)));

/// An optional scalar as text, `none` when absent.
fn text_or(v: &Value, p: &str, none: &str) -> String {
    match v.pointer(p) {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => none.to_string(),
    }
}

fn bool_at(v: &Value, p: &str) -> bool {
    v.pointer(p).and_then(Value::as_bool).unwrap_or(false)
}

/// `formatHosts`: up to three hosts, then `+ N more...`; `*` when no rule names one.
fn ingress_hosts(o: &Value) -> String {
    let hosts: Vec<String> = list(o, "/spec/rules")
        .iter()
        .map(|r| s(r, "/host"))
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.is_empty() {
        return "*".into();
    }
    let mut out = hosts.iter().take(3).cloned().collect::<Vec<_>>().join(",");
    if hosts.len() > 3 {
        out.push_str(&format!(" + {} more...", hosts.len() - 3));
    }
    out
}

/// `ingressLoadBalancerStatusStringer`: the load balancer's IPs or hostnames.
fn ingress_address(o: &Value) -> String {
    list(o, "/status/loadBalancer/ingress")
        .iter()
        .map(|x| {
            if x.get("ip").is_some() {
                s(x, "/ip")
            } else {
                s(x, "/hostname")
            }
        })
        .filter(|x| !x.is_empty())
        .collect::<Vec<_>>()
        .join(",")
}

const PODTEMPLATES: &[Column] = &[
    NAME,
    string("Containers", |o| {
        json!(container_list(o, "/template/spec/containers", "/name"))
    }),
    string("Images", |o| {
        json!(container_list(o, "/template/spec/containers", "/image"))
    }),
    string("Pod Labels", |o| {
        json!(or_none(key_values(o, "/template/metadata/labels")))
    }),
];
const COMPONENTSTATUSES: &[Column] = &[
    NAME,
    string("Status", |o| {
        let healthy = list(o, "/conditions")
            .iter()
            .any(|c| c["type"] == "Healthy" && c["status"] == "True");
        json!(if healthy { "Healthy" } else { "Unhealthy" })
    }),
    string("Message", |o| json!(condition_field(o, "/message"))),
    string("Error", |o| json!(condition_field(o, "/error"))),
];

fn condition_field(o: &Value, p: &str) -> String {
    list(o, "/conditions")
        .iter()
        .find(|c| c["type"] == "Healthy")
        .map(|c| s(c, p))
        .unwrap_or_default()
}

const NETWORKPOLICIES: &[Column] = &[
    NAME,
    string("Pod-Selector", |o| {
        json!(or_none(
            o.pointer("/spec/podSelector").map(selector_string).unwrap_or_default()
        ))
    }),
    AGE,
];
const INGRESSES: &[Column] = &[
    NAME,
    string("Class", |o| json!(or_none(s(o, "/spec/ingressClassName")))),
    string("Hosts", |o| json!(ingress_hosts(o))),
    string("Address", |o| json!(ingress_address(o))),
    string("Ports", |o| {
        json!(if list(o, "/spec/tls").is_empty() {
            "80"
        } else {
            "80, 443"
        })
    }),
    AGE,
];
const INGRESSCLASSES: &[Column] = &[
    NAME,
    string("Controller", |o| json!(s(o, "/spec/controller"))),
    string("Parameters", |o| {
        let p = o.pointer("/spec/parameters").filter(|p| p.is_object());
        json!(p.map_or("<none>".to_string(), |p| {
            let group = s(p, "/apiGroup");
            let kind_name = format!("{}/{}", s(p, "/kind"), s(p, "/name"));
            if group.is_empty() {
                kind_name
            } else {
                format!("{group}/{kind_name}")
            }
        }))
    }),
    AGE,
];
const PODDISRUPTIONBUDGETS: &[Column] = &[
    NAME,
    string("Min Available", |o| json!(text_or(o, "/spec/minAvailable", "N/A"))),
    string("Max Unavailable", |o| json!(text_or(o, "/spec/maxUnavailable", "N/A"))),
    typed("Allowed Disruptions", "integer", |o| {
        json!(i(o, "/status/disruptionsAllowed"))
    }),
    AGE,
];
const STORAGECLASSES: &[Column] = &[
    string("Name", |o| {
        // `IsDefaultAnnotation` reads the GA and the beta annotation.
        let default = [
            "storageclass.kubernetes.io/is-default-class",
            "storageclass.beta.kubernetes.io/is-default-class",
        ]
        .iter()
        .any(|a| {
            o.pointer("/metadata/annotations")
                .and_then(|m| m.get(*a))
                .and_then(Value::as_str)
                == Some("true")
        });
        json!(if default {
            format!("{} (default)", meta::name(o))
        } else {
            meta::name(o).to_string()
        })
    }),
    string("Provisioner", |o| json!(s(o, "/provisioner"))),
    string("ReclaimPolicy", |o| json!(text_or(o, "/reclaimPolicy", "Delete"))),
    string("VolumeBindingMode", |o| {
        json!(text_or(o, "/volumeBindingMode", "Immediate"))
    }),
    string("AllowVolumeExpansion", |o| json!(bool_at(o, "/allowVolumeExpansion"))),
    AGE,
];
const CSIDRIVERS: &[Column] = &[
    NAME,
    typed("AttachRequired", "boolean", |o| {
        json!(bool_at(o, "/spec/attachRequired"))
    }),
    typed("PodInfoOnMount", "boolean", |o| {
        json!(bool_at(o, "/spec/podInfoOnMount"))
    }),
    typed("StorageCapacity", "boolean", |o| {
        json!(bool_at(o, "/spec/storageCapacity"))
    }),
    string("TokenRequests", |o| {
        let audiences: Vec<String> = list(o, "/spec/tokenRequests")
            .iter()
            .map(|t| s(t, "/audience"))
            .collect();
        json!(if audiences.is_empty() {
            "<unset>".to_string()
        } else {
            audiences.join(",")
        })
    }),
    typed("RequiresRepublish", "boolean", |o| {
        json!(bool_at(o, "/spec/requiresRepublish"))
    }),
    string("Modes", |o| {
        let modes: Vec<&str> = list(o, "/spec/volumeLifecycleModes")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        json!(or_none(modes.join(",")))
    }),
    AGE,
];
const CSINODES: &[Column] = &[
    NAME,
    typed("Drivers", "integer", |o| json!(list(o, "/spec/drivers").len())),
    AGE,
];
const VOLUMEATTACHMENTS: &[Column] = &[
    NAME,
    string("Attacher", |o| json!(s(o, "/spec/attacher"))),
    string("PV", |o| json!(s(o, "/spec/source/persistentVolumeName"))),
    string("Node", |o| json!(s(o, "/spec/nodeName"))),
    typed("Attached", "boolean", |o| json!(bool_at(o, "/status/attached"))),
    AGE,
];
const CSISTORAGECAPACITIES: &[Column] = &[
    NAME,
    string("StorageClassName", |o| json!(s(o, "/storageClassName"))),
    string("Capacity", |o| json!(text_or(o, "/capacity", "<unset>"))),
];
const CERTIFICATESIGNINGREQUESTS: &[Column] = &[
    NAME,
    AGE,
    string("SignerName", |o| json!(or_none(s(o, "/spec/signerName")))),
    string("Requestor", |o| json!(s(o, "/spec/username"))),
    string("RequestedDuration", |o| {
        json!(
            o.pointer("/spec/expirationSeconds")
                .and_then(Value::as_i64)
                .map_or("<none>".to_string(), meta::human_duration)
        )
    }),
    string("Condition", |o| json!(csr_condition(o))),
];

/// `extractCSRStatus`: the condition types, `Issued` once a certificate is set, `Pending`
/// when there is neither.
fn csr_condition(o: &Value) -> String {
    let mut parts: Vec<String> = list(o, "/status/conditions")
        .iter()
        .filter(|c| c["status"] != "False")
        .map(|c| s(c, "/type"))
        .collect();
    if !s(o, "/status/certificate").is_empty() {
        parts.push("Issued".into());
    }
    if parts.is_empty() {
        "Pending".into()
    } else {
        parts.join(",")
    }
}

const FLOWSCHEMAS: &[Column] = &[
    NAME,
    string("PriorityLevel", |o| {
        json!(s(o, "/spec/priorityLevelConfiguration/name"))
    }),
    string("MatchingPrecedence", |o| {
        json!(i(o, "/spec/matchingPrecedence").to_string())
    }),
    string("DistinguisherMethod", |o| {
        json!(text_or(o, "/spec/distinguisherMethod/type", "<none>"))
    }),
    AGE,
    string("MissingPL", |o| {
        json!(
            list(o, "/status/conditions")
                .iter()
                .find(|c| c["type"] == "Dangling")
                .map_or("?".to_string(), |c| s(c, "/status"))
        )
    }),
];
const PRIORITYLEVELCONFIGURATIONS: &[Column] = &[
    NAME,
    string("Type", |o| json!(s(o, "/spec/type"))),
    string("NominalConcurrencyShares", |o| {
        json!(text_or(o, "/spec/limited/nominalConcurrencyShares", "<none>"))
    }),
    string("Queues", |o| {
        json!(text_or(o, "/spec/limited/limitResponse/queuing/queues", "<none>"))
    }),
    string("HandSize", |o| {
        json!(text_or(o, "/spec/limited/limitResponse/queuing/handSize", "<none>"))
    }),
    string("QueueLengthLimit", |o| {
        json!(text_or(
            o,
            "/spec/limited/limitResponse/queuing/queueLengthLimit",
            "<none>"
        ))
    }),
    AGE,
];

/// Both webhook configuration kinds (upstream's `webhookConfigurationColumnDefinitions`).
const WEBHOOKCONFIGURATIONS: &[Column] = &[
    NAME,
    typed("Webhooks", "integer", |o| {
        json!(o.get("webhooks").and_then(Value::as_array).map_or(0, Vec::len))
    }),
    AGE,
];

/// Upstream's printers.go: validations count, paramKind as `GROUP/VERSION, Kind=KIND`.
const VALIDATINGADMISSIONPOLICIES: &[Column] = &[
    NAME,
    typed("Validations", "integer", |o| {
        json!(
            o.pointer("/spec/validations")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        )
    }),
    string("ParamKind", |o| {
        json!(match o.pointer("/spec/paramKind").filter(|k| k.is_object()) {
            None => "<unset>".to_string(),
            Some(k) => format!(
                "{}, Kind={}",
                k.get("apiVersion").and_then(Value::as_str).unwrap_or_default(),
                k.get("kind").and_then(Value::as_str).unwrap_or_default()
            ),
        })
    }),
    AGE,
];

/// Upstream's printers.go: the policy and the paramRef (`namespace/name`, `*` for a selector).
const VALIDATINGADMISSIONPOLICYBINDINGS: &[Column] = &[
    NAME,
    string("PolicyName", |o| json!(text_or(o, "/spec/policyName", ""))),
    string("ParamRef", |o| {
        json!(match o.pointer("/spec/paramRef").filter(|p| p.is_object()) {
            None => "<unset>".to_string(),
            Some(p) => {
                let name = p.get("name").and_then(Value::as_str).unwrap_or("*");
                match p.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                    Some(ns) => format!("{ns}/{name}"),
                    None => name.to_string(),
                }
            }
        })
    }),
    AGE,
];

/// The columns of one of this module's kinds, `None` for other kinds.
pub(super) fn columns(def: &ResourceDef) -> Option<&'static [Column]> {
    Some(match (def.group, def.plural) {
        ("", "podtemplates") => PODTEMPLATES,
        ("", "componentstatuses") => COMPONENTSTATUSES,
        ("networking.k8s.io", "networkpolicies") => NETWORKPOLICIES,
        ("networking.k8s.io", "ingresses") => INGRESSES,
        ("networking.k8s.io", "ingressclasses") => INGRESSCLASSES,
        ("policy", "poddisruptionbudgets") => PODDISRUPTIONBUDGETS,
        ("storage.k8s.io", "storageclasses") => STORAGECLASSES,
        ("storage.k8s.io", "csidrivers") => CSIDRIVERS,
        ("storage.k8s.io", "csinodes") => CSINODES,
        ("storage.k8s.io", "volumeattachments") => VOLUMEATTACHMENTS,
        ("storage.k8s.io", "csistoragecapacities") => CSISTORAGECAPACITIES,
        ("certificates.k8s.io", "certificatesigningrequests") => CERTIFICATESIGNINGREQUESTS,
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => FLOWSCHEMAS,
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => PRIORITYLEVELCONFIGURATIONS,
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations" | "validatingwebhookconfigurations") => {
            WEBHOOKCONFIGURATIONS
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => VALIDATINGADMISSIONPOLICIES,
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => VALIDATINGADMISSIONPOLICYBINDINGS,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::api::registry::find;
    use crate::api::table::{TableOpts, render};

    fn row(group: &str, plural: &str, obj: serde_json::Value) -> (Vec<String>, serde_json::Value) {
        let def = crate::api::registry::RESOURCES
            .iter()
            .find(|d| d.group == group && d.plural == plural)
            .unwrap();
        let t = render(def, &[obj], &TableOpts { include: "None".into() }, None);
        let names = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect();
        (names, t["rows"][0]["cells"].clone())
    }

    #[test]
    fn pdb_and_ingress_rows_read_like_kubectl() {
        let (names, cells) = row(
            "policy",
            "poddisruptionbudgets",
            json!({"metadata": {"name": "p"}, "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 2}}),
        );
        assert_eq!(
            names,
            ["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"]
        );
        assert_eq!(cells[1], "50%");
        assert_eq!(cells[2], "N/A");
        assert_eq!(cells[3], 2);
        let (_, cells) = row(
            "networking.k8s.io",
            "ingresses",
            json!({"metadata": {"name": "i"}, "spec": {"rules": [{"host": "a"}, {"host": "b"}, {"host": "c"}, {"host": "d"}], "tls": [{}]}}),
        );
        assert_eq!(cells[1], "<none>");
        assert_eq!(cells[2], "a,b,c + 1 more...");
        assert_eq!(cells[4], "80, 443");
        let _ = find("", "v1", "pods");
    }

    #[test]
    fn csr_condition_and_default_storage_class() {
        let (_, cells) = row(
            "certificates.k8s.io",
            "certificatesigningrequests",
            json!({"metadata": {"name": "c"}, "spec": {"signerName": "example.com/x", "username": "u", "expirationSeconds": 3600},
                   "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "eA=="}}),
        );
        assert_eq!(cells[5], "Approved,Issued");
        assert_eq!(cells[4], "60m");
        let (_, cells) = row(
            "storage.k8s.io",
            "storageclasses",
            json!({"metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "p"}),
        );
        assert_eq!(cells[0], "standard (default)");
        assert_eq!(cells[2], "Delete");
    }
}
