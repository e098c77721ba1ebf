//! `meta.k8s.io/v1` Table responses: the envelope around the printers of [`crate::table`].

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::registry::ResourceType;
use crate::table;

/// The printer of a resource: its built-in printer, or NAME/AGE.
fn printer(res: &ResourceType) -> &'static dyn table::Printer {
    table::builtin(&res.group, &res.plural).unwrap_or_else(table::default_printer)
}

/// A Table of `items`. `includeObject` (`None`, `Metadata` (default), `Object`) decides what
/// each row carries; `with_columns` is false for the later events of a watch, as upstream
/// sends the column definitions only once.
pub fn table(
    res: &ResourceType,
    items: &[Value],
    metadata: Value,
    q: &HashMap<String, String>,
    with_columns: bool,
) -> Value {
    let p = printer(res);
    let now = time::OffsetDateTime::now_utc();
    let include = q.get("includeObject").map_or("Metadata", String::as_str);
    let rows: Vec<Value> = items
        .iter()
        .map(|obj| {
            let mut row = json!({"cells": p.cells(obj, now)});
            match include {
                "None" => {}
                "Object" => row["object"] = obj.clone(),
                _ => row["object"] = super::resources::partial_metadata(obj),
            }
            if let Some(c) = p.row_conditions(obj) {
                row["conditions"] = c;
            }
            row
        })
        .collect();
    let columns = if with_columns {
        table::column_definitions_json(&p.columns())
    } else {
        json!([])
    };
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
        "columnDefinitions": columns, "rows": rows,
    })
}
