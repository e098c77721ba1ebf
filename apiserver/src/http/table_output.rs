//! `meta.k8s.io/v1` Table responses: the envelope around the printers of [`k1s_apimachinery::table`].

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::registry::ResourceType;
use k1s_apimachinery::table;

/// The printer of a resource: a CRD's columns, the built-in printer, or the default.
enum Printer {
    Static(&'static dyn table::Printer),
    Owned(Box<dyn table::Printer>),
}

impl Printer {
    fn of(res: &ResourceType) -> Self {
        if let Some(custom) = &res.custom {
            return match table::custom(&custom.printer_columns) {
                Ok(p) => Printer::Owned(p),
                // Columns the CRD's validation should have refused: the default printer.
                Err(_) => Printer::Static(table::default_printer()),
            };
        }
        Printer::Static(
            table::builtin(&res.group, &res.plural).unwrap_or_else(table::default_printer),
        )
    }

    fn get(&self) -> &dyn table::Printer {
        match self {
            Printer::Static(p) => *p,
            Printer::Owned(p) => p.as_ref(),
        }
    }
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
    let printer = Printer::of(res);
    let p = printer.get();
    let now = jiff::Timestamp::now();
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
