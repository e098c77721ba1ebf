//! The protobuf encoding of the Swagger 2.0 document, as gnostic's `openapi.v2.Document`
//! message (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`).
//!
//! kubectl (through client-go's discovery client) asks `/openapi/v2` for this media type only
//! and feeds the body to a protobuf decoder, so a JSON answer fails there. Only the parts of
//! the message the documents of [`super::v2`] use are written; field numbers are those of
//! gnostic's `OpenAPIv2.proto`. Values with no typed field (defaults, enums, examples, vendor
//! extensions) go in `Any.yaml` as JSON text (JSON is YAML).

use serde_json::{Map, Value};

/// A protobuf message being written.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire_type));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    /// A proto3 string: the empty string is not written.
    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    /// A proto3 bool: `false` is not written unless `always` (oneof members).
    fn bool(&mut self, field: u32, b: bool, always: bool) {
        if b || always {
            self.key(field, 0);
            self.varint(u64::from(b));
        }
    }

    fn int64(&mut self, field: u32, v: i64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v as u64);
        }
    }

    fn double(&mut self, field: u32, v: f64) {
        if v != 0.0 {
            self.key(field, 1);
            self.0.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// An embedded message (written even when empty: presence matters).
    fn message(&mut self, field: u32, build: impl FnOnce(&mut Message)) {
        let mut inner = Message::default();
        build(&mut inner);
        self.bytes(field, &inner.0);
    }
}

fn str_of<'a>(obj: &'a Map<String, Value>, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn bool_of(obj: &Map<String, Value>, key: &str) -> bool {
    obj.get(key).and_then(Value::as_bool).unwrap_or_default()
}

fn strings(m: &mut Message, field: u32, value: Option<&Value>) {
    match value {
        Some(Value::Array(items)) => {
            for s in items.iter().filter_map(Value::as_str) {
                m.bytes(field, s.as_bytes());
            }
        }
        Some(Value::String(s)) => m.bytes(field, s.as_bytes()),
        _ => {}
    }
}

/// `Any { yaml = 2 }`.
fn any(m: &mut Message, field: u32, value: &Value) {
    let text = serde_json::to_string(value).unwrap_or_default();
    m.message(field, |a| a.string(2, &text));
}

/// `repeated NamedAny vendor_extension`: every `x-` key of `obj`.
fn vendor_extensions(m: &mut Message, field: u32, obj: &Map<String, Value>) {
    for (name, value) in obj.iter().filter(|(k, _)| k.starts_with("x-")) {
        m.message(field, |n| {
            n.string(1, name);
            any(n, 2, value);
        });
    }
}

/// `openapi.v2.Schema`.
fn schema(m: &mut Message, value: &Value) {
    let Some(obj) = value.as_object() else {
        return;
    };
    m.string(1, str_of(obj, "$ref"));
    m.string(2, str_of(obj, "format"));
    m.string(3, str_of(obj, "title"));
    m.string(4, str_of(obj, "description"));
    if let Some(d) = obj.get("default") {
        any(m, 5, d);
    }
    let num = |k: &str| obj.get(k).and_then(Value::as_f64).unwrap_or_default();
    let int = |k: &str| obj.get(k).and_then(Value::as_i64).unwrap_or_default();
    m.double(6, num("multipleOf"));
    m.double(7, num("maximum"));
    m.bool(8, bool_of(obj, "exclusiveMaximum"), false);
    m.double(9, num("minimum"));
    m.bool(10, bool_of(obj, "exclusiveMinimum"), false);
    m.int64(11, int("maxLength"));
    m.int64(12, int("minLength"));
    m.string(13, str_of(obj, "pattern"));
    m.int64(14, int("maxItems"));
    m.int64(15, int("minItems"));
    m.bool(16, bool_of(obj, "uniqueItems"), false);
    m.int64(17, int("maxProperties"));
    m.int64(18, int("minProperties"));
    strings(m, 19, obj.get("required"));
    if let Some(Value::Array(values)) = obj.get("enum") {
        for v in values {
            any(m, 20, v);
        }
    }
    match obj.get("additionalProperties") {
        Some(Value::Bool(b)) => m.message(21, |a| a.bool(2, *b, true)),
        Some(s @ Value::Object(_)) => m.message(21, |a| a.message(1, |x| schema(x, s))),
        _ => {}
    }
    if obj.contains_key("type") {
        m.message(22, |t| strings(t, 1, obj.get("type")));
    }
    match obj.get("items") {
        Some(Value::Array(items)) => m.message(23, |i| {
            for s in items {
                i.message(1, |x| schema(x, s));
            }
        }),
        Some(s @ Value::Object(_)) => m.message(23, |i| i.message(1, |x| schema(x, s))),
        _ => {}
    }
    if let Some(Value::Array(parts)) = obj.get("allOf") {
        for s in parts {
            m.message(24, |x| schema(x, s));
        }
    }
    if let Some(Value::Object(props)) = obj.get("properties") {
        m.message(25, |p| named_schemas(p, props));
    }
    m.string(26, str_of(obj, "discriminator"));
    m.bool(27, bool_of(obj, "readOnly"), false);
    if let Some(e) = obj.get("example") {
        any(m, 30, e);
    }
    vendor_extensions(m, 31, obj);
}

/// `repeated NamedSchema additional_properties = 1` (of `Properties` and `Definitions`).
fn named_schemas(m: &mut Message, schemas: &Map<String, Value>) {
    for (name, s) in schemas {
        m.message(1, |n| {
            n.string(1, name);
            n.message(2, |x| schema(x, s));
        });
    }
}

/// `ParametersItem { Parameter parameter = 1 }`.
fn parameter(m: &mut Message, value: &Value) {
    let Some(p) = value.as_object() else {
        return;
    };
    m.message(1, |param| match str_of(p, "in") {
        "body" => param.message(1, |b| {
            b.string(1, str_of(p, "description"));
            b.string(2, str_of(p, "name"));
            b.string(3, "body");
            b.bool(4, bool_of(p, "required"), false);
            if let Some(s) = p.get("schema") {
                b.message(5, |x| schema(x, s));
            }
            vendor_extensions(b, 6, p);
        }),
        location => param.message(2, |non_body| {
            // QueryParameterSubSchema (3) and PathParameterSubSchema (4) share their first
            // fields; `type` and `uniqueItems` differ by one (query has allow_empty_value = 5).
            let (field, shift) = match location {
                "path" => (4, 1),
                "header" => (1, 1),
                _ => (3, 0),
            };
            non_body.message(field, |q| {
                q.bool(1, bool_of(p, "required"), false);
                q.string(2, location);
                q.string(3, str_of(p, "description"));
                q.string(4, str_of(p, "name"));
                q.string(6 - shift, str_of(p, "type"));
                q.string(7 - shift, str_of(p, "format"));
                q.bool(20 - shift, bool_of(p, "uniqueItems"), false);
                vendor_extensions(q, 23 - shift, p);
            });
        }),
    });
}

/// `openapi.v2.Operation`.
fn operation(m: &mut Message, op: &Map<String, Value>) {
    strings(m, 1, op.get("tags"));
    m.string(2, str_of(op, "summary"));
    m.string(3, str_of(op, "description"));
    m.string(5, str_of(op, "operationId"));
    strings(m, 6, op.get("produces"));
    strings(m, 7, op.get("consumes"));
    if let Some(Value::Array(params)) = op.get("parameters") {
        for p in params {
            m.message(8, |x| parameter(x, p));
        }
    }
    if let Some(Value::Object(responses)) = op.get("responses") {
        m.message(9, |rs| {
            for (code, resp) in responses {
                rs.message(1, |named| {
                    named.string(1, code);
                    named.message(2, |value| {
                        value.message(1, |r| {
                            let empty = Map::new();
                            let resp = resp.as_object().unwrap_or(&empty);
                            r.string(1, str_of(resp, "description"));
                            if let Some(s) = resp.get("schema") {
                                r.message(2, |item| item.message(1, |x| schema(x, s)));
                            }
                            vendor_extensions(r, 5, resp);
                        });
                    });
                });
            }
        });
    }
    strings(m, 10, op.get("schemes"));
    m.bool(11, bool_of(op, "deprecated"), false);
    vendor_extensions(m, 13, op);
}

/// `openapi.v2.PathItem`.
fn path_item(m: &mut Message, item: &Map<String, Value>) {
    for (method, field) in [
        ("get", 2),
        ("put", 3),
        ("post", 4),
        ("delete", 5),
        ("options", 6),
        ("head", 7),
        ("patch", 8),
    ] {
        if let Some(Value::Object(op)) = item.get(method) {
            m.message(field, |x| operation(x, op));
        }
    }
    if let Some(Value::Array(params)) = item.get("parameters") {
        for p in params {
            m.message(9, |x| parameter(x, p));
        }
    }
    vendor_extensions(m, 10, item);
}

/// Encodes a Swagger 2.0 document (as [`super::v2`] writes it) as `openapi.v2.Document`.
pub fn document(doc: &Value) -> Vec<u8> {
    let empty = Map::new();
    let doc = doc.as_object().unwrap_or(&empty);
    let mut m = Message::default();
    m.string(1, str_of(doc, "swagger"));
    if let Some(Value::Object(info)) = doc.get("info") {
        m.message(2, |i| {
            i.string(1, str_of(info, "title"));
            i.string(2, str_of(info, "version"));
            i.string(3, str_of(info, "description"));
        });
    }
    if let Some(Value::Object(paths)) = doc.get("paths") {
        m.message(8, |ps| {
            for (path, item) in paths {
                let Some(item) = item.as_object() else {
                    continue;
                };
                ps.message(2, |named| {
                    named.string(1, path);
                    named.message(2, |x| path_item(x, item));
                });
            }
        });
    }
    if let Some(Value::Object(definitions)) = doc.get("definitions") {
        m.message(9, |d| named_schemas(d, definitions));
    }
    if let Some(Value::Array(requirements)) = doc.get("security") {
        for req in requirements.iter().filter_map(Value::as_object) {
            m.message(12, |r| {
                for (name, scopes) in req {
                    r.message(1, |named| {
                        named.string(1, name);
                        named.message(2, |a| strings(a, 1, Some(scopes)));
                    });
                }
            });
        }
    }
    if let Some(Value::Object(defs)) = doc.get("securityDefinitions") {
        m.message(13, |sd| {
            for (name, def) in defs {
                let Some(def) = def.as_object() else {
                    continue;
                };
                sd.message(1, |named| {
                    named.string(1, name);
                    // Only `apiKey` schemes are written (SecurityDefinitionsItem.api_key_security).
                    named.message(2, |item| {
                        item.message(2, |k| {
                            k.string(1, str_of(def, "type"));
                            k.string(2, str_of(def, "name"));
                            k.string(3, str_of(def, "in"));
                            k.string(4, str_of(def, "description"));
                        });
                    });
                });
            }
        });
    }
    m.0
}
