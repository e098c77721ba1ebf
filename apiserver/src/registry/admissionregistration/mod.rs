//! The admissionregistration group's kinds with rules (upstream
//! `pkg/registry/admissionregistration`).

pub mod webhook_config;
