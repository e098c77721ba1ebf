//! Printers of the `rbac.authorization.k8s.io` group. Roles and cluster
//! roles have no dedicated printer upstream (they use the default one).

use jiff::Timestamp;
use serde_json::Value;

use super::format::{age, arr_at, name, str_at};
use super::{Column, Printer};

/// Role bindings and cluster role bindings (`cluster` selects the
/// descriptions).
pub(crate) struct RoleBindings {
    cluster: bool,
}

pub(crate) const ROLE_BINDINGS: RoleBindings = RoleBindings { cluster: false };
pub(crate) const CLUSTER_ROLE_BINDINGS: RoleBindings = RoleBindings { cluster: true };

impl Printer for RoleBindings {
    fn columns(&self) -> Vec<Column> {
        let what = if self.cluster {
            "clusterRoleBinding"
        } else {
            "roleBinding"
        };
        vec![
            Column::name(),
            Column::s(
                "Role",
                "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.",
            ),
            Column::age(),
            Column::s("Users", &format!("Users in the {what}")).wide(),
            Column::s("Groups", &format!("Groups in the {what}")).wide(),
            Column::s("ServiceAccounts", &format!("ServiceAccounts in the {what}")).wide(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let mut users = Vec::new();
        let mut groups = Vec::new();
        let mut sas = Vec::new();
        for s in arr_at(obj, "/subjects") {
            let n = str_at(s, "/name");
            match str_at(s, "/kind") {
                "ServiceAccount" => sas.push(format!("{}/{n}", str_at(s, "/namespace"))),
                "User" => users.push(n.to_owned()),
                "Group" => groups.push(n.to_owned()),
                _ => {}
            }
        }
        vec![
            name(obj).into(),
            format!(
                "{}/{}",
                str_at(obj, "/roleRef/kind"),
                str_at(obj, "/roleRef/name")
            )
            .into(),
            age(obj, now),
            users.join(", ").into(),
            groups.join(", ").into(),
            sas.join(", ").into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::testutil::*;
    use serde_json::json;

    #[test]
    fn role_bindings() {
        assert_eq!(
            names(&ROLE_BINDINGS),
            ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
        );
        assert_eq!(
            CLUSTER_ROLE_BINDINGS.columns()[3].description,
            "Users in the clusterRoleBinding"
        );
        let rb = json!({
            "metadata": {"name": "admins", "creationTimestamp": ago(5)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [
                {"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
                {"kind": "Group", "name": "system:masters"},
                {"kind": "ServiceAccount", "namespace": "kube-system", "name": "ctrl"}
            ]
        });
        assert_eq!(
            row(&CLUSTER_ROLE_BINDINGS, &rb),
            [
                "admins",
                "ClusterRole/admin",
                "5s",
                "alice, bob",
                "system:masters",
                "kube-system/ctrl"
            ]
        );
        let empty = json!({"metadata": {"name": "e"}, "roleRef": {"kind": "Role", "name": "r"}});
        assert_eq!(
            row(&ROLE_BINDINGS, &empty)[1..],
            ["Role/r", "<unknown>", "", "", ""]
        );
    }
}
