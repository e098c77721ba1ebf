//! The controller manager: workload, garbage-collection, namespace, node and endpoint
//! controllers on the shared watch → cache → reconcile runtime (issue #6).
