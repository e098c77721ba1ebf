//! Decoding of `application/vnd.kubernetes.protobuf` request bodies.
//!
//! This module owns turning a Kubernetes protobuf body (the `k8s\0` magic
//! prefix followed by a `runtime.Unknown` envelope whose `raw` field holds the
//! object message) into the JSON form of the same object, as kube-apiserver's
//! Go types would marshal it after decoding. kubectl ≥ 1.32 sends such bodies
//! for `kubectl create <generator>`, `create token`, and other typed-client
//! requests.
//!
//! The decoder is generic: [`tables`] describes every message reachable from
//! the built-in kinds of the stable API groups (plus `meta/v1`) — field
//! number, JSON name, value type, cardinality and Go `omitempty`/pointer
//! semantics — and [`convert`] walks the wire format with it. Special JSON
//! forms (Quantity, Time, MicroTime, IntOrString, RawExtension, FieldsV1,
//! `[]byte` as base64, named-slice wrappers such as `ExtraValue`) are handled
//! there.
//! Unknown field numbers are skipped; malformed input yields a
//! [`ProtobufError`], never a panic.

mod convert;
mod schema;
mod tables;
mod wire;

#[cfg(test)]
mod tests;

use serde_json::Value;

use wire::{LEN, Reader};

/// The four bytes that start every Kubernetes protobuf body.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a protobuf body could not be decoded. Every variant means a bad request.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    #[error("protobuf body does not start with the kubernetes magic prefix \"k8s\\0\"")]
    MissingMagic,
    #[error("protobuf data is truncated inside a {0}")]
    Truncated(&'static str),
    #[error("protobuf varint is longer than 64 bits")]
    VarintOverflow,
    #[error("protobuf field number {0} is invalid")]
    InvalidFieldNumber(u64),
    #[error("protobuf wire type {0} is not supported")]
    InvalidWireType(u8),
    #[error("protobuf field {field} has wire type {got}, expected {expected}")]
    WrongWireType {
        field: String,
        got: u8,
        expected: u8,
    },
    #[error("protobuf messages are nested deeper than {0} levels")]
    TooDeep(usize),
    #[error("protobuf envelope has no {0}")]
    MissingTypeMeta(&'static str),
    #[error("protobuf decoding of kind {kind} in {api_version} is not supported")]
    UnsupportedKind { api_version: String, kind: String },
    #[error("protobuf envelope content encoding {0:?} is not supported")]
    UnsupportedContentEncoding(String),
    #[error("protobuf envelope content type {0:?} is not supported")]
    UnsupportedContentType(String),
    #[error("protobuf envelope raw object is not a json object")]
    RawNotObject,
    #[error("invalid value in protobuf field {field}: {reason}")]
    InvalidValue { field: String, reason: String },
    #[error("internal protobuf decoder error: {0}")]
    Internal(&'static str),
}

/// Decodes a `k8s\0`-prefixed runtime.Unknown envelope and its `raw` object into JSON, with
/// `apiVersion` and `kind` set from the envelope's TypeMeta.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    decode_at_depth(body, 0)
}

/// Whether `(api_version, kind)` has a message table (the decoder may still reject a body).
pub fn supports(api_version: &str, kind: &str) -> bool {
    lookup_kind(api_version, kind).is_some()
}

fn decode_at_depth(body: &[u8], depth: usize) -> Result<Value, ProtobufError> {
    if depth > convert::MAX_DEPTH {
        return Err(ProtobufError::TooDeep(convert::MAX_DEPTH));
    }
    let envelope = body
        .strip_prefix(&MAGIC)
        .ok_or(ProtobufError::MissingMagic)?;
    let unknown = Envelope::parse(envelope)?;
    if unknown.api_version.is_empty() {
        return Err(ProtobufError::MissingTypeMeta("apiVersion"));
    }
    if unknown.kind.is_empty() {
        return Err(ProtobufError::MissingTypeMeta("kind"));
    }
    if !unknown.content_encoding.is_empty() {
        return Err(ProtobufError::UnsupportedContentEncoding(
            unknown.content_encoding,
        ));
    }
    let mut object = match unknown.content_type.as_str() {
        "" | CONTENT_TYPE => {
            let idx = lookup_kind(&unknown.api_version, &unknown.kind).ok_or_else(|| {
                ProtobufError::UnsupportedKind {
                    api_version: unknown.api_version.clone(),
                    kind: unknown.kind.clone(),
                }
            })?;
            convert::message(idx, unknown.raw, depth + 1)?
        }
        "application/json" => match serde_json::from_slice(unknown.raw) {
            Ok(Value::Object(map)) => map,
            _ => return Err(ProtobufError::RawNotObject),
        },
        _ => {
            return Err(ProtobufError::UnsupportedContentType(unknown.content_type));
        }
    };
    object.insert("apiVersion".to_owned(), Value::String(unknown.api_version));
    object.insert("kind".to_owned(), Value::String(unknown.kind));
    Ok(Value::Object(object))
}

/// Finds the message of a top-level kind. `meta/v1` kinds (DeleteOptions, Status, ...) are
/// accepted under any apiVersion, as upstream registers them in every group version.
fn lookup_kind(api_version: &str, kind: &str) -> Option<u16> {
    let find = |av: &str| {
        tables::KINDS
            .binary_search_by(|&(a, k, _)| (a, k).cmp(&(av, kind)))
            .ok()
            .map(|i| tables::KINDS[i].2)
    };
    find(api_version).or_else(|| find("meta.k8s.io/v1"))
}

/// The decoded `runtime.Unknown` envelope.
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
    content_type: String,
}

impl<'a> Envelope<'a> {
    fn parse(data: &'a [u8]) -> Result<Self, ProtobufError> {
        let mut env = Envelope {
            api_version: String::new(),
            kind: String::new(),
            raw: &[],
            content_encoding: String::new(),
            content_type: String::new(),
        };
        let mut r = Reader::new(data);
        while !r.is_empty() {
            let (num, wt) = r.key()?;
            if !(1..=4).contains(&num) {
                r.skip(wt)?;
                continue;
            }
            if wt != LEN {
                return Err(ProtobufError::WrongWireType {
                    field: format!("runtime.Unknown #{num}"),
                    got: wt,
                    expected: LEN,
                });
            }
            let bytes = r.bytes()?;
            let text = || String::from_utf8_lossy(bytes).into_owned();
            match num {
                1 => {
                    let mut tm = Reader::new(bytes);
                    while !tm.is_empty() {
                        match tm.key()? {
                            (1, LEN) => {
                                env.api_version = String::from_utf8_lossy(tm.bytes()?).into_owned()
                            }
                            (2, LEN) => {
                                env.kind = String::from_utf8_lossy(tm.bytes()?).into_owned()
                            }
                            (n @ (1 | 2), got) => {
                                return Err(ProtobufError::WrongWireType {
                                    field: format!("runtime.TypeMeta #{n}"),
                                    got,
                                    expected: LEN,
                                });
                            }
                            (_, wt) => tm.skip(wt)?,
                        }
                    }
                }
                2 => env.raw = bytes,
                3 => env.content_encoding = text(),
                _ => env.content_type = text(),
            }
        }
        Ok(env)
    }
}
