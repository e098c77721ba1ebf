//! JSONSchemaProps parsed from JSON.

use super::{BadValue, FieldError, MAX_SCHEMA_DEPTH, child, index, key};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub(crate) enum AdditionalProps {
    Bool(bool),
    Schema(Box<Props>),
}

/// One `x-kubernetes-validations` rule (recorded, never evaluated).
#[derive(Debug, Clone, PartialEq)]
pub struct CelRule {
    /// Data path of the value the rule applies to, e.g. `spec` or `spec.items[*]` ("" = root).
    pub data_path: String,
    /// Path of the rule in the CRD, e.g. `spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]`.
    pub schema_path: String,
    pub rule: String,
    pub message: Option<String>,
    pub message_expression: Option<String>,
    pub reason: Option<String>,
    pub field_path: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Props {
    pub ty: String,
    /// Types used by the value validator (`integer,string` for int-or-string).
    pub vtypes: Vec<String>,
    pub format: String,
    /// Format after stripping the ones upstream does not support for the type.
    pub vformat: String,
    pub title: String,
    pub description: String,
    pub nullable: bool,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: String,
    pub regex: Option<Result<regex::Regex, super::pattern::PatternError>>,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub multiple_of: Option<f64>,
    pub enum_: Vec<Value>,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub required: Vec<String>,
    pub items: Option<Box<Props>>,
    pub items_is_array: bool,
    pub all_of: Vec<Props>,
    pub one_of: Vec<Props>,
    pub any_of: Vec<Props>,
    pub not: Option<Box<Props>>,
    pub properties: BTreeMap<String, Props>,
    pub additional_properties: Option<AdditionalProps>,
    pub default: Option<Value>,
    pub example: Option<Value>,
    pub external_docs: bool,
    pub x_preserve_unknown_fields: Option<bool>,
    pub x_embedded_resource: bool,
    pub x_int_or_string: bool,
    pub x_list_map_keys: Vec<String>,
    pub x_list_type: Option<String>,
    pub x_map_type: Option<String>,
    pub x_validations: Vec<Value>,
    // unsupported keywords (presence only)
    pub id: String,
    pub schema: String,
    pub ref_: Option<String>,
    pub pattern_properties: bool,
    pub definitions: bool,
    pub dependencies: bool,
    pub additional_items: bool,
}

impl Props {
    pub(crate) fn preserve_unknown(&self) -> bool {
        self.x_preserve_unknown_fields == Some(true)
    }

    /// The schema applying to values of unknown keys (additionalProperties as schema).
    pub(crate) fn additional_schema(&self) -> Option<&Props> {
        match &self.additional_properties {
            Some(AdditionalProps::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// True if the schema is exactly `{type: <t>}` (used for the int-or-string patterns).
    pub(crate) fn is_bare_type(&self, t: &str) -> bool {
        self.ty == t && self.structurally_empty_except_type()
    }

    fn structurally_empty_except_type(&self) -> bool {
        self.format.is_empty()
            && self.title.is_empty()
            && self.description.is_empty()
            && !self.nullable
            && self.maximum.is_none()
            && !self.exclusive_maximum
            && self.minimum.is_none()
            && !self.exclusive_minimum
            && self.max_length.is_none()
            && self.min_length.is_none()
            && self.pattern.is_empty()
            && self.max_items.is_none()
            && self.min_items.is_none()
            && !self.unique_items
            && self.multiple_of.is_none()
            && self.enum_.is_empty()
            && self.max_properties.is_none()
            && self.min_properties.is_none()
            && self.required.is_empty()
            && self.items.is_none()
            && self.all_of.is_empty()
            && self.one_of.is_empty()
            && self.any_of.is_empty()
            && self.not.is_none()
            && self.properties.is_empty()
            && self.additional_properties.is_none()
            && self.default.is_none()
            && self.example.is_none()
            && !self.external_docs
            && self.x_preserve_unknown_fields.is_none()
            && !self.x_embedded_resource
            && !self.x_int_or_string
            && self.x_list_map_keys.is_empty()
            && self.x_list_type.is_none()
            && self.x_map_type.is_none()
            && self.x_validations.is_empty()
    }

    /// Whether any value validation (anything outside the structural skeleton) is set.
    pub(crate) fn has_value_validation(&self) -> bool {
        !self.format.is_empty()
            || self.maximum.is_some()
            || self.exclusive_maximum
            || self.minimum.is_some()
            || self.exclusive_minimum
            || self.max_length.is_some()
            || self.min_length.is_some()
            || !self.pattern.is_empty()
            || self.max_items.is_some()
            || self.min_items.is_some()
            || self.unique_items
            || self.multiple_of.is_some()
            || !self.enum_.is_empty()
            || self.max_properties.is_some()
            || self.min_properties.is_some()
            || !self.required.is_empty()
            || !self.all_of.is_empty()
            || !self.one_of.is_empty()
            || !self.any_of.is_empty()
            || self.not.is_some()
    }
}

struct Parser {
    errs: Vec<FieldError>,
}

pub(crate) fn parse(v: &Value, path: &str) -> Result<Props, Vec<FieldError>> {
    let mut p = Parser { errs: Vec::new() };
    let props = p.schema(v, path, 1);
    if p.errs.is_empty() {
        Ok(props)
    } else {
        Err(p.errs)
    }
}

fn type_err(path: &str, v: &Value, want: &str) -> FieldError {
    FieldError::invalid(path, BadValue::from_json(v), format!("must be {want}"))
}

impl Parser {
    fn string(&mut self, m: &Map<String, Value>, k: &str, path: &str) -> String {
        match m.get(k) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                self.errs.push(type_err(&child(path, k), other, "a string"));
                String::new()
            }
        }
    }

    fn opt_string(&mut self, m: &Map<String, Value>, k: &str, path: &str) -> Option<String> {
        match m.get(k) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                self.errs.push(type_err(&child(path, k), other, "a string"));
                None
            }
        }
    }

    fn boolean(&mut self, m: &Map<String, Value>, k: &str, path: &str) -> Option<bool> {
        match m.get(k) {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => {
                self.errs
                    .push(type_err(&child(path, k), other, "a boolean"));
                None
            }
        }
    }

    fn float(&mut self, m: &Map<String, Value>, k: &str, path: &str) -> Option<f64> {
        match m.get(k) {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => n.as_f64(),
            Some(other) => {
                self.errs.push(type_err(&child(path, k), other, "a number"));
                None
            }
        }
    }

    fn int(&mut self, m: &Map<String, Value>, k: &str, path: &str) -> Option<i64> {
        match m.get(k) {
            None | Some(Value::Null) => None,
            Some(v @ Value::Number(n)) => match n.as_i64() {
                Some(i) => Some(i),
                None => {
                    self.errs.push(type_err(&child(path, k), v, "an integer"));
                    None
                }
            },
            Some(other) => {
                self.errs
                    .push(type_err(&child(path, k), other, "an integer"));
                None
            }
        }
    }

    fn strings(&mut self, m: &Map<String, Value>, k: &str, path: &str) -> Vec<String> {
        match m.get(k) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => {
                let mut out = Vec::with_capacity(a.len());
                for (i, x) in a.iter().enumerate() {
                    match x {
                        Value::String(s) => out.push(s.clone()),
                        other => {
                            self.errs
                                .push(type_err(&index(&child(path, k), i), other, "a string"))
                        }
                    }
                }
                out
            }
            Some(other) => {
                self.errs
                    .push(type_err(&child(path, k), other, "an array of strings"));
                Vec::new()
            }
        }
    }

    fn schema_list(
        &mut self,
        m: &Map<String, Value>,
        k: &str,
        path: &str,
        depth: usize,
    ) -> Vec<Props> {
        match m.get(k) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, x)| self.schema(x, &index(&child(path, k), i), depth + 1))
                .collect(),
            Some(other) => {
                self.errs
                    .push(type_err(&child(path, k), other, "an array of schemas"));
                Vec::new()
            }
        }
    }

    fn schema(&mut self, v: &Value, path: &str, depth: usize) -> Props {
        let mut p = Props::default();
        let m = match v {
            Value::Object(m) => m,
            Value::Null => return p,
            other => {
                self.errs.push(type_err(path, other, "an object"));
                return p;
            }
        };
        if depth > MAX_SCHEMA_DEPTH {
            self.errs.push(FieldError::forbidden(
                path,
                format!("must not be nested deeper than {MAX_SCHEMA_DEPTH} levels"),
            ));
            return p;
        }
        p.id = self.string(m, "id", path);
        p.schema = self.string(m, "$schema", path);
        p.ref_ = self.opt_string(m, "$ref", path);
        p.description = self.string(m, "description", path);
        p.ty = self.string(m, "type", path);
        p.format = self.string(m, "format", path);
        p.title = self.string(m, "title", path);
        p.nullable = self.boolean(m, "nullable", path).unwrap_or(false);
        p.default = m.get("default").filter(|d| !d.is_null()).cloned();
        p.example = m.get("example").filter(|d| !d.is_null()).cloned();
        p.maximum = self.float(m, "maximum", path);
        p.exclusive_maximum = self.boolean(m, "exclusiveMaximum", path).unwrap_or(false);
        p.minimum = self.float(m, "minimum", path);
        p.exclusive_minimum = self.boolean(m, "exclusiveMinimum", path).unwrap_or(false);
        p.max_length = self.int(m, "maxLength", path);
        p.min_length = self.int(m, "minLength", path);
        p.pattern = self.string(m, "pattern", path);
        p.max_items = self.int(m, "maxItems", path);
        p.min_items = self.int(m, "minItems", path);
        p.unique_items = self.boolean(m, "uniqueItems", path).unwrap_or(false);
        p.multiple_of = self.float(m, "multipleOf", path);
        match m.get("enum") {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) => p.enum_ = a.clone(),
            Some(other) => self
                .errs
                .push(type_err(&child(path, "enum"), other, "an array")),
        }
        p.max_properties = self.int(m, "maxProperties", path);
        p.min_properties = self.int(m, "minProperties", path);
        p.required = self.strings(m, "required", path);
        match m.get("items") {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) => {
                p.items_is_array = true;
                // parsed for completeness; rejected by validation
                for (i, x) in a.iter().enumerate() {
                    self.schema(x, &index(&child(path, "items"), i), depth + 1);
                }
            }
            Some(x) => p.items = Some(Box::new(self.schema(x, &child(path, "items"), depth + 1))),
        }
        p.all_of = self.schema_list(m, "allOf", path, depth);
        p.one_of = self.schema_list(m, "oneOf", path, depth);
        p.any_of = self.schema_list(m, "anyOf", path, depth);
        match m.get("not") {
            None | Some(Value::Null) => {}
            Some(x) => p.not = Some(Box::new(self.schema(x, &child(path, "not"), depth + 1))),
        }
        match m.get("properties") {
            None | Some(Value::Null) => {}
            Some(Value::Object(props)) => {
                let pp = child(path, "properties");
                for (k, x) in props {
                    let sub = self.schema(x, &key(&pp, k), depth + 1);
                    p.properties.insert(k.clone(), sub);
                }
            }
            Some(other) => self
                .errs
                .push(type_err(&child(path, "properties"), other, "an object")),
        }
        match m.get("additionalProperties") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => p.additional_properties = Some(AdditionalProps::Bool(*b)),
            Some(x) => {
                p.additional_properties = Some(AdditionalProps::Schema(Box::new(self.schema(
                    x,
                    &child(path, "additionalProperties"),
                    depth + 1,
                ))))
            }
        }
        p.pattern_properties = m
            .get("patternProperties")
            .is_some_and(|x| x.as_object().is_some_and(|o| !o.is_empty()));
        p.definitions = m
            .get("definitions")
            .is_some_and(|x| x.as_object().is_some_and(|o| !o.is_empty()));
        p.dependencies = m.get("dependencies").is_some_and(|x| !x.is_null());
        p.additional_items = m.get("additionalItems").is_some_and(|x| !x.is_null());
        p.external_docs = m.get("externalDocs").is_some_and(|x| !x.is_null());
        p.x_preserve_unknown_fields = self.boolean(m, "x-kubernetes-preserve-unknown-fields", path);
        p.x_embedded_resource = self
            .boolean(m, "x-kubernetes-embedded-resource", path)
            .unwrap_or(false);
        p.x_int_or_string = self
            .boolean(m, "x-kubernetes-int-or-string", path)
            .unwrap_or(false);
        p.x_list_map_keys = self.strings(m, "x-kubernetes-list-map-keys", path);
        p.x_list_type = self.opt_string(m, "x-kubernetes-list-type", path);
        p.x_map_type = self.opt_string(m, "x-kubernetes-map-type", path);
        match m.get("x-kubernetes-validations") {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) => {
                for (i, r) in a.iter().enumerate() {
                    if !r.is_object() {
                        self.errs.push(type_err(
                            &index(&child(path, "x-kubernetes-validations"), i),
                            r,
                            "an object",
                        ));
                    }
                }
                p.x_validations = a.clone();
            }
            Some(other) => self.errs.push(type_err(
                &child(path, "x-kubernetes-validations"),
                other,
                "an array",
            )),
        }

        // derived values used by the validator
        if p.x_int_or_string {
            p.vtypes = vec!["integer".into(), "string".into()];
        } else if !p.ty.is_empty() {
            p.vtypes = vec![p.ty.clone()];
        }
        p.vformat = super::format::strip_unsupported(&p.format, &p.vtypes);
        if !p.pattern.is_empty() {
            p.regex = Some(super::pattern::compile(&p.pattern));
        }
        p
    }
}

/// Collects x-kubernetes-validations rules of the structural part of the schema.
pub(crate) fn collect_cel_rules(
    p: &Props,
    data_path: &str,
    schema_path: &str,
    out: &mut Vec<CelRule>,
) {
    for (i, r) in p.x_validations.iter().enumerate() {
        let get = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
        out.push(CelRule {
            data_path: data_path.to_string(),
            schema_path: index(&child(schema_path, "x-kubernetes-validations"), i),
            rule: get("rule").unwrap_or_default(),
            message: get("message"),
            message_expression: get("messageExpression"),
            reason: get("reason"),
            field_path: get("fieldPath"),
        });
    }
    for (k, sub) in &p.properties {
        collect_cel_rules(
            sub,
            &child(data_path, k),
            &key(&child(schema_path, "properties"), k),
            out,
        );
    }
    if let Some(items) = &p.items {
        collect_cel_rules(
            items,
            &format!("{data_path}[*]"),
            &child(schema_path, "items"),
            out,
        );
    }
    if let Some(ap) = p.additional_schema() {
        collect_cel_rules(
            ap,
            &child(data_path, "*"),
            &child(schema_path, "additionalProperties"),
            out,
        );
    }
    for (i, sub) in p.all_of.iter().enumerate() {
        collect_cel_rules(sub, data_path, &index(&child(schema_path, "allOf"), i), out);
    }
}
