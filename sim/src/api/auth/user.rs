//! The authenticated identity of a request.
//!
//! The main structure is [`UserInfo`]. The authentication filter runs the rest of the request
//! inside [`CURRENT`], so handlers deep in the stack (the review resources, which answer about
//! the caller) read the caller without every function taking it as a parameter.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// Upstream's `system:authenticated` group, which every authenticated user is in.
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// Upstream's `system:masters` group: authorised for everything, RBAC or not.
pub const MASTERS: &str = "system:masters";
/// The group kubeadm (>= 1.29) puts its admin kubeconfig user in, bound to `cluster-admin`.
pub const KUBEADM_CLUSTER_ADMINS: &str = "kubeadm:cluster-admins";
/// The admin kubeconfig user of a kubeadm/kind cluster.
pub const ADMIN_USER: &str = "kubernetes-admin";
/// Upstream's `user.Anonymous`: the user of a request that carries no credentials.
pub const ANONYMOUS: &str = "system:anonymous";
/// Upstream's `user.AllUnauthenticated`: the one group of the anonymous user.
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// Prefix of ServiceAccount user names (`system:serviceaccount:NS:NAME`).
pub const SA_PREFIX: &str = "system:serviceaccount:";

/// An authenticated user: name, uid, groups and extra, as upstream's `user.Info`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// `system:serviceaccount:ns:sa`, `kubernetes-admin`, ...
    pub name: String,
    /// The ServiceAccount's uid for ServiceAccount users, empty otherwise.
    pub uid: String,
    /// Group names, `system:authenticated` included.
    pub groups: Vec<String>,
    /// Extra attributes (for ServiceAccount tokens: the credential id and bound pod).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The admin kubeconfig user, as kubeadm >= 1.29 issues it.
    pub fn admin() -> Self {
        Self {
            name: ADMIN_USER.into(),
            groups: vec![KUBEADM_CLUSTER_ADMINS.into(), ALL_AUTHENTICATED.into()],
            ..Self::default()
        }
    }

    /// The user upstream's anonymous authenticator gives a request without credentials (kind's
    /// kube-apiserver runs with `--anonymous-auth=true`, the default): RBAC then decides, and
    /// the bootstrap `system:public-info-viewer` binding lets it read only health and version.
    pub fn anonymous() -> Self {
        Self {
            name: ANONYMOUS.into(),
            groups: vec![ALL_UNAUTHENTICATED.into()],
            ..Self::default()
        }
    }

    /// A ServiceAccount user with upstream's groups.
    pub fn service_account(ns: &str, name: &str, uid: &str) -> Self {
        Self {
            name: sa_user_name(ns, name),
            uid: uid.into(),
            groups: sa_groups(ns, true),
            extra: BTreeMap::new(),
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// `(namespace, name)` when the user is a ServiceAccount.
    pub fn service_account_of(&self) -> Option<(&str, &str)> {
        split_sa_user(&self.name)
    }

    /// The `userInfo` of SelfSubjectReview and TokenReview status (empty fields omitted, as
    /// upstream's `omitempty` does).
    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.name});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        if !self.groups.is_empty() {
            v["groups"] = json!(self.groups);
        }
        if !self.extra.is_empty() {
            v["extra"] = json!(self.extra);
        }
        v
    }
}

/// `system:serviceaccount:NS:NAME`.
pub fn sa_user_name(ns: &str, name: &str) -> String {
    format!("{SA_PREFIX}{ns}:{name}")
}

/// Upstream's `serviceaccount.MakeGroupNames`, plus `system:authenticated` when `authenticated`.
pub fn sa_groups(ns: &str, authenticated: bool) -> Vec<String> {
    let mut g = vec![
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{ns}"),
    ];
    if authenticated {
        g.push(ALL_AUTHENTICATED.into());
    }
    g
}

/// `(namespace, name)` of a `system:serviceaccount:NS:NAME` user name.
pub fn split_sa_user(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SA_PREFIX)?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

tokio::task_local! {
    /// The caller of the request being served (set by the authentication filter).
    pub static CURRENT: UserInfo;
}

/// The caller of the request being served, if called inside the authentication filter.
pub fn current() -> Option<UserInfo> {
    CURRENT.try_with(Clone::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_names_split_and_group() {
        assert_eq!(split_sa_user("system:serviceaccount:ns:sa"), Some(("ns", "sa")));
        assert_eq!(split_sa_user("system:serviceaccount:ns"), None);
        assert_eq!(split_sa_user("bob"), None);
        let u = UserInfo::service_account("ns", "sa", "u1");
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert_eq!(u.to_json()["uid"], "u1");
        assert!(UserInfo::admin().in_group(KUBEADM_CLUSTER_ADMINS));
    }
}
