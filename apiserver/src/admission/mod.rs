//! Admission decisions of the default-on plugins that need more than a lookup: PodSecurity,
//! LimitRanger and ResourceQuota, with upstream's semantics and messages.
//!
//! Everything here is pure: functions over JSON objects (and [`k1s_api::quantity`]) that
//! decide, mutate the object being admitted, or compute usage. They do no I/O and never touch
//! the store; the write path fetches namespaces, LimitRanges, ResourceQuotas and existing
//! objects, calls these functions, and turns their messages into `Status` errors
//! (`Forbidden` 403).
//!
//! - [`pod_security`]: Pod Security Standards levels from namespace labels.
//! - [`limit_ranger`]: LimitRange defaults and min/max/ratio checks for pods and PVCs.
//! - [`quota`]: ResourceQuota usage of objects, scopes, and the admission check.

pub mod limit_ranger;
pub mod pod_security;
pub mod quota;
