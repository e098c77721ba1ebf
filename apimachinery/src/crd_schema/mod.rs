//! Validation, pruning and defaulting of custom resources against the
//! `openAPIV3Schema` of a CustomResourceDefinition version, following the
//! semantics (and the error wording) of kube-apiextensions-apiserver and
//! kube-openapi's validator, plus the CRD-side checks of the schema itself
//! (structural schema rules, defaults, list/map types).
//!
//! Typical use:
//!
//! ```ignore
//! let schema = Schema::compile_at(&crd_version_schema, "spec.versions[0].schema.openAPIV3Schema")?;
//! // on every create/update request body:
//! let unknown = schema.prune(&mut obj);   // fieldValidation=Warn/Strict
//! schema.default(&mut obj);
//! let errs = schema.validate(&obj);       // plus the generic ObjectMeta/TypeMeta checks
//! ```

mod default;
mod format;
mod gofmt;
mod meta;
mod pattern;
mod props;
mod prune;
mod structural;
mod validate;

#[cfg(test)]
mod tests;

use serde_json::Value;
use std::fmt;

pub use meta::{is_dns1123_label, is_dns1123_subdomain, is_label_value, is_qualified_name};
pub use props::CelRule;
use props::Props;

/// Maximum nesting depth of a schema (counting every sub-schema level:
/// properties, items, additionalProperties, allOf/anyOf/oneOf/not).
pub const MAX_SCHEMA_DEPTH: usize = 100;

/// Maximum nesting depth of an object walked by prune/default/validate.
/// serde_json's parser already stops at 128; this guards values built in code.
pub const MAX_OBJECT_DEPTH: usize = 512;

/// Compiled-regex size limit for `pattern` (bytes of compiled program).
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// The kind of a field error, mirroring apimachinery's `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    TooFew,
    Internal,
    /// "Invalid value" too, but produced by a type mismatch.
    TypeInvalid,
    TooShort,
}

impl ErrorKind {
    /// The `StatusCause.reason` / `field.ErrorType` string, e.g. `FieldValueInvalid`.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "FieldValueNotFound",
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Duplicate => "FieldValueDuplicate",
            ErrorKind::Invalid => "FieldValueInvalid",
            ErrorKind::NotSupported => "FieldValueNotSupported",
            ErrorKind::Forbidden => "FieldValueForbidden",
            ErrorKind::TooLong => "FieldValueTooLong",
            ErrorKind::TooMany => "FieldValueTooMany",
            ErrorKind::TooFew => "FieldValueTooFew",
            ErrorKind::Internal => "InternalError",
            ErrorKind::TypeInvalid => "FieldValueTypeInvalid",
            ErrorKind::TooShort => "FieldValueTooShort",
        }
    }

    /// The human-readable prefix of the error body, e.g. `Invalid value`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "Not found",
            ErrorKind::Required => "Required value",
            ErrorKind::Duplicate => "Duplicate value",
            ErrorKind::Invalid | ErrorKind::TypeInvalid => "Invalid value",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::TooLong => "Too long",
            ErrorKind::TooMany => "Too many",
            ErrorKind::TooFew => "Too few",
            ErrorKind::Internal => "Internal error",
            ErrorKind::TooShort => "Too short",
        }
    }
}

/// The offending value of a field error, with Go's printing rules
/// (`%v` for numbers/bools, `%q` for strings, JSON for everything else).
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    /// Value not printed at all.
    Omit,
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// null, objects and arrays (printed as Go-style JSON).
    Json(Value),
}

impl BadValue {
    /// Converts a JSON value the way Go's unstructured decoding would type it.
    pub fn from_json(v: &Value) -> BadValue {
        match v {
            Value::String(s) => BadValue::Str(s.clone()),
            Value::Bool(b) => BadValue::Bool(*b),
            Value::Number(_) => match gofmt::num(v) {
                Some(gofmt::Num::Int(i)) => BadValue::Int(i),
                Some(gofmt::Num::Float(f)) => BadValue::Float(f),
                None => BadValue::Json(v.clone()),
            },
            other => BadValue::Json(other.clone()),
        }
    }

    fn render(&self) -> Option<String> {
        match self {
            BadValue::Omit => None,
            BadValue::Str(s) => Some(gofmt::quote(s)),
            BadValue::Int(i) => Some(i.to_string()),
            BadValue::Float(f) => Some(gofmt::float_v(*f)),
            BadValue::Bool(b) => Some(b.to_string()),
            BadValue::Json(v) => Some(gofmt::json(v)),
        }
    }
}

/// One validation error, shaped like apimachinery's `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The field path, e.g. `spec.replicas`; `<nil>` for errors upstream reports without a path.
    pub field: String,
    pub kind: ErrorKind,
    pub bad_value: BadValue,
    /// The detail only (no type prefix, no value).
    pub detail: String,
    /// The full error body as upstream prints it (what goes into `StatusCause.message`),
    /// e.g. `Invalid value: "abc": spec.replicas in body must be of type integer: "string"`.
    pub message: String,
}

impl FieldError {
    pub fn new(
        field: impl Into<String>,
        kind: ErrorKind,
        bad_value: BadValue,
        detail: impl Into<String>,
    ) -> FieldError {
        let detail = detail.into();
        let mut message = kind.as_str().to_string();
        let show_value = !matches!(
            kind,
            ErrorKind::Required
                | ErrorKind::Forbidden
                | ErrorKind::TooLong
                | ErrorKind::TooShort
                | ErrorKind::Internal
        );
        if show_value && let Some(v) = bad_value.render() {
            message.push_str(": ");
            message.push_str(&v);
        }
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(&detail);
        }
        FieldError {
            field: field.into(),
            kind,
            bad_value,
            detail,
            message,
        }
    }

    pub fn invalid(field: impl Into<String>, v: BadValue, detail: impl Into<String>) -> Self {
        Self::new(field, ErrorKind::Invalid, v, detail)
    }
    pub fn type_invalid(field: impl Into<String>, v: BadValue, detail: impl Into<String>) -> Self {
        Self::new(field, ErrorKind::TypeInvalid, v, detail)
    }
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(
            field,
            ErrorKind::Required,
            BadValue::Str(String::new()),
            detail,
        )
    }
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(
            field,
            ErrorKind::Forbidden,
            BadValue::Str(String::new()),
            detail,
        )
    }
    pub fn duplicate(field: impl Into<String>, v: BadValue) -> Self {
        Self::new(field, ErrorKind::Duplicate, v, "")
    }
    pub fn not_supported<S: AsRef<str>>(
        field: impl Into<String>,
        v: BadValue,
        valid: &[S],
    ) -> Self {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = valid.iter().map(|s| gofmt::quote(s.as_ref())).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(field, ErrorKind::NotSupported, v, detail)
    }
    pub fn too_long(field: impl Into<String>, max: i64) -> Self {
        let detail = if max >= 0 {
            format!(
                "may not be more than {} {}",
                max,
                if max == 1 { "byte" } else { "bytes" }
            )
        } else {
            "value is too long".to_string()
        };
        Self::new(
            field,
            ErrorKind::TooLong,
            BadValue::Str("<value omitted>".into()),
            detail,
        )
    }
    pub fn too_many(field: impl Into<String>, actual: i64, max: i64) -> Self {
        let detail = if max >= 0 {
            format!(
                "must have at most {} {}",
                max,
                if max == 1 { "item" } else { "items" }
            )
        } else {
            "has too many items".to_string()
        };
        let v = if actual >= 0 {
            BadValue::Int(actual)
        } else {
            BadValue::Omit
        };
        Self::new(field, ErrorKind::TooMany, v, detail)
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// Errors of [`Schema::compile`], in upstream order.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "))]
pub struct CompileErrors(pub Vec<FieldError>);

/// Options for [`Schema::compile_with`].
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// Field path of the schema inside the CRD, used as the prefix of every
    /// compile error, e.g. `spec.versions[0].schema.openAPIV3Schema`.
    pub field_path: String,
    /// Whether the version enables the status subresource (restricts the root
    /// schema to the fields that survive extracting `properties[status]`).
    pub status_subresource: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            field_path: "openAPIV3Schema".to_string(),
            status_subresource: false,
        }
    }
}

/// A compiled schema (compile once per CRD version, use for every request).
#[derive(Debug, Clone)]
pub struct Schema {
    root: Props,
    cel_rules: Vec<CelRule>,
}

impl Schema {
    /// Compiles an `openAPIV3Schema` (a JSONSchemaProps JSON value). Errors are
    /// reported with field paths under `openAPIV3Schema`; use [`Schema::compile_at`]
    /// for the full CRD path.
    pub fn compile(v: &Value) -> Result<Schema, Vec<FieldError>> {
        Self::compile_with(v, &CompileOptions::default())
    }

    /// Like [`Schema::compile`] but with the given field path prefix
    /// (e.g. `spec.versions[0].schema.openAPIV3Schema`).
    pub fn compile_at(v: &Value, field_path: &str) -> Result<Schema, Vec<FieldError>> {
        Self::compile_with(
            v,
            &CompileOptions {
                field_path: field_path.to_string(),
                ..CompileOptions::default()
            },
        )
    }

    /// Full-control compile.
    pub fn compile_with(v: &Value, opts: &CompileOptions) -> Result<Schema, Vec<FieldError>> {
        let root = props::parse(v, &opts.field_path)?;
        let errs = structural::validate_crd_schema(&root, v, opts);
        if !errs.is_empty() {
            return Err(errs);
        }
        let mut cel_rules = Vec::new();
        props::collect_cel_rules(&root, "", &opts.field_path, &mut cel_rules);
        Ok(Schema { root, cel_rules })
    }

    /// `x-kubernetes-validations` rules found in the schema. They are NOT evaluated;
    /// callers should reject the CRD or warn that they are not enforced.
    pub fn cel_rules(&self) -> &[CelRule] {
        &self.cel_rules
    }

    /// Removes fields unknown to the schema (unless under
    /// `x-kubernetes-preserve-unknown-fields`). `apiVersion`, `kind` and `metadata`
    /// at the root are kept untouched; embedded resources keep them too, and unknown
    /// fields of embedded `metadata` are dropped. Returns the sorted pruned paths
    /// (e.g. `spec.foo`, `spec.items[0].bar`) for fieldValidation Warn/Strict
    /// (`unknown field "spec.foo"`).
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        prune::prune_root(obj, &self.root)
    }

    /// Drops non-nullable nulls without default, then applies defaults
    /// (only where the parent exists; array items and additionalProperties too).
    pub fn default(&self, obj: &mut Value) {
        default::prune_non_nullable_nulls(obj, Some(&self.root), 0);
        default::apply_defaults(obj, &self.root, 0);
    }

    /// Prune, then default (the decode path upstream). Returns the pruned paths.
    pub fn prune_and_default(&self, obj: &mut Value) -> Vec<String> {
        let p = self.prune(obj);
        self.default(obj);
        p
    }

    /// Validates the whole object against the schema: OpenAPI value validation,
    /// embedded resources (apiVersion/kind/metadata) and list-type set/map
    /// uniqueness. Root TypeMeta/ObjectMeta are not checked here (generic code does).
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate::validate_value(&self.root, obj, "");
        errs.extend(meta::validate_embedded(obj, &self.root, ""));
        errs.extend(validate::validate_list_types(obj, &self.root, ""));
        errs
    }

    /// Validation of an update (PUT/PATCH of the main resource) with upstream's
    /// ratcheting: schema errors on values unchanged since `old` are ignored, and
    /// list-type uniqueness is only enforced if `old` satisfied it.
    pub fn validate_update(&self, obj: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate::validate_value_update(&self.root, obj, old, "");
        errs.extend(meta::validate_embedded(obj, &self.root, ""));
        if validate::validate_list_types(old, &self.root, "").is_empty() {
            errs.extend(validate::validate_list_types(obj, &self.root, ""));
        }
        errs
    }

    /// Status-subresource update: like [`Schema::validate_status`] with ratcheting.
    pub fn validate_status_update(&self, obj: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let (Some(status), Some(ss)) = (obj.get("status"), self.root.properties.get("status")) {
            errs.extend(match old.get("status") {
                Some(os) => validate::validate_value_update(ss, status, os, "status"),
                None => validate::validate_value(ss, status, "status"),
            });
        }
        let new_ls = validate::validate_list_types(obj, &self.root, "");
        if !new_ls.is_empty() && validate::validate_list_types(old, &self.root, "").is_empty() {
            errs.extend(new_ls);
        }
        errs
    }

    /// Validation for the status subresource: validates only `.status` against
    /// `properties[status]` (upstream builds a separate validator, so messages name
    /// the path relative to status while the field is `status.…`), plus list-type
    /// uniqueness of the whole object.
    pub fn validate_status(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let (Some(status), Some(ss)) = (obj.get("status"), self.root.properties.get("status")) {
            errs.extend(validate::validate_value(ss, status, "status"));
        }
        errs.extend(validate::validate_list_types(obj, &self.root, ""));
        errs
    }

    /// Whether the schema declares the property path (e.g. `["status"]`,
    /// `["spec", "replicas"]`). Walks properties, and additionalProperties
    /// schemas for unknown keys.
    pub fn has_property(&self, path: &[&str]) -> bool {
        self.sub_schema(path).is_some()
    }

    /// The declared `type` of the property at `path` ("" if untyped or unknown),
    /// e.g. to check that `.spec.replicas` is an integer for the scale subresource.
    pub fn property_type(&self, path: &[&str]) -> Option<&str> {
        self.sub_schema(path).map(|p| p.ty.as_str())
    }

    /// Whether the root (or the property at `path`) preserves unknown fields.
    pub fn preserves_unknown_fields(&self, path: &[&str]) -> bool {
        self.sub_schema(path)
            .map(|p| p.x_preserve_unknown_fields == Some(true))
            .unwrap_or(false)
    }

    fn sub_schema(&self, path: &[&str]) -> Option<&Props> {
        let mut cur = &self.root;
        for seg in path {
            cur = match cur.properties.get(*seg) {
                Some(p) => p,
                None => match &cur.additional_properties {
                    Some(props::AdditionalProps::Schema(s)) => s,
                    _ => return None,
                },
            };
        }
        Some(cur)
    }
}

/// Appends a child name to a dotted path.
pub(crate) fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// Appends `[key]` to a path (field.Path.Key / Index).
pub(crate) fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// A path as field.Path.String() prints it, `<nil>` for the nil path.
pub(crate) fn nil_path(path: &str) -> String {
    if path.is_empty() {
        "<nil>".to_string()
    } else {
        path.to_string()
    }
}
