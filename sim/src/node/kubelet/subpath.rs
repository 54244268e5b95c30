//! `subPathExpr`: the kubelet expands `$(VAR)` references in a volume mount's `subPathExpr`
//! from the container's environment, then checks the result as it checks every subPath, before
//! the container is created (upstream `kubecontainer.ExpandContainerVolumeMounts` and
//! `makeMounts` in kubelet_pods.go). A failure there fails the container's configuration, so
//! the pod waits with reason `CreateContainerConfigError`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Container;

use crate::faults::Faults;
use crate::node::runtime::expand_refs;
use crossconf_model::os::Os;

/// The container with each mount's `subPathExpr` replaced by the `subPath` it expands to;
/// `Err` is the kubelet's message. The `subpath-expr-ignored` fault drops `subPathExpr`
/// instead, so the whole volume is mounted (an old kubelet without the VolumeSubpathEnvExpansion
/// feature).
pub(super) fn expand_sub_paths(
    c: &Container,
    env: &BTreeMap<String, String>,
    os: Os,
    faults: &Faults,
) -> Result<Container, String> {
    let mut out = c.clone();
    for m in out.volume_mounts.iter_mut().flatten() {
        let Some(expr) = m.sub_path_expr.take().filter(|e| !e.is_empty()) else {
            continue;
        };
        if faults.is_on("subpath-expr-ignored") {
            continue;
        }
        let missing = missing_refs(&expr, env);
        if !missing.is_empty() {
            return Err(format!("missing value for {}", missing.join(", ")));
        }
        let sub = expand_refs(&expr, env);
        check_sub_path(&sub, os)?;
        m.sub_path = Some(sub);
    }
    Ok(out)
}

/// The `$(NAME)` references of `expr` whose variable is unset or empty, sorted (upstream
/// collects them in a set and reports them all).
fn missing_refs(expr: &str, env: &BTreeMap<String, String>) -> Vec<String> {
    let mut missing = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find('$') {
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            if env.get(name).is_none_or(String::is_empty) && !missing.iter().any(|m| m == name) {
                missing.push(name.to_string());
            }
            rest = &inner[end + 1..];
        } else {
            rest = after;
        }
    }
    missing.sort();
    missing
}

/// Upstream's checks of an expanded subPath: not absolute (on the node's OS), no `..` element.
fn check_sub_path(sub: &str, os: Os) -> Result<(), String> {
    let absolute = match os {
        Os::Linux => sub.starts_with('/'),
        Os::Windows => {
            let b = sub.as_bytes();
            sub.starts_with('\\')
                || sub.starts_with('/')
                || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':')
        }
    };
    if absolute {
        return Err(format!("error SubPath `{sub}` must not be an absolute path"));
    }
    if sub.split(['/', '\\']).any(|part| part == "..") {
        return Err(format!("unable to provision SubPath `{sub}`: must not contain '..'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::VolumeMount;

    use super::*;

    fn container(expr: &str) -> Container {
        Container {
            name: "c".into(),
            volume_mounts: Some(vec![VolumeMount {
                name: "v".into(),
                mount_path: "/m".into(),
                sub_path_expr: Some(expr.into()),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn sub_path(c: &Container) -> Option<String> {
        c.volume_mounts.as_ref().unwrap()[0].sub_path.clone()
    }

    #[test]
    fn references_expand_into_the_sub_path() {
        let faults = Faults::default();
        let c = expand_sub_paths(
            &container("$(A)/$(B)"),
            &env(&[("A", "x"), ("B", "y")]),
            Os::Linux,
            &faults,
        )
        .unwrap();
        assert_eq!(sub_path(&c).as_deref(), Some("x/y"));
    }

    #[test]
    fn absolute_backstepping_and_missing_values_are_refused() {
        let faults = Faults::default();
        let abs = expand_sub_paths(&container("$(P)"), &env(&[("P", "/tmp")]), Os::Linux, &faults).unwrap_err();
        assert_eq!(abs, "error SubPath `/tmp` must not be an absolute path");
        let win = expand_sub_paths(&container("$(P)"), &env(&[("P", "C:\\Users")]), Os::Windows, &faults).unwrap_err();
        assert!(win.contains("must not be an absolute path"), "{win}");
        let back = expand_sub_paths(&container("$(P)"), &env(&[("P", "..")]), Os::Linux, &faults).unwrap_err();
        assert!(back.contains("must not contain '..'"), "{back}");
        let missing = expand_sub_paths(&container("$(B)/$(A)"), &env(&[("A", "")]), Os::Linux, &faults).unwrap_err();
        assert_eq!(missing, "missing value for A, B");
    }

    #[test]
    fn the_fault_mounts_the_whole_volume() {
        let faults = Faults::default();
        faults.set("subpath-expr-ignored", "", true);
        let c = expand_sub_paths(&container("$(P)"), &env(&[("P", "..")]), Os::Linux, &faults).unwrap();
        assert_eq!(sub_path(&c), None);
    }
}
