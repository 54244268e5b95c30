//! The ServiceAccount admission plugin (upstream plugin/pkg/admission/serviceaccount) for pod
//! creation: the `default` ServiceAccount when none is named, the ServiceAccount's image pull
//! secrets when the pod has none, and the `kube-api-access-XXXXX` projected volume (a bound
//! token, the cluster CA and the namespace) mounted read-only at
//! `/var/run/secrets/kubernetes.io/serviceaccount` in every container, unless automounting is
//! turned off on the pod or its ServiceAccount.
//!
//! One deliberate difference: upstream refuses a pod whose ServiceAccount does not exist yet
//! (403, "retry after the service account is created"). The simulator admits it, because its
//! API server also runs alone in tests, with no serviceaccount controller to create `default`;
//! the kubelet then retries the token on its periodic volume sync.

use serde_json::{Value, json};

use crate::api::state::AppState;

/// Where the token volume is mounted (upstream's `DefaultAPITokenMountPath`).
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The token volume's name prefix.
pub const VOLUME_PREFIX: &str = "kube-api-access-";
/// The bound token's lifetime the plugin asks for (upstream's 3607 s, one hour plus the
/// seven seconds that mark it as a legacy-compatible token).
pub const TOKEN_EXPIRATION: i64 = 3607;

/// Applies the plugin to a pod being created.
pub fn service_account(st: &AppState, pod: &mut Value) {
    if pod
        .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_some()
    {
        return;
    }
    let ns = crate::api::meta::namespace(pod).to_string();
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let name = match spec.get("serviceAccountName").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => {
            spec.insert("serviceAccountName".into(), json!("default"));
            "default".to_string()
        }
    };
    let account = st.store.get("/serviceaccounts", &ns, &name);
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| {
            account
                .as_ref()
                .and_then(|a| a.get("automountServiceAccountToken"))
                .and_then(Value::as_bool)
        })
        .unwrap_or(true);
    if automount {
        mount_token(spec);
    }
    let has_pull_secrets = spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !has_pull_secrets
        && let Some(secrets) = account
            .as_ref()
            .and_then(|a| a.get("imagePullSecrets"))
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
    {
        spec.insert("imagePullSecrets".into(), Value::Array(secrets.clone()));
    }
}

/// Five characters of upstream's `utilrand.String` alphabet.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn mount_token(spec: &mut serde_json::Map<String, Value>) {
    let existing = spec.get("volumes").and_then(Value::as_array).and_then(|vs| {
        vs.iter()
            .filter_map(|v| v.get("name").and_then(Value::as_str))
            .find(|n| n.starts_with(VOLUME_PREFIX))
            .map(String::from)
    });
    let volume = existing
        .clone()
        .unwrap_or_else(|| format!("{VOLUME_PREFIX}{}", random_suffix()));
    let mount = json!({"name": volume, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    let mut needed = false;
    for key in ["initContainers", "containers"] {
        for c in spec.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten() {
            let mounted = c.get("volumeMounts").and_then(Value::as_array).is_some_and(|ms| {
                ms.iter()
                    .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH))
            });
            if mounted {
                continue;
            }
            let Some(c) = c.as_object_mut() else { continue };
            match c.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                Some(ms) => ms.push(mount.clone()),
                None => {
                    c.insert("volumeMounts".into(), json!([mount.clone()]));
                }
            }
            needed = true;
        }
    }
    if existing.is_none() && needed {
        let v = json!({"name": volume, "projected": {"sources": [
            {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ], "defaultMode": 420}});
        match spec.get_mut("volumes").and_then(Value::as_array_mut) {
            Some(vs) => vs.push(v),
            None => {
                spec.insert("volumes".into(), json!([v]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::admission::testutil::state;

    fn pod(extra: Value) -> Value {
        let mut p = json!({"metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x",
                "volumeMounts": [{"name": "mine", "mountPath": TOKEN_MOUNT_PATH}]}]}});
        if let (Some(s), Value::Object(e)) = (p["spec"].as_object_mut(), extra) {
            s.extend(e);
        }
        p
    }

    #[test]
    fn mounts_the_token_volume_where_nothing_is_mounted() {
        let st = state();
        let mut p = pod(json!({}));
        service_account(&st, &mut p);
        assert_eq!(p["spec"]["serviceAccountName"], "default");
        let vol = &p["spec"]["volumes"][0];
        let name = vol["name"].as_str().unwrap();
        assert!(
            name.starts_with(VOLUME_PREFIX) && name.len() == VOLUME_PREFIX.len() + 5,
            "{name}"
        );
        assert_eq!(
            vol["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3607
        );
        assert_eq!(p["spec"]["containers"][0]["volumeMounts"][0]["name"], name);
        assert_eq!(p["spec"]["containers"][1]["volumeMounts"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn automount_off_on_the_pod_or_account_mounts_nothing() {
        let st = state();
        let mut p = pod(json!({"automountServiceAccountToken": false}));
        service_account(&st, &mut p);
        assert!(p["spec"].get("volumes").is_none());
        st.store
            .create(
                "/serviceaccounts",
                "default",
                "quiet",
                json!({"metadata": {"name": "quiet", "namespace": "default"}, "automountServiceAccountToken": false,
                    "imagePullSecrets": [{"name": "reg"}]}),
            )
            .unwrap();
        let mut p = pod(json!({"serviceAccountName": "quiet"}));
        service_account(&st, &mut p);
        assert!(p["spec"].get("volumes").is_none());
        assert_eq!(p["spec"]["imagePullSecrets"], json!([{"name": "reg"}]));
    }
}
