//! The OpenAPI documents of the served API: `/openapi/v3` (an index), `/openapi/v3/api/v1`
//! and `/openapi/v3/apis/<group>/<version>` (OpenAPI 3.0, one per group version) and
//! `/openapi/v2` (Swagger 2.0, everything; JSON or the protobuf encoding kubectl asks for).
//!
//! This module owns the documents only, generated from the resource catalog and the schemas of
//! the k8s-openapi types, never written by hand; serving them (routing, caching, ETags,
//! content negotiation) is the HTTP layer's job. Everything here is a pure function of a
//! [`Catalog`]; callers cache the results per catalog.
//!
//! What clients rely on (kubectl 1.27–1.33):
//! - every kind has a `patch` operation carrying `x-kubernetes-group-version-kind` and a
//!   `fieldValidation` query parameter: kubectl then leaves field validation to the server;
//! - top-level kinds carry `x-kubernetes-group-version-kind` and all `$ref`s resolve
//!   (`kubectl explain`);
//! - fields with a strategic-merge-patch strategy carry `x-kubernetes-patch-strategy` /
//!   `x-kubernetes-patch-merge-key` (client-side `kubectl apply` computes its patch from the
//!   document when it has one).
//!
//! - [`schemas`]: the schemas (k8s-openapi's, plus list kinds and custom resources).
//! - [`paths`]: the operations of a group version.
//! - [`v3`], [`v2`]: the two dialects; [`protobuf`]: the binary form of the v2 document.

pub mod paths;
pub mod protobuf;
pub mod schemas;
pub mod v2;
pub mod v3;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::registry::Catalog;

/// `info.version` of the documents.
pub const SERVER_VERSION: &str = "v1.33.0";

/// The media type kubectl (client-go) asks `/openapi/v2` for, and the only one it can parse:
/// it decodes the body as protobuf whatever the answer's type.
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// The `Content-Type` of a [`v2_protobuf`] answer. The `@` of [`V2_PROTOBUF`] is not a valid
/// media type character and client-go rejects a response carrying it ("mime: unexpected
/// content after media subtype"), so this is the dotted form kube-apiserver also answers with.
pub const V2_PROTOBUF_CONTENT_TYPE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

fn security_scheme() -> Value {
    json!({
        "type": "apiKey",
        "name": "authorization",
        "in": "header",
        "description": "Bearer Token authentication",
    })
}

/// The key of a group version in the v3 index: `api/v1` or `apis/<group>/<version>`.
pub fn v3_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// All OpenAPI 3 documents of a catalog at once (what a cache wants).
pub struct V3Documents {
    /// `GET /openapi/v3`.
    pub index: Value,
    /// The document of each group version, by [`v3_key`].
    pub documents: BTreeMap<String, Value>,
    /// The hash in each document's `serverRelativeURL`, by [`v3_key`].
    pub hashes: BTreeMap<String, String>,
}

/// Generates the index and every group version document.
pub fn v3_all(catalog: &Catalog) -> V3Documents {
    let components = schemas::Components::new(catalog);
    let mut documents = BTreeMap::new();
    let mut hashes = BTreeMap::new();
    let mut index = serde_json::Map::new();
    for (group, versions) in catalog.groups() {
        for version in versions {
            let key = v3_key(&group, &version);
            let doc = v3::document(
                &components,
                &paths::group_version(catalog, &group, &version),
            );
            let hash = hash(&doc);
            index.insert(
                key.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
            );
            hashes.insert(key.clone(), hash);
            documents.insert(key, doc);
        }
    }
    V3Documents {
        index: json!({"paths": index}),
        documents,
        hashes,
    }
}

/// `GET /openapi/v3`: `{"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=…"},
/// …}}`, the hash being a digest of the document's JSON.
pub fn v3_index(catalog: &Catalog) -> Value {
    v3_all(catalog).index
}

/// `GET /openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`; `None` for a group
/// version the catalog does not serve.
pub fn v3_group_version(catalog: &Catalog, group: &str, version: &str) -> Option<Value> {
    catalog.of(group, version).next()?;
    let components = schemas::Components::new(catalog);
    Some(v3::document(
        &components,
        &paths::group_version(catalog, group, version),
    ))
}

/// `GET /openapi/v2` as JSON.
pub fn v2(catalog: &Catalog) -> Value {
    let components = schemas::Components::new(catalog);
    let mut all = BTreeMap::new();
    for (group, versions) in catalog.groups() {
        for version in versions {
            all.extend(paths::group_version(catalog, &group, &version));
        }
    }
    v2::document(&components, &all)
}

/// `GET /openapi/v2` with `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`
/// ([`V2_PROTOBUF`]; answer with [`V2_PROTOBUF_CONTENT_TYPE`]): the v2 document in the protobuf encoding of gnostic's `openapi.v2.Document`,
/// which is what kubectl parses (it cannot read the JSON form).
pub fn v2_protobuf(catalog: &Catalog) -> Vec<u8> {
    protobuf::document(&v2(catalog))
}

/// A stable digest of a document: FNV-1a (128 bits) of its JSON, in upper-case hex.
pub fn hash(doc: &Value) -> String {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let bytes = serde_json::to_vec(doc).unwrap_or_default();
    let digest = bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u128::from(*b)).wrapping_mul(PRIME));
    format!("{digest:032X}")
}

#[cfg(test)]
mod tests;
