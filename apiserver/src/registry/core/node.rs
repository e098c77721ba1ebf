//! Nodes: created by their kubelet, status included.

use serde_json::{Value, json};

use crate::registry::strategy::Strategy;

pub struct Node;

impl Strategy for Node {
    fn initial_status(&self, obj: &Value) -> Option<Value> {
        Some(obj.get("status").cloned().unwrap_or(json!({})))
    }
}
