//! Namespaces (upstream `pkg/registry/core/namespace`): every namespace carries the
//! `kubernetes` finalizer and its own name as a label, starts Active, turns Terminating on
//! delete and stays until its `spec.finalizers` are emptied through `finalize`.

use serde_json::{Value, json};

use crate::registry::ResourceType;
use crate::registry::strategy::{Strategy, set_default, spec_mut, update_base};

pub struct Namespace;

impl Strategy for Namespace {
    fn update_base(
        &self,
        res: &ResourceType,
        old: &Value,
        new: Value,
        subresource: Option<&str>,
    ) -> Value {
        match subresource {
            // The finalize subresource changes spec.finalizers only.
            Some("finalize") => {
                let mut o = old.clone();
                o["spec"]["finalizers"] = new["spec"]["finalizers"].clone();
                o
            }
            // Other writes leave spec.finalizers as they are.
            None => {
                let mut o = update_base(res, old, new, subresource);
                match old["spec"].get("finalizers") {
                    Some(f) => {
                        if !o["spec"].is_object() {
                            o["spec"] = json!({});
                        }
                        o["spec"]["finalizers"] = f.clone();
                    }
                    None => {
                        if let Some(spec) = o["spec"].as_object_mut() {
                            spec.remove("finalizers");
                        }
                    }
                }
                o
            }
            _ => update_base(res, old, new, subresource),
        }
    }

    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"phase": "Active"}))
    }

    /// The `kubernetes` finalizer, whatever else the client asked for: the namespace
    /// controller empties it before the namespace goes.
    fn prepare_create(&self, obj: &mut Value) {
        if !obj["spec"].is_object() {
            obj["spec"] = json!({});
        }
        let f = &mut obj["spec"]["finalizers"];
        match f.as_array_mut() {
            Some(list) if !list.iter().any(|x| x == "kubernetes") => list.push(json!("kubernetes")),
            Some(_) => {}
            None => *f = json!(["kubernetes"]),
        }
    }

    fn defaults(&self, obj: &mut Value) {
        // Upstream (1.21+) labels every namespace with its own name on create and update, so
        // that NetworkPolicy namespace selectors can pick namespaces by name.
        let name = obj["metadata"]["name"].clone();
        if name.is_string() {
            if !obj["metadata"]["labels"].is_object() {
                obj["metadata"]["labels"] = json!({});
            }
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        }
        if let Some(spec) = spec_mut(obj) {
            set_default(spec, "finalizers", json!(["kubernetes"]));
        }
    }

    fn prepare_delete(&self, obj: &mut Value) {
        obj["status"]["phase"] = json!("Terminating");
    }

    fn blocks_deletion(&self, obj: &Value) -> bool {
        obj["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
    }
}
