//! The kubelet's volume stats gauges, as upstream names them:
//! `kubelet_volume_stats_{capacity,used,available}_bytes` and
//! `kubelet_volume_stats_inodes{,_used,_free}`, labelled `namespace` and
//! `persistentvolumeclaim`, from NodeGetVolumeStats of published CSI claims. Refreshed
//! periodically (upstream's volumeStatsAggPeriod is a minute) and encoded as Prometheus text
//! for whatever serves `/metrics`. [`VolumeStats`] is one volume's values, as read from a
//! NodeGetVolumeStats answer.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Bytes and inodes of one volume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VolumeStats {
    pub capacity_bytes: i64,
    pub used_bytes: i64,
    pub available_bytes: i64,
    pub inodes: i64,
    pub inodes_used: i64,
    pub inodes_free: i64,
}

impl VolumeStats {
    /// The bytes and inodes a NodeGetVolumeStats answer reports.
    pub(crate) fn from_usage(usage: &[k1s_csi::proto::v1::VolumeUsage]) -> Self {
        use k1s_csi::proto::v1::volume_usage::Unit;
        let mut s = Self::default();
        for u in usage {
            match u.unit() {
                Unit::Bytes => {
                    s.capacity_bytes = u.total;
                    s.used_bytes = u.used;
                    s.available_bytes = u.available;
                }
                Unit::Inodes => {
                    s.inodes = u.total;
                    s.inodes_used = u.used;
                    s.inodes_free = u.available;
                }
                Unit::Unknown => {}
            }
        }
        s
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClaimLabels {
    namespace: String,
    persistentvolumeclaim: String,
}

type Gauges = Family<ClaimLabels, Gauge>;

/// The six gauges and their registry.
pub struct VolumeMetrics {
    registry: Registry,
    gauges: [Gauges; 6],
}

impl Default for VolumeMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let gauges: [Gauges; 6] = Default::default();
        let help = [
            (
                "kubelet_volume_stats_capacity_bytes",
                "Capacity in bytes of the volume",
            ),
            (
                "kubelet_volume_stats_used_bytes",
                "Number of used bytes in the volume",
            ),
            (
                "kubelet_volume_stats_available_bytes",
                "Number of available bytes in the volume",
            ),
            (
                "kubelet_volume_stats_inodes",
                "Maximum number of inodes in the volume",
            ),
            (
                "kubelet_volume_stats_inodes_used",
                "Number of used inodes in the volume",
            ),
            (
                "kubelet_volume_stats_inodes_free",
                "Number of free inodes in the volume",
            ),
        ];
        for ((name, help), g) in help.into_iter().zip(gauges.iter()) {
            registry.register(name, help, g.clone());
        }
        Self { registry, gauges }
    }
}

impl VolumeMetrics {
    /// Replaces every value with `stats` ((namespace, claim) → stats).
    pub fn set(&self, stats: &[((String, String), VolumeStats)]) {
        for g in &self.gauges {
            g.clear();
        }
        for ((ns, claim), s) in stats {
            let labels = ClaimLabels {
                namespace: ns.clone(),
                persistentvolumeclaim: claim.clone(),
            };
            let values = [
                s.capacity_bytes,
                s.used_bytes,
                s.available_bytes,
                s.inodes,
                s.inodes_used,
                s.inodes_free,
            ];
            for (g, v) in self.gauges.iter().zip(values) {
                g.get_or_create(&labels).set(v);
            }
        }
    }

    /// The Prometheus text exposition (without the trailing `# EOF`, so that it can be
    /// appended to another registry's output).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_carry_namespace_and_claim_and_forget_gone_claims() {
        let m = VolumeMetrics::default();
        let s = VolumeStats {
            capacity_bytes: 1000,
            used_bytes: 10,
            available_bytes: 990,
            inodes: 64,
            inodes_used: 3,
            inodes_free: 61,
        };
        m.set(&[(("ns".into(), "data".into()), s)]);
        let text = m.encode();
        for line in [
            "kubelet_volume_stats_capacity_bytes{namespace=\"ns\",persistentvolumeclaim=\"data\"} 1000",
            "kubelet_volume_stats_used_bytes{namespace=\"ns\",persistentvolumeclaim=\"data\"} 10",
            "kubelet_volume_stats_available_bytes{namespace=\"ns\",persistentvolumeclaim=\"data\"} 990",
            "kubelet_volume_stats_inodes{namespace=\"ns\",persistentvolumeclaim=\"data\"} 64",
            "kubelet_volume_stats_inodes_used{namespace=\"ns\",persistentvolumeclaim=\"data\"} 3",
            "kubelet_volume_stats_inodes_free{namespace=\"ns\",persistentvolumeclaim=\"data\"} 61",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        assert!(!text.contains("# EOF"));
        m.set(&[]);
        assert!(!m.encode().contains("persistentvolumeclaim=\"data\""));
    }
}
