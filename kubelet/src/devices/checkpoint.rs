//! The device manager's checkpoint, `DIR/kubelet_internal_checkpoint` (upstream's name): the
//! allocations of pod containers and each resource's device IDs, written atomically (temp
//! file, fsync, rename) after every change, read at start.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Allocation, DeviceError};

pub(super) const FILE: &str = "kubelet_internal_checkpoint";

#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Checkpoint {
    pub allocations: Vec<Allocation>,
    /// Resource → its device IDs, so a resource stays known (and its devices counted) before
    /// its plugin registers again.
    pub registered: BTreeMap<String, Vec<String>>,
}

fn err(dir: &Path) -> impl FnOnce(std::io::Error) -> DeviceError + '_ {
    move |source| DeviceError::Checkpoint {
        path: dir.join(FILE),
        source,
    }
}

/// The checkpoint in `dir`, if there is one.
pub(super) fn load(dir: &Path) -> Result<Option<Checkpoint>, DeviceError> {
    let bytes = match std::fs::read(dir.join(FILE)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(dir)(e)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| err(dir)(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

pub(super) fn save(dir: &Path, cp: &Checkpoint) -> Result<(), DeviceError> {
    std::fs::create_dir_all(dir).map_err(err(dir))?;
    crate::runtime::spec::write_json(dir, FILE, cp).map_err(err(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::{ContainerDevices, HostDevice};

    #[test]
    fn round_trip_and_corruption_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
        let mut response = ContainerDevices::default();
        response.envs.insert("GPU".into(), "d1".into());
        response.devices.push(HostDevice {
            container_path: "/dev/gpu0".into(),
            host_path: "/dev/null".into(),
            permissions: "rw".into(),
        });
        let cp = Checkpoint {
            allocations: vec![Allocation {
                pod_uid: "u1".into(),
                container: "main/a".into(),
                resource: "example.com/gpu".into(),
                device_ids: vec!["d1".into()],
                response,
            }],
            registered: [(
                "example.com/gpu".to_string(),
                vec!["d0".into(), "d1".into()],
            )]
            .into(),
        };
        save(dir.path(), &cp).unwrap();
        assert_eq!(load(dir.path()).unwrap(), Some(cp));

        std::fs::write(dir.path().join(FILE), b"{not json").unwrap();
        let e = load(dir.path()).unwrap_err().to_string();
        assert!(e.contains(FILE), "{e}");
    }
}
