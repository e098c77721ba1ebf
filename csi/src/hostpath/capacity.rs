//! How big volumes are and how many bytes the plugin may hand out.
//!
//! A volume's size comes from the request's `CapacityRange`: the required bytes (or a default),
//! at least [`MIN_VOLUME_SIZE`], rounded up to whole 4 KiB blocks, never above the limit. The
//! plugin's capacity is a byte budget (`--capacity`, by default the free space of the data
//! dir's file system when the plugin starts): images are sparse, so the budget, not the disk,
//! says when the plugin is full. Volumes count against it with their full size.

use std::path::Path;

/// Size of a volume created without a capacity range.
pub const DEFAULT_VOLUME_SIZE: i64 = 1 << 30;
/// The smallest volume: ext4 needs room for its metadata and journal.
pub const MIN_VOLUME_SIZE: i64 = 1 << 20;
const BLOCK: i64 = 4096;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("capacity range must not be negative (required {required}, limit {limit})")]
    Negative { required: i64, limit: i64 },
    #[error("limit_bytes {limit} is below required_bytes {required}")]
    LimitBelowRequired { required: i64, limit: i64 },
    #[error("no volume size fits: required {required}, limit {limit}, minimum {MIN_VOLUME_SIZE}")]
    Unsatisfiable { required: i64, limit: i64 },
    #[error("{size} bytes is more than the plugin's whole capacity of {total} bytes")]
    TooLarge { size: i64, total: i64 },
    #[error("{size} bytes requested but only {available} of {total} bytes are left")]
    Exhausted {
        size: i64,
        available: i64,
        total: i64,
    },
}

/// The size to give a volume asked for with `required`/`limit` (0 meaning unset).
pub fn volume_size(required: i64, limit: i64) -> Result<i64, SizeError> {
    if required < 0 || limit < 0 {
        return Err(SizeError::Negative { required, limit });
    }
    if limit > 0 && limit < required {
        return Err(SizeError::LimitBelowRequired { required, limit });
    }
    let want = match (required, limit) {
        (0, 0) => DEFAULT_VOLUME_SIZE,
        (0, limit) => DEFAULT_VOLUME_SIZE.min(limit),
        (required, _) => required,
    }
    .max(MIN_VOLUME_SIZE);
    let mut size = round_up(want);
    if limit > 0 && size > limit {
        size = limit / BLOCK * BLOCK;
        if size < want {
            return Err(SizeError::Unsatisfiable { required, limit });
        }
    }
    Ok(size)
}

fn round_up(n: i64) -> i64 {
    n.saturating_add(BLOCK - 1) / BLOCK * BLOCK
}

/// The plugin's byte budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    pub total: i64,
}

impl Capacity {
    /// `explicit` bytes, else the free space of the file system holding `data_dir`.
    pub fn new(explicit: Option<u64>, data_dir: &Path) -> std::io::Result<Self> {
        let total = match explicit {
            Some(bytes) => bytes,
            None => {
                let s = nix::sys::statvfs::statvfs(data_dir)?;
                s.blocks_available() * s.fragment_size()
            }
        };
        Ok(Self {
            total: i64::try_from(total).unwrap_or(i64::MAX),
        })
    }

    /// Bytes left when `allocated` are handed out.
    pub fn available(&self, allocated: i64) -> i64 {
        (self.total - allocated).max(0)
    }

    /// Whether `size` more bytes fit when `allocated` are handed out.
    pub fn reserve(&self, allocated: i64, size: i64) -> Result<(), SizeError> {
        if size > self.total {
            return Err(SizeError::TooLarge {
                size,
                total: self.total,
            });
        }
        let available = self.available(allocated);
        if size > available {
            return Err(SizeError::Exhausted {
                size,
                available,
                total: self.total,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        const GI: i64 = 1 << 30;
        let cases: &[(i64, i64, Result<i64, SizeError>)] = &[
            (0, 0, Ok(DEFAULT_VOLUME_SIZE)),
            (0, 10 << 20, Ok(10 << 20)),
            (10 * GI, 0, Ok(10 * GI)),
            (10 * GI, 10 * GI, Ok(10 * GI)),
            (1, 0, Ok(MIN_VOLUME_SIZE)),
            (MIN_VOLUME_SIZE + 1, 0, Ok(MIN_VOLUME_SIZE + BLOCK)),
            // Rounding up would pass the limit: round the limit down instead.
            (
                MIN_VOLUME_SIZE + 1,
                MIN_VOLUME_SIZE + 5000,
                Ok(MIN_VOLUME_SIZE + BLOCK),
            ),
            (
                MIN_VOLUME_SIZE + 1,
                MIN_VOLUME_SIZE + 10,
                Err(SizeError::Unsatisfiable {
                    required: MIN_VOLUME_SIZE + 1,
                    limit: MIN_VOLUME_SIZE + 10,
                }),
            ),
            (
                0,
                1000,
                Err(SizeError::Unsatisfiable {
                    required: 0,
                    limit: 1000,
                }),
            ),
            (
                2 * GI,
                GI,
                Err(SizeError::LimitBelowRequired {
                    required: 2 * GI,
                    limit: GI,
                }),
            ),
            (
                -1,
                0,
                Err(SizeError::Negative {
                    required: -1,
                    limit: 0,
                }),
            ),
        ];
        for (required, limit, want) in cases {
            assert_eq!(
                &volume_size(*required, *limit),
                want,
                "required {required} limit {limit}"
            );
        }
    }

    #[test]
    fn budget() {
        let c = Capacity { total: 100 };
        assert_eq!(c.available(30), 70);
        assert_eq!(c.available(130), 0);
        assert!(c.reserve(30, 70).is_ok());
        assert!(matches!(
            c.reserve(30, 71),
            Err(SizeError::Exhausted { available: 70, .. })
        ));
        assert!(matches!(c.reserve(0, 101), Err(SizeError::TooLarge { .. })));
    }

    #[test]
    fn default_budget_is_the_free_space() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Capacity::new(None, dir.path()).unwrap().total > 0);
        assert_eq!(Capacity::new(Some(42), dir.path()).unwrap().total, 42);
    }
}
