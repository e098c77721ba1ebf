//! CRD-side validation of an `openAPIV3Schema`: structural schema invariants,
//! completeness of value validations, defaults, and the OpenAPI schema rules
//! apiextensions enforces (list/map types, unsupported keywords, ...).

use super::meta::{META_FIELDS, validate_embedded_as};
use super::props::{AdditionalProps, Props};
use super::prune::prune_value;
use super::validate::validate_value;
use super::{BadValue, CompileOptions, FieldError, child, gofmt, index, key};
use serde_json::Value;

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Item,
    Field,
}

fn s(v: &str) -> BadValue {
    BadValue::Str(v.to_string())
}

pub(crate) fn validate_crd_schema(
    root: &Props,
    raw: &Value,
    opts: &CompileOptions,
) -> Vec<FieldError> {
    let base = opts.field_path.as_str();
    let mut all = Vec::new();

    if opts.status_subresource {
        status_root_check(root, raw, base, &mut all);
    }
    if root.nullable {
        all.push(FieldError::forbidden(
            child(base, "nullable"),
            "nullable cannot be true at the root",
        ));
    }

    let mut init_errs = Vec::new();
    if let Some(e) = new_structural_error(root) {
        init_errs.push(FieldError::invalid(base, s(""), e));
    } else {
        let mut serrs = Vec::new();
        invariants(root, Level::Root, base, &mut serrs);
        completeness(root, base, &mut serrs);
        serrs.sort_by_key(|e| e.to_string());
        if !serrs.is_empty() {
            all.extend(serrs);
        } else {
            defaults(root, base, true, false, &mut all);
        }
    }

    let ssv = Ssv {
        allow_defaults: true,
        disallow_reason: String::new(),
        inside_meta: false,
    };
    openapi_schema(root, base, &ssv, true, &mut all);

    if all.is_empty() {
        all.extend(init_errs);
    }
    all
}

// ---------------------------------------------------------------------------
// status subresource: restricted root
// ---------------------------------------------------------------------------

const ALLOWED_AT_ROOT: &str = "[Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations]";

fn status_root_check(p: &Props, raw: &Value, base: &str, all: &mut Vec<FieldError>) {
    // JSONSchemaProps fields are checked in struct order: ID, $schema and $ref
    // come before Type; every other disallowed field comes after it.
    let before_type = !p.id.is_empty() || !p.schema.is_empty() || p.ref_.is_some();
    let after_type = p.default.is_some()
        || !p.enum_.is_empty()
        || p.max_properties.is_some()
        || p.min_properties.is_some()
        || !p.all_of.is_empty()
        || !p.one_of.is_empty()
        || !p.any_of.is_empty()
        || p.not.is_some()
        || p.additional_properties.is_some()
        || p.pattern_properties
        || p.dependencies
        || p.additional_items
        || p.definitions
        || p.nullable
        || p.x_embedded_resource
        || p.x_int_or_string
        || !p.x_list_map_keys.is_empty()
        || p.x_list_type.is_some()
        || p.x_map_type.is_some();
    let disallowed = FieldError::invalid(
        base,
        BadValue::Json(raw.clone()),
        format!(
            "only {ALLOWED_AT_ROOT} fields are allowed at the root of the schema if the status subresource is enabled"
        ),
    );
    if before_type {
        all.push(disallowed);
    } else if !p.ty.is_empty() && p.ty != "object" {
        all.push(FieldError::invalid(
            child(base, "type"),
            s(&p.ty),
            "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
        ));
    } else if after_type {
        all.push(disallowed);
    }
}

// ---------------------------------------------------------------------------
// NewStructural conversion errors
// ---------------------------------------------------------------------------

fn unsupported(p: &Props) -> Option<String> {
    let e = |k: &str| Some(format!("OpenAPIV3Schema '{k}' is not supported"));
    if !p.id.is_empty() {
        return e("id");
    }
    if !p.schema.is_empty() {
        return e("schema");
    }
    if p.ref_.as_deref().is_some_and(|r| !r.is_empty()) {
        return e("$ref");
    }
    if p.pattern_properties {
        return e("patternProperties");
    }
    if p.dependencies {
        return e("dependencies");
    }
    if p.additional_items {
        return e("additionalItems");
    }
    if p.definitions {
        return e("definitions");
    }
    None
}

fn value_validation_error(p: &Props) -> Option<String> {
    if let Some(n) = &p.not
        && let Some(e) = nested_structural_error(n)
    {
        return Some(e);
    }
    for x in p.all_of.iter().chain(&p.any_of).chain(&p.one_of) {
        if let Some(e) = nested_structural_error(x) {
            return Some(e);
        }
    }
    None
}

fn extensions_error(p: &Props) -> Option<String> {
    if p.x_preserve_unknown_fields == Some(false) {
        return Some(
            "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
                .into(),
        );
    }
    None
}

fn nested_structural_error(p: &Props) -> Option<String> {
    unsupported(p)
        .or_else(|| value_validation_error(p))
        .or_else(|| extensions_error(p))
        .or_else(|| {
            if p.items_is_array {
                return Some("OpenAPIV3Schema 'items' must be a schema, but is an array".into());
            }
            p.items.as_deref().and_then(nested_structural_error)
        })
        .or_else(|| p.properties.values().find_map(nested_structural_error))
        .or_else(|| match &p.additional_properties {
            Some(AdditionalProps::Schema(a)) => nested_structural_error(a),
            _ => None,
        })
}

fn new_structural_error(p: &Props) -> Option<String> {
    unsupported(p)
        .or_else(|| value_validation_error(p))
        .or_else(|| extensions_error(p))
        .or_else(|| {
            if p.items_is_array {
                return Some("OpenAPIV3Schema 'items' must be a schema, but is an array".into());
            }
            p.items.as_deref().and_then(new_structural_error)
        })
        .or_else(|| p.properties.values().find_map(new_structural_error))
        .or_else(|| match &p.additional_properties {
            Some(AdditionalProps::Schema(a)) => new_structural_error(a),
            _ => None,
        })
}

// ---------------------------------------------------------------------------
// structural invariants
// ---------------------------------------------------------------------------

fn is_int_or_string_any_of(p: &Props) -> bool {
    p.any_of.len() == 2 && p.any_of[0].is_bare_type("integer") && p.any_of[1].is_bare_type("string")
}

fn is_int_or_string_all_of(p: &Props) -> bool {
    !p.all_of.is_empty() && is_int_or_string_any_of(&p.all_of[0])
}

fn invariants(p: &Props, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    if p.ty == "array" && p.items.is_none() {
        errs.push(FieldError::required(
            child(path, "items"),
            "must be specified",
        ));
    }
    if let Some(items) = &p.items {
        invariants(items, Level::Item, &child(path, "items"), errs);
    }
    for (k, v) in &p.properties {
        invariants(v, Level::Field, &key(&child(path, "properties"), k), errs);
    }
    if let Some(ap) = &p.additional_properties {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                child(path, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let AdditionalProps::Schema(a) = ap {
            invariants(a, Level::Field, &child(path, "additionalProperties"), errs);
        }
    }
    // extensions
    if p.x_int_or_string && p.preserve_unknown() {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            BadValue::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if p.x_int_or_string && p.x_embedded_resource {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-embedded-resource"),
            BadValue::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = is_int_or_string_any_of(p);
    let skip_first_all_of_any_of = is_int_or_string_all_of(p);
    value_validation(p, skip_any_of, skip_first_all_of_any_of, lvl, path, errs);

    let check_metadata = lvl == Level::Root || p.x_embedded_resource;
    if p.x_embedded_resource && p.ty != "object" {
        let msg = "must be object if x-kubernetes-embedded-resource is true";
        if p.ty.is_empty() {
            errs.push(FieldError::required(child(path, "type"), msg));
        } else {
            errs.push(FieldError::invalid(child(path, "type"), s(&p.ty), msg));
        }
    } else if p.ty.is_empty() && !p.x_int_or_string && !p.preserve_unknown() {
        let msg = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(child(path, "type"), msg));
    }
    if p.x_embedded_resource && p.additional_properties.is_some() {
        errs.push(FieldError::forbidden(
            child(path, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !p.ty.is_empty() && p.ty != "object" {
        errs.push(FieldError::invalid(
            child(path, "type"),
            s(&p.ty),
            "must be object at the root",
        ));
    }
    let pp = child(path, "properties");
    for f in ["kind", "apiVersion"] {
        if let Some(k) = p.properties.get(f)
            && check_metadata
            && k.ty != "string"
        {
            errs.push(FieldError::invalid(
                child(&key(&pp, f), "type"),
                s(&k.ty),
                "must be string",
            ));
        }
    }
    if let Some(m) = p.properties.get("metadata") {
        metadata_invariants(m, check_metadata, lvl, &key(&pp, "metadata"), errs);
    }
    if p.x_embedded_resource && !p.preserve_unknown() && p.properties.is_empty() {
        errs.push(FieldError::required(
            child(path, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn metadata_invariants(m: &Props, check: bool, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    if check && m.ty != "object" {
        errs.push(FieldError::invalid(
            child(path, "type"),
            s(&m.ty),
            "must be object",
        ));
    }
    if lvl == Level::Root {
        let has_name = m.properties.contains_key("name");
        let has_gen = m.properties.contains_key("generateName");
        let n = m.properties.len();
        let props_cleared =
            n == 0 || (has_name && has_gen && n == 2) || ((has_name || has_gen) && n == 1);
        let only_allowed = props_cleared
            && !m.has_value_validation()
            && m.description.is_empty()
            && m.title.is_empty()
            && !m.nullable
            && !m.external_docs
            && m.example.is_none()
            && !m.preserve_unknown()
            && !m.x_embedded_resource
            && !m.x_int_or_string
            && m.x_list_map_keys.is_empty()
            && m.x_list_type.is_none()
            && m.x_map_type.is_none()
            && m.x_validations.is_empty()
            && m.items.is_none()
            && m.additional_properties.is_none();
        if !only_allowed {
            errs.push(FieldError::forbidden(
                path,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
}

fn value_validation(
    p: &Props,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    lvl: Level,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if !skip_any_of {
        for (i, a) in p.any_of.iter().enumerate() {
            nested(a, false, lvl, &index(&child(path, "anyOf"), i), errs);
        }
    }
    for (i, a) in p.all_of.iter().enumerate() {
        nested(
            a,
            skip_first_all_of_any_of && i == 0,
            lvl,
            &index(&child(path, "allOf"), i),
            errs,
        );
    }
    for (i, a) in p.one_of.iter().enumerate() {
        nested(a, false, lvl, &index(&child(path, "oneOf"), i), errs);
    }
    if let Some(n) = &p.not {
        nested(n, false, lvl, &child(path, "not"), errs);
    }
    if !p.pattern.is_empty()
        && let Some(Err(e)) = &p.regex
    {
        errs.push(FieldError::invalid(
            child(path, "pattern"),
            s(&p.pattern),
            format!("must be a valid regular expression, but isn't: {e}"),
        ));
    }
}

fn nested(v: &Props, skip_any_of: bool, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    value_validation(v, skip_any_of, false, lvl, path, errs);
    if let Some(items) = &v.items {
        nested(items, false, lvl, &child(path, "items"), errs);
    }
    for (k, f) in &v.properties {
        nested(
            f,
            false,
            Level::Field,
            &key(&child(path, "properties"), k),
            errs,
        );
    }
    let f = |e: &mut Vec<FieldError>, k: &str, msg: &str| {
        e.push(FieldError::forbidden(child(path, k), msg))
    };
    if !v.ty.is_empty() {
        f(errs, "type", "must be empty to be structural");
    }
    // additionalProperties: false is dropped by the conversion
    if matches!(
        v.additional_properties,
        Some(AdditionalProps::Schema(_)) | Some(AdditionalProps::Bool(true))
    ) {
        f(
            errs,
            "additionalProperties",
            "must be undefined to be structural",
        );
    }
    if v.default.is_some() {
        f(errs, "default", "must be undefined to be structural");
    }
    if !v.title.is_empty() {
        f(errs, "title", "must be empty to be structural");
    }
    if !v.description.is_empty() {
        f(errs, "description", "must be empty to be structural");
    }
    if v.nullable {
        f(errs, "nullable", "must be false to be structural");
    }
    if v.preserve_unknown() {
        f(
            errs,
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        );
    }
    if v.x_embedded_resource {
        f(
            errs,
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        );
    }
    if v.x_int_or_string {
        f(
            errs,
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        );
    }
    if !v.x_list_map_keys.is_empty() {
        f(
            errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if v.x_list_type.is_some() {
        f(
            errs,
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if v.x_map_type.is_some() {
        f(
            errs,
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        );
    }
    if !v.x_validations.is_empty() {
        f(
            errs,
            "x-kubernetes-validations",
            "must be empty to be structural",
        );
    }
    if v.properties.contains_key("metadata") {
        errs.push(FieldError::forbidden(
            key(&child(path, "properties"), "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

// ---------------------------------------------------------------------------
// completeness: everything named in a logical junctor must exist structurally
// ---------------------------------------------------------------------------

fn completeness(root: &Props, path: &str, errs: &mut Vec<FieldError>) {
    vv_completeness(root, root, path, path, errs);
}

fn vv_completeness(v: &Props, s: &Props, s_path: &str, v_path: &str, errs: &mut Vec<FieldError>) {
    if let Some(n) = &v.not {
        nested_completeness(n, Some(s), s_path, &child(v_path, "not"), errs);
    }
    for (i, x) in v.all_of.iter().enumerate() {
        nested_completeness(x, Some(s), s_path, &index(&child(v_path, "allOf"), i), errs);
    }
    for (i, x) in v.any_of.iter().enumerate() {
        nested_completeness(x, Some(s), s_path, &index(&child(v_path, "anyOf"), i), errs);
    }
    for (i, x) in v.one_of.iter().enumerate() {
        nested_completeness(x, Some(s), s_path, &index(&child(v_path, "oneOf"), i), errs);
    }
}

fn nested_completeness(
    v: &Props,
    s: Option<&Props>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path,
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    vv_completeness(v, s, s_path, v_path, errs);
    if let Some(vi) = &v.items {
        nested_completeness(
            vi,
            s.items.as_deref(),
            &child(s_path, "items"),
            &child(v_path, "items"),
            errs,
        );
    }
    for (k, vf) in &v.properties {
        let sp = key(&child(s_path, "properties"), k);
        let vp = key(&child(v_path, "properties"), k);
        match s.properties.get(k) {
            None => errs.push(FieldError::required(
                sp,
                format!("because it is defined in {vp}"),
            )),
            Some(sf) => nested_completeness(vf, Some(sf), &sp, &vp, errs),
        }
    }
}

// ---------------------------------------------------------------------------
// defaults
// ---------------------------------------------------------------------------

fn defaults(p: &Props, path: &str, is_root: bool, inside_meta: bool, errs: &mut Vec<FieldError>) {
    let embedded = p.x_embedded_resource || is_root;
    let inside_meta = if p.x_embedded_resource {
        false
    } else {
        inside_meta
    };
    if let Some(d) = &p.default {
        let dpath = child(path, "default");
        if inside_meta {
            errs.extend(validate_value(p, d, &dpath));
        } else {
            let mut pruned = d.clone();
            prune_value(&mut pruned, p, embedded);
            if !gofmt::deep_equal(&pruned, d) {
                errs.push(FieldError::invalid(
                    &dpath,
                    BadValue::from_json(d),
                    "must not have unknown fields",
                ));
            }
            let coerce = if embedded {
                coerce_type_meta(d, &dpath)
            } else {
                None
            };
            if let Some(e) = coerce {
                errs.push(e);
            } else {
                let meta_errs = validate_embedded_as(d, p, &dpath, embedded);
                if !meta_errs.is_empty() {
                    errs.extend(meta_errs);
                } else {
                    errs.extend(validate_value(p, d, &dpath));
                }
            }
        }
    }
    // additionalProperties are not followed (defaults are forbidden there)
    if let Some(items) = &p.items {
        defaults(items, &child(path, "items"), false, inside_meta, errs);
    }
    for (k, sub) in &p.properties {
        let sub_inside = inside_meta || (embedded && META_FIELDS.contains(&k.as_str()));
        defaults(
            sub,
            &key(&child(path, "properties"), k),
            false,
            sub_inside,
            errs,
        );
    }
}

fn coerce_type_meta(d: &Value, path: &str) -> Option<FieldError> {
    let m = d.as_object()?;
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        if (k == "apiVersion" || k == "kind") && !m[k.as_str()].is_string() {
            return Some(FieldError::invalid(
                child(path, k),
                BadValue::from_json(&m[k.as_str()]),
                "must be a string",
            ));
        }
    }
    None
}

// ---------------------------------------------------------------------------
// ValidateCustomResourceDefinitionOpenAPISchema
// ---------------------------------------------------------------------------

#[derive(Clone)]
struct Ssv {
    allow_defaults: bool,
    disallow_reason: String,
    inside_meta: bool,
}

impl Ssv {
    fn forbid_defaults(&self, reason: &str) -> Ssv {
        Ssv {
            allow_defaults: false,
            disallow_reason: reason.to_string(),
            inside_meta: self.inside_meta,
        }
    }
}

const OPENAPI_V3_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

fn ssv_validate(p: &Props, path: &str, ssv: &Ssv, errs: &mut Vec<FieldError>) {
    if !p.ty.is_empty() && !OPENAPI_V3_TYPES.contains(&p.ty.as_str()) {
        errs.push(FieldError::not_supported(
            child(path, "type"),
            s(&p.ty),
            &OPENAPI_V3_TYPES,
        ));
    }
    if p.default.is_some() && !ssv.allow_defaults {
        let mut detail = "must not be set".to_string();
        if !ssv.disallow_reason.is_empty() {
            detail.push(' ');
            detail.push_str(&ssv.disallow_reason);
        }
        errs.push(FieldError::forbidden(child(path, "default"), detail));
    }
    let f = |e: &mut Vec<FieldError>, k: &str, msg: &str| {
        e.push(FieldError::forbidden(child(path, k), msg))
    };
    if !p.id.is_empty() {
        f(errs, "id", "id is not supported");
    }
    if p.additional_items {
        f(errs, "additionalItems", "additionalItems is not supported");
    }
    if p.pattern_properties {
        f(
            errs,
            "patternProperties",
            "patternProperties is not supported",
        );
    }
    if p.definitions {
        f(errs, "definitions", "definitions is not supported");
    }
    if p.dependencies {
        f(errs, "dependencies", "dependencies is not supported");
    }
    if p.ref_.is_some() {
        f(errs, "$ref", "$ref is not supported");
    }
    if p.ty == "null" {
        f(
            errs,
            "type",
            "type cannot be set to null, use nullable as an alternative",
        );
    }
    if p.items_is_array {
        f(
            errs,
            "items",
            "items must be a schema object and not an array",
        );
    }
    if ssv.inside_meta && p.x_embedded_resource {
        f(
            errs,
            "x-kubernetes-embedded-resource",
            "must not be used inside of resource meta",
        );
    }
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

fn openapi_schema(p: &Props, path: &str, ssv: &Ssv, is_root: bool, errs: &mut Vec<FieldError>) {
    ssv_validate(p, path, ssv, errs);
    if p.unique_items {
        errs.push(FieldError::forbidden(
            child(path, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(ap) = &p.additional_properties {
        if !p.properties.is_empty() && !matches!(ap, AdditionalProps::Bool(true)) {
            errs.push(FieldError::forbidden(
                child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        let sub = if ssv.inside_meta {
            ssv.forbid_defaults("inside additionalProperties applying to object metadata")
        } else {
            ssv.clone()
        };
        if let AdditionalProps::Schema(a) = ap {
            openapi_schema(a, &child(path, "additionalProperties"), &sub, false, errs);
        }
    }
    for (k, sub) in &p.properties {
        let mut subssv = ssv.clone();
        if (is_root || p.x_embedded_resource) && META_FIELDS.contains(&k.as_str()) {
            subssv.inside_meta = true;
            if is_root {
                subssv = subssv.forbid_defaults(&format!("in top-level {k}"));
            }
        }
        openapi_schema(
            sub,
            &key(&child(path, "properties"), k),
            &subssv,
            false,
            errs,
        );
    }
    if let Some(n) = &p.not {
        openapi_schema(n, &child(path, "not"), ssv, false, errs);
    }
    for (name, list) in [
        ("allOf", &p.all_of),
        ("oneOf", &p.one_of),
        ("anyOf", &p.any_of),
    ] {
        for (i, x) in list.iter().enumerate() {
            openapi_schema(x, &index(&child(path, name), i), ssv, false, errs);
        }
    }
    if let Some(items) = &p.items {
        openapi_schema(items, &child(path, "items"), ssv, false, errs);
    }

    if p.x_preserve_unknown_fields == Some(false) {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            BadValue::Bool(false),
            "must be true or undefined",
        ));
    }
    if p.x_map_type.is_some() && p.ty != "object" {
        let msg = "must be object if x-kubernetes-map-type is specified";
        if p.ty.is_empty() {
            errs.push(FieldError::required(child(path, "type"), msg));
        } else {
            errs.push(FieldError::invalid(child(path, "type"), s(&p.ty), msg));
        }
    }
    if let Some(mt) = &p.x_map_type
        && mt != "atomic"
        && mt != "granular"
    {
        errs.push(FieldError::not_supported(
            child(path, "x-kubernetes-map-type"),
            s(mt),
            &["atomic", "granular"],
        ));
    }
    if p.x_list_type.is_some() && p.ty != "array" {
        let msg = "must be array if x-kubernetes-list-type is specified";
        if p.ty.is_empty() {
            errs.push(FieldError::required(child(path, "type"), msg));
        } else {
            errs.push(FieldError::invalid(child(path, "type"), s(&p.ty), msg));
        }
    } else if p.x_list_type.as_deref() == Some("set")
        && let Some(is) = &p.items
    {
        let msg = "must be atomic as item of a list with x-kubernetes-list-type=set";
        match is.ty.as_str() {
            "array" => {
                if let Some(lt) = &is.x_list_type
                    && lt != "atomic"
                {
                    errs.push(FieldError::invalid(
                        child(&child(path, "items"), "x-kubernetes-list-type"),
                        s(lt),
                        msg,
                    ));
                }
            }
            "object" if is.x_map_type.as_deref() != Some("atomic") => {
                // upstream reports the items' list type here (usually unset)
                let bad = match &is.x_list_type {
                    Some(lt) => s(lt),
                    None => BadValue::Json(Value::Null),
                };
                errs.push(FieldError::invalid(
                    child(&child(path, "items"), "x-kubernetes-map-type"),
                    bad,
                    msg,
                ));
            }
            _ => {}
        }
    }
    if let Some(lt) = &p.x_list_type
        && lt != "atomic"
        && lt != "set"
        && lt != "map"
    {
        errs.push(FieldError::not_supported(
            child(path, "x-kubernetes-list-type"),
            s(lt),
            &["atomic", "set", "map"],
        ));
    }
    if !p.x_list_map_keys.is_empty() {
        let msg = "must be map if x-kubernetes-list-map-keys is non-empty";
        match &p.x_list_type {
            None => errs.push(FieldError::required(
                child(path, "x-kubernetes-list-type"),
                msg,
            )),
            Some(lt) if lt != "map" => errs.push(FieldError::invalid(
                child(path, "x-kubernetes-list-type"),
                s(lt),
                msg,
            )),
            _ => {}
        }
    }
    if p.x_list_type.as_deref() == Some("map") {
        if p.x_list_map_keys.is_empty() {
            errs.push(FieldError::required(
                child(path, "x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        if p.items.is_none() && !p.items_is_array {
            errs.push(FieldError::required(
                child(path, "items"),
                "must have a schema if x-kubernetes-list-type is map",
            ));
        }
        if p.items_is_array {
            errs.push(FieldError::invalid(
                child(path, "items"),
                s(""),
                "must only have a single schema if x-kubernetes-list-type is map",
            ));
        }
        if let Some(is) = &p.items {
            if is.ty != "object" {
                errs.push(FieldError::invalid(
                    child(&child(path, "items"), "type"),
                    s(&is.ty),
                    "must be object if parent array's x-kubernetes-list-type is map",
                ));
            } else {
                let keys_json = Value::Array(
                    p.x_list_map_keys
                        .iter()
                        .map(|k| Value::String(k.clone()))
                        .collect(),
                );
                let mut seen = std::collections::HashSet::new();
                for k in &p.x_list_map_keys {
                    match is.properties.get(k) {
                        Some(kp) => {
                            if kp.ty == "array" || kp.ty == "object" {
                                errs.push(FieldError::invalid(
                                    child(&key(&child(&child(path, "items"), "properties"), k), "type"),
                                    s(&is.ty),
                                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                ));
                            }
                        }
                        None => errs.push(FieldError::invalid(
                            child(path, "x-kubernetes-list-map-keys"),
                            BadValue::Json(keys_json.clone()),
                            "entries must all be names of item properties",
                        )),
                    }
                    if !seen.insert(k) {
                        errs.push(FieldError::invalid(
                            child(path, "x-kubernetes-list-map-keys"),
                            BadValue::Json(keys_json.clone()),
                            "must not contain duplicate entries",
                        ));
                    }
                }
            }
        }
    }
    // validateMapListKeysMapSet
    if let (Some(is), Some(lt)) = (&p.items, &p.x_list_type)
        && (lt == "set" || lt == "map")
    {
        let ip = child(path, "items");
        if is.nullable {
            errs.push(FieldError::forbidden(
                child(&ip, "nullable"),
                format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
            ));
        }
        if lt == "map" {
            for k in &p.x_list_map_keys {
                let Some(kp) = is.properties.get(k) else {
                    continue;
                };
                let kpath = key(&child(&ip, "properties"), k);
                if !is.required.contains(k) && kp.default.is_none() {
                    errs.push(FieldError::required(
                        child(&kpath, "default"),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                    ));
                }
                if kp.nullable {
                    errs.push(FieldError::forbidden(
                        child(&kpath, "nullable"),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    ));
                }
            }
        }
    }
    for (i, r) in p.x_validations.iter().enumerate() {
        let rp = index(&child(path, "x-kubernetes-validations"), i);
        let get = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let rule = get("rule");
        let message = get("message");
        let msg_expr = get("messageExpression");
        let (tr, tm) = (rule.trim(), message.trim());
        if tr.is_empty() {
            errs.push(FieldError::required(
                child(&rp, "rule"),
                "rule is not specified",
            ));
        } else if !message.is_empty() && tm.is_empty() {
            errs.push(FieldError::invalid(
                child(&rp, "message"),
                s(&message),
                "must be non-empty if specified",
            ));
        } else if has_newlines(tm) {
            errs.push(FieldError::invalid(
                child(&rp, "message"),
                s(&message),
                "must not contain line breaks",
            ));
        } else if has_newlines(tr) && tm.is_empty() {
            errs.push(FieldError::required(
                child(&rp, "message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if !msg_expr.is_empty() && msg_expr.trim().is_empty() {
            errs.push(FieldError::required(
                child(&rp, "messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = r.get("reason").and_then(Value::as_str) {
            const REASONS: [&str; 4] = [
                "FieldValueDuplicate",
                "FieldValueForbidden",
                "FieldValueInvalid",
                "FieldValueRequired",
            ];
            if !REASONS.contains(&reason) {
                errs.push(FieldError::not_supported(
                    child(&rp, "reason"),
                    s(reason),
                    &REASONS,
                ));
            }
        }
        let fp = get("fieldPath");
        if !fp.is_empty() && fp.trim().is_empty() {
            errs.push(FieldError::invalid(
                child(&rp, "fieldPath"),
                s(&fp),
                "must be non-empty if specified",
            ));
        }
        if has_newlines(&fp) {
            errs.push(FieldError::invalid(
                child(&rp, "fieldPath"),
                s(&fp),
                "must not contain line breaks",
            ));
        }
        if !fp.is_empty() && !field_path_valid(p, &fp) {
            errs.push(FieldError::invalid(
                child(&rp, "fieldPath"),
                s(&fp),
                "must be a valid path",
            ));
        }
    }
}

/// Simplified ValidFieldPath: `.a.b['c'][0]` style paths must resolve in the schema.
fn field_path_valid(p: &Props, fp: &str) -> bool {
    let mut cur = p;
    let mut rest = fp.trim();
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let name = &r[..end];
            if name.is_empty() {
                return false;
            }
            cur = match cur.properties.get(name).or_else(|| cur.additional_schema()) {
                Some(n) => n,
                None => return false,
            };
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let Some(end) = r.find("']") else {
                return false;
            };
            let name = &r[..end];
            cur = match cur.properties.get(name).or_else(|| cur.additional_schema()) {
                Some(n) => n,
                None => return false,
            };
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else { return false };
            if r[..end].parse::<usize>().is_err() {
                return false;
            }
            cur = match cur.items.as_deref() {
                Some(n) => n,
                None => return false,
            };
            rest = &r[end + 1..];
        } else {
            return false;
        }
    }
    true
}
