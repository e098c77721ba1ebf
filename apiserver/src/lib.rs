//! The Kubernetes REST API over the `k1s_store::Store` trait (issue #3).
//!
//! Owns HTTP/TLS serving, discovery, the resource handlers and their Status errors. It must not
//! touch the on-disk format: everything goes through the store trait.
