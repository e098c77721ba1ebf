//! The certificates group's kinds with rules (upstream `pkg/registry/certificates`).

pub mod certificate_signing_request;
