//! Read access to cluster objects plugins need beyond nodes and pods: storage
//! ([`VolumeLister`]) and disruption budgets ([`ClusterLister`]). [`StaticLister`] is an
//! in-memory implementation of both that a caller fills from informer events (and tests fill
//! directly).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

/// PVCs, PVs, StorageClasses and CSINodes, as the volume plugins read them.
pub trait VolumeLister: Send + Sync {
    fn pvc(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>>;
    fn pv(&self, name: &str) -> Option<Arc<PersistentVolume>>;
    fn pvs(&self) -> Vec<Arc<PersistentVolume>>;
    fn storage_class(&self, name: &str) -> Option<Arc<StorageClass>>;
    fn csi_node(&self, name: &str) -> Option<Arc<CSINode>>;
}

/// PodDisruptionBudgets, for preemption.
pub trait ClusterLister: Send + Sync {
    fn pdbs(&self) -> Vec<Arc<PodDisruptionBudget>>;
}

#[derive(Default)]
struct Objects {
    pvcs: BTreeMap<(String, String), Arc<PersistentVolumeClaim>>,
    pvs: BTreeMap<String, Arc<PersistentVolume>>,
    classes: BTreeMap<String, Arc<StorageClass>>,
    csi_nodes: BTreeMap<String, Arc<CSINode>>,
    pdbs: BTreeMap<(String, String), Arc<PodDisruptionBudget>>,
}

/// An in-memory lister; `upsert_*`/`remove_*` keep it current.
#[derive(Default)]
pub struct StaticLister {
    objects: RwLock<Objects>,
}

fn key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl StaticLister {
    pub fn new() -> Self {
        Self::default()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Objects> {
        self.objects.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Objects> {
        self.objects.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn upsert_pvc(&self, pvc: PersistentVolumeClaim) {
        self.write().pvcs.insert(key(&pvc.metadata), Arc::new(pvc));
    }
    pub fn remove_pvc(&self, namespace: &str, name: &str) {
        self.write()
            .pvcs
            .remove(&(namespace.to_owned(), name.to_owned()));
    }
    pub fn upsert_pv(&self, pv: PersistentVolume) {
        self.write().pvs.insert(key(&pv.metadata).1, Arc::new(pv));
    }
    pub fn remove_pv(&self, name: &str) {
        self.write().pvs.remove(name);
    }
    pub fn upsert_storage_class(&self, sc: StorageClass) {
        self.write()
            .classes
            .insert(key(&sc.metadata).1, Arc::new(sc));
    }
    pub fn remove_storage_class(&self, name: &str) {
        self.write().classes.remove(name);
    }
    pub fn upsert_csi_node(&self, n: CSINode) {
        self.write()
            .csi_nodes
            .insert(key(&n.metadata).1, Arc::new(n));
    }
    pub fn remove_csi_node(&self, name: &str) {
        self.write().csi_nodes.remove(name);
    }
    pub fn upsert_pdb(&self, pdb: PodDisruptionBudget) {
        self.write().pdbs.insert(key(&pdb.metadata), Arc::new(pdb));
    }
    pub fn remove_pdb(&self, namespace: &str, name: &str) {
        self.write()
            .pdbs
            .remove(&(namespace.to_owned(), name.to_owned()));
    }
}

impl VolumeLister for StaticLister {
    fn pvc(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.read()
            .pvcs
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }
    fn pv(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.read().pvs.get(name).cloned()
    }
    fn pvs(&self) -> Vec<Arc<PersistentVolume>> {
        self.read().pvs.values().cloned().collect()
    }
    fn storage_class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.read().classes.get(name).cloned()
    }
    fn csi_node(&self, name: &str) -> Option<Arc<CSINode>> {
        self.read().csi_nodes.get(name).cloned()
    }
}

impl ClusterLister for StaticLister {
    fn pdbs(&self) -> Vec<Arc<PodDisruptionBudget>> {
        self.read().pdbs.values().cloned().collect()
    }
}
