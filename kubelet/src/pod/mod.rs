//! What a pod worker decides, apart from what it does: [`plan`] turns the observed state of a
//! pod's containers into the actions to take (upstream's `computePodActions`), and
//! [`backoff`] holds the restart back-off of every container. Both are pure: no I/O, no
//! clock reads; the worker ([`crate::pod_worker`]) gathers the state, passes `now`, and
//! performs the actions, its blocking calls through [`blocking`].

pub mod backoff;
pub mod blocking;
pub mod plan;
