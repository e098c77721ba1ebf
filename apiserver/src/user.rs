//! The user a request comes from (upstream's `user.Info`) and the well-known users and
//! groups: what authentication establishes and everything after it (authorization,
//! admission, the strategies that record a requestor) reads.

use std::collections::BTreeMap;

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of anonymous requests.
pub const ANONYMOUS: &str = "system:anonymous";
/// The group whose members may do anything (bound to cluster-admin).
pub const MASTERS: &str = "system:masters";
/// The group of kubelet identities.
pub const NODES: &str = "system:nodes";
/// The prefix of kubelet user names.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The group of the cluster-network identities agents get beside their kubelet's (the
/// NetworkPolicy enforcement reads every pod, which a kubelet identity may not).
pub const NETWORKS: &str = "system:k1s:networks";
/// The prefix of cluster-network user names (`system:k1s:network:NODE`).
pub const NETWORK_USER_PREFIX: &str = "system:k1s:network:";
/// The prefix of ServiceAccount user names.
pub const SA_USER_PREFIX: &str = "system:serviceaccount:";

/// Who a request comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    /// Extra attributes (e.g. the pod a ServiceAccount token is bound to).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// An authenticated user in `groups` (plus `system:authenticated`).
    pub fn new(name: impl Into<String>, groups: impl IntoIterator<Item = String>) -> Self {
        let mut groups: Vec<String> = groups.into_iter().collect();
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_owned());
        }
        Self {
            name: name.into(),
            groups,
            ..Default::default()
        }
    }

    /// The anonymous user.
    pub fn anonymous() -> Self {
        Self {
            name: ANONYMOUS.into(),
            groups: vec![UNAUTHENTICATED.into()],
            ..Default::default()
        }
    }

    /// The identity of the server's own components (in-process clients).
    pub fn loopback() -> Self {
        Self::new("system:apiserver", [MASTERS.to_owned()])
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// The node name of a kubelet identity (`system:node:NAME` in `system:nodes`).
    pub fn node_name(&self) -> Option<&str> {
        self.name
            .strip_prefix(NODE_USER_PREFIX)
            .filter(|n| !n.is_empty() && self.in_group(NODES))
    }

    /// The namespace and name of a ServiceAccount identity.
    pub fn service_account(&self) -> Option<(&str, &str)> {
        self.name.strip_prefix(SA_USER_PREFIX)?.split_once(':')
    }

    /// `userInfo` as the review APIs and SelfSubjectReview write it.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = self.uid.clone().into();
        }
        if !self.extra.is_empty() {
            v["extra"] = serde_json::json!(self.extra);
        }
        v
    }
}
