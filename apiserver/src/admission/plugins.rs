//! Admission plugins by name, for `--disable-admission-plugins`: which of the plugins k1s
//! runs a user may turn off, and which names are upstream's.
//!
//! kube-apiserver refuses a name it has no plugin for; k1s does the same, and accepts the
//! names of upstream plugins it does not implement (disabling those changes nothing, as
//! disabling a plugin that is off by default changes nothing upstream).

use std::collections::BTreeSet;
use std::fmt;

/// A plugin of k1s's admission chain that can be disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Plugin {
    NamespaceLifecycle,
    LimitRanger,
    ServiceAccount,
    NodeRestriction,
    CertificateApproval,
    Priority,
    DefaultTolerationSeconds,
    DefaultStorageClass,
    PersistentVolumeClaimResize,
    StorageObjectInUseProtection,
    MutatingAdmissionWebhook,
    PodSecurity,
    ValidatingAdmissionWebhook,
    ResourceQuota,
}

impl Plugin {
    /// Every plugin k1s runs, in the chain's order.
    pub const ALL: [Plugin; 14] = [
        Plugin::NamespaceLifecycle,
        Plugin::LimitRanger,
        Plugin::ServiceAccount,
        Plugin::NodeRestriction,
        Plugin::CertificateApproval,
        Plugin::Priority,
        Plugin::DefaultTolerationSeconds,
        Plugin::DefaultStorageClass,
        Plugin::PersistentVolumeClaimResize,
        Plugin::StorageObjectInUseProtection,
        Plugin::MutatingAdmissionWebhook,
        Plugin::PodSecurity,
        Plugin::ValidatingAdmissionWebhook,
        Plugin::ResourceQuota,
    ];

    /// The plugin's name, as kube-apiserver's flags spell it.
    pub fn name(self) -> &'static str {
        match self {
            Plugin::NamespaceLifecycle => "NamespaceLifecycle",
            Plugin::LimitRanger => "LimitRanger",
            Plugin::ServiceAccount => "ServiceAccount",
            Plugin::NodeRestriction => "NodeRestriction",
            Plugin::CertificateApproval => "CertificateApproval",
            Plugin::Priority => "Priority",
            Plugin::DefaultTolerationSeconds => "DefaultTolerationSeconds",
            Plugin::DefaultStorageClass => "DefaultStorageClass",
            Plugin::PersistentVolumeClaimResize => "PersistentVolumeClaimResize",
            Plugin::StorageObjectInUseProtection => "StorageObjectInUseProtection",
            Plugin::MutatingAdmissionWebhook => "MutatingAdmissionWebhook",
            Plugin::PodSecurity => "PodSecurity",
            Plugin::ValidatingAdmissionWebhook => "ValidatingAdmissionWebhook",
            Plugin::ResourceQuota => "ResourceQuota",
        }
    }
}

impl fmt::Display for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Upstream plugins k1s does not run (on by default there or not): valid names that disable
/// nothing here.
const NOT_IN_K1S: &[&str] = &[
    "AlwaysAdmit",
    "AlwaysDeny",
    "AlwaysPullImages",
    "CertificateSigning",
    "CertificateSubjectRestriction",
    "ClusterTrustBundleAttest",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "ImagePolicyWebhook",
    "LimitPodHardAntiAffinityTopology",
    "MutatingAdmissionPolicy",
    "NamespaceAutoProvision",
    "NamespaceExists",
    "OwnerReferencesPermissionEnforcement",
    "PodNodeSelector",
    "PodTolerationRestriction",
    "PodTopologyLabels",
    "RuntimeClass",
    "TaintNodesByCondition",
    "ValidatingAdmissionPolicy",
];

/// A `--disable-admission-plugins` name that is no admission plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "disable-admission-plugins plugin \"{name}\" is unknown (k1s runs {})",
    plugin_names()
)]
pub struct UnknownPlugin {
    pub name: String,
}

fn plugin_names() -> String {
    Plugin::ALL.map(Plugin::name).join(", ")
}

/// The plugins `names` (as `--disable-admission-plugins` lists them) turn off. An unknown
/// name is an error naming it; names of upstream plugins k1s does not run turn off nothing.
pub fn parse_disabled<S: AsRef<str>>(names: &[S]) -> Result<BTreeSet<Plugin>, UnknownPlugin> {
    let mut out = BTreeSet::new();
    for name in names.iter().map(|n| n.as_ref().trim()) {
        if name.is_empty() {
            continue;
        }
        if let Some(p) = Plugin::ALL.into_iter().find(|p| p.name() == name) {
            out.insert(p);
        } else if NOT_IN_K1S.contains(&name) {
            tracing::info!(
                plugin = name,
                "k1s does not run this admission plugin: disabling it changes nothing"
            );
        } else {
            return Err(UnknownPlugin {
                name: name.to_owned(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_to_plugins_and_unknown_names_are_errors() {
        let got =
            parse_disabled(&["ServiceAccount", " Priority", "TaintNodesByCondition", ""]).unwrap();
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            [Plugin::ServiceAccount, Plugin::Priority]
        );
        for p in Plugin::ALL {
            assert_eq!(parse_disabled(&[p.name()]).unwrap().len(), 1, "{p}");
        }
        let e = parse_disabled(&["ServiceAcount"]).unwrap_err();
        assert_eq!(
            e,
            UnknownPlugin {
                name: "ServiceAcount".into()
            }
        );
        assert_eq!(
            e.to_string(),
            format!(
                "disable-admission-plugins plugin \"ServiceAcount\" is unknown (k1s runs {})",
                Plugin::ALL.map(Plugin::name).join(", ")
            )
        );
        assert!(e.to_string().contains("NamespaceLifecycle"), "{e}");
    }
}
