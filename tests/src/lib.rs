//! End-to-end tests of the `k1s` binary live in `tests/tests/`; this crate has no library code.
