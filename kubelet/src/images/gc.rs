//! Image garbage collection: the disk usage of the store's filesystem (`statvfs`), how many
//! bytes to free to go from above `high_percent` to below `low_percent`, and which images to
//! remove for that: not in use, least recently used first, never one used in the last
//! [`MIN_AGE_SECS`] (the kubelet's `--minimum-image-ttl-duration` default), so an image pulled
//! for a container that is about to start is not removed under it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::index::{Index, now_secs};
use super::{ContentStore, ImageError};

/// Images used more recently than this are kept.
pub const MIN_AGE_SECS: u64 = 120;

/// Capacity and available bytes of a filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskUsage {
    pub capacity: u64,
    pub available: u64,
}

impl DiskUsage {
    /// `statvfs` of the filesystem holding `path`.
    // The statvfs field types differ between platforms; on some the conversions are no-ops.
    #[allow(clippy::useless_conversion)]
    pub fn of(path: &Path) -> Result<Self, ImageError> {
        let st = nix::sys::statvfs::statvfs(path)
            .map_err(|e| ImageError::store(path, std::io::Error::from(e)))?;
        let frsize = u64::from(st.fragment_size());
        Ok(Self {
            capacity: u64::from(st.blocks()).saturating_mul(frsize),
            available: u64::from(st.blocks_available()).saturating_mul(frsize),
        })
    }

    /// Used percentage as the kubelet computes it: `100 - available * 100 / capacity`.
    pub fn used_percent(&self) -> u64 {
        if self.capacity == 0 {
            return 0;
        }
        100 - (u128::from(self.available) * 100 / u128::from(self.capacity)) as u64
    }

    /// Bytes to free: none if usage is below `high_percent`, else enough to reach
    /// `low_percent`.
    pub fn bytes_to_free(&self, high_percent: u8, low_percent: u8) -> u64 {
        if self.used_percent() < u64::from(high_percent) {
            return 0;
        }
        let used = self.capacity.saturating_sub(self.available);
        let target = u128::from(self.capacity) * u128::from(low_percent.min(100)) / 100;
        used.saturating_sub(target as u64)
    }
}

/// One image (all the references naming one image ID), as garbage collection sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: String,
    pub references: Vec<String>,
    pub last_used: u64,
}

/// Images that may be removed, least recently used first: not in `in_use` and not used
/// within [`MIN_AGE_SECS`] of `now`.
pub fn candidates(index: &Index, in_use: &[String], now: u64) -> Vec<Candidate> {
    let in_use: BTreeSet<&str> = in_use.iter().map(String::as_str).collect();
    let mut by_id: BTreeMap<&str, Candidate> = BTreeMap::new();
    for (reference, rec) in &index.images {
        let c = by_id
            .entry(rec.config_digest.as_str())
            .or_insert_with(|| Candidate {
                id: rec.config_digest.clone(),
                references: Vec::new(),
                last_used: 0,
            });
        c.references.push(reference.clone());
        c.last_used = c.last_used.max(rec.last_used);
    }
    let mut out: Vec<Candidate> = by_id
        .into_values()
        .filter(|c| !in_use.contains(c.id.as_str()))
        .filter(|c| now.saturating_sub(c.last_used) >= MIN_AGE_SECS)
        .collect();
    out.sort_by(|a, b| a.last_used.cmp(&b.last_used).then(a.id.cmp(&b.id)));
    out
}

impl ContentStore {
    /// Removes images not in `in_use` (image IDs), least recently used first, until the store's
    /// filesystem is below `low_percent` used, if it is at or above `high_percent`. Returns the
    /// bytes freed. Blocking: run in `spawn_blocking`.
    pub fn garbage_collect(
        &self,
        in_use: &[String],
        high_percent: u8,
        low_percent: u8,
    ) -> Result<u64, ImageError> {
        let usage = DiskUsage::of(self.root())?;
        let to_free = usage.bytes_to_free(high_percent, low_percent);
        if to_free > 0 {
            tracing::info!(
                used_percent = usage.used_percent(),
                high_percent,
                low_percent,
                to_free,
                "image garbage collection"
            );
        }
        self.free_bytes(in_use, to_free)
    }

    /// Removes images (as [`Self::garbage_collect`] chooses them) until `to_free` bytes are
    /// freed or none is left to remove; then deletes unreferenced layers and blobs.
    pub fn free_bytes(&self, in_use: &[String], to_free: u64) -> Result<u64, ImageError> {
        if to_free == 0 {
            return Ok(0);
        }
        let mut freed = 0;
        for c in candidates(&self.snapshot(), in_use, now_secs()) {
            if freed >= to_free {
                break;
            }
            tracing::info!(image = %c.id, references = ?c.references, "removing image");
            freed += self.remove_images(&c.references)?;
        }
        freed += self.remove_unreferenced()?;
        Ok(freed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::index::ImageRecord;

    #[test]
    fn thresholds() {
        let d = DiskUsage {
            capacity: 1000,
            available: 100,
        };
        assert_eq!(d.used_percent(), 90);
        assert_eq!(d.bytes_to_free(85, 80), 100);
        assert_eq!(d.bytes_to_free(95, 80), 0);
        assert_eq!(d.bytes_to_free(0, 0), 900);
        assert_eq!(
            DiskUsage {
                capacity: 0,
                available: 0
            }
            .used_percent(),
            0
        );
    }

    #[test]
    fn least_recently_used_first_skipping_in_use_and_young() {
        let mut index = Index::default();
        let mut add = |r: &str, id: &str, last_used: u64| {
            index.images.insert(
                r.to_string(),
                ImageRecord {
                    config_digest: id.to_string(),
                    last_used,
                    ..ImageRecord::default()
                },
            );
        };
        add("a:1", "sha256:a", 100);
        add("a:2", "sha256:a", 500);
        add("b:1", "sha256:b", 200);
        add("c:1", "sha256:c", 50);
        add("d:1", "sha256:d", 990);
        let got = candidates(&index, &["sha256:c".to_string()], 1000);
        let ids: Vec<_> = got.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, vec!["sha256:b", "sha256:a"]);
        assert_eq!(got[1].references, vec!["a:1", "a:2"]);
        assert_eq!(got[1].last_used, 500);
    }

    #[test]
    fn frees_unused_images_and_their_layers() {
        use crate::images::digest::sha256_of;
        use crate::images::layer::tests::TarBuilder;

        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::open(dir.path()).unwrap();
        let shared = TarBuilder::new().file("shared", &[1; 1000], 0o644).finish();
        let own_a = TarBuilder::new().file("a", &[2; 3000], 0o644).finish();
        let own_b = TarBuilder::new().file("b", &[3; 5000], 0o644).finish();
        for tar in [&shared, &own_a, &own_b] {
            store
                .unpack_layer("t", &tar[..], None, &sha256_of(tar))
                .unwrap();
        }
        let add = |name: &str, id: &str, own: &[u8], last_used: u64| {
            store
                .put_image(
                    name,
                    ImageRecord {
                        config_digest: sha256_of(id.as_bytes()),
                        layers: vec![sha256_of(&shared), sha256_of(own)],
                        last_used,
                        ..ImageRecord::default()
                    },
                )
                .unwrap()
        };
        let a = add("a", "a", &own_a, 10);
        let b = add("b", "b", &own_b, 20);
        let young = add("young", "young", &own_b, now_secs());

        // Nothing to free: nothing removed.
        assert_eq!(store.free_bytes(&[], 0).unwrap(), 0);
        assert_eq!(store.list().len(), 3);
        // `a` is in use, `young` too recent: only `b` goes; its layers stay (`young` uses them).
        let freed = store.free_bytes(std::slice::from_ref(&a.id), 1).unwrap();
        assert_eq!(freed, 0);
        assert!(store.get("b").is_none());
        assert!(store.get("a").is_some() && store.get("young").is_some());
        assert!(b.layers[1].is_dir());
        // Without `a` in use, `a` goes with its own layer; the shared one stays.
        let freed = store.free_bytes(&[], 1).unwrap();
        assert_eq!(freed, 3000);
        assert!(!a.layers[1].exists());
        assert!(young.layers[0].is_dir());
        // The real entry point: the disk is not that full, nothing happens.
        assert_eq!(store.garbage_collect(&[], 100, 99).unwrap(), 0);
    }
}
