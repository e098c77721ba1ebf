//! The scheduling framework: queue, cache and plugins per extension point (issue #5).
