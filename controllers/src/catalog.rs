//! [`ResourceCatalog`]: which resources exist, supplied by the caller.
//!
//! The [`k1s_api::client::Client`] has no discovery, so the namespace controller and the
//! garbage collector ask the catalog what to list, watch and delete; the server implements it
//! from its registry (custom resources included). The catalog may change while controllers run;
//! they read it again when they need it.

use k1s_api::client::ResourceRef;

/// One served resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CatalogEntry {
    /// "" for the core group.
    pub group: String,
    pub version: String,
    /// The plural resource name, e.g. `pods`.
    pub resource: String,
    pub kind: String,
    pub namespaced: bool,
}

impl CatalogEntry {
    pub fn new(group: &str, version: &str, resource: &str, kind: &str, namespaced: bool) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            kind: kind.into(),
            namespaced,
        }
    }

    /// `apiVersion` as objects carry it.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The resource in `namespace` (`None`: cluster-scoped, or all namespaces).
    pub fn at(&self, namespace: Option<&str>) -> ResourceRef {
        ResourceRef::new(&self.group, &self.version, &self.resource, namespace)
    }
}

/// The resources controllers may list, watch and delete.
pub trait ResourceCatalog: Send + Sync {
    /// Every resource that supports list, watch and delete — built-in and custom — once each:
    /// a resource served under two groups (core `events` and `events.k8s.io` `events`) or two
    /// versions must appear under one of them only, else it is handled twice.
    fn resources(&self) -> Vec<CatalogEntry>;

    /// The namespaced ones, as resources across all namespaces.
    fn namespaced(&self) -> Vec<ResourceRef> {
        self.resources()
            .into_iter()
            .filter(|e| e.namespaced)
            .map(|e| e.at(None))
            .collect()
    }

    /// The entry of an owner reference's `apiVersion` and `kind` (any version of its group).
    fn find_kind(&self, api_version: &str, kind: &str) -> Option<CatalogEntry> {
        let group = k1s_runtime::key::group_of(api_version);
        let all = self.resources();
        let exact = all
            .iter()
            .find(|e| e.kind == kind && e.api_version() == api_version)
            .cloned();
        exact.or_else(|| all.into_iter().find(|e| e.kind == kind && e.group == group))
    }
}

/// A fixed catalog.
#[derive(Debug, Clone, Default)]
pub struct StaticCatalog(pub Vec<CatalogEntry>);

impl ResourceCatalog for StaticCatalog {
    fn resources(&self) -> Vec<CatalogEntry> {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_kinds_by_group_and_filters_namespaced() {
        let c = StaticCatalog(vec![
            CatalogEntry::new("apps", "v1", "deployments", "Deployment", true),
            CatalogEntry::new("", "v1", "nodes", "Node", false),
        ]);
        assert_eq!(
            c.namespaced(),
            vec![ResourceRef::new("apps", "v1", "deployments", None)]
        );
        assert_eq!(
            c.find_kind("apps/v1beta2", "Deployment").unwrap().resource,
            "deployments"
        );
        assert!(c.find_kind("v1", "Deployment").is_none());
        assert_eq!(c.find_kind("v1", "Node").unwrap().api_version(), "v1");
    }
}
