//! Content negotiation: which representation a client asked for (`Accept`), and how to read
//! a request body (`Content-Type`).

use serde_json::Value;

use crate::status::ApiError;

/// A response representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Json,
    Yaml,
    /// `meta.k8s.io/v1` Table (`v1beta1` is answered the same way, as upstream does).
    Table,
    /// `PartialObjectMetadata` or `PartialObjectMetadataList`.
    Metadata,
}

/// One media range of an Accept header.
struct MediaRange<'a> {
    essence: &'a str,
    params: Vec<(&'a str, &'a str)>,
}

fn media_ranges(accept: &str) -> impl Iterator<Item = MediaRange<'_>> {
    accept.split(',').map(|part| {
        let mut it = part.split(';').map(str::trim);
        let essence = it.next().unwrap_or("");
        let params = it.filter_map(|p| p.split_once('=')).collect();
        MediaRange { essence, params }
    })
}

/// Picks the representation for `Accept`; `None` when nothing offered is servable (406).
pub fn output(accept: Option<&str>) -> Option<Output> {
    output_among(accept, true)
}

/// Picks the representation for `Accept` at an endpoint that cannot print tables (upstream:
/// a storage without a table convertor, such as the reviews): Table ranges are passed over, so
/// `None` (406) when nothing else is offered.
pub fn output_without_table(accept: Option<&str>) -> Option<Output> {
    output_among(accept, false)
}

fn output_among(accept: Option<&str>, table: bool) -> Option<Output> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Some(Output::Json);
    };
    for r in media_ranges(accept) {
        let param = |k: &str| r.params.iter().find(|(pk, _)| *pk == k).map(|(_, v)| *v);
        match (r.essence, param("as"), param("g")) {
            ("application/json", Some("Table"), Some("meta.k8s.io")) if table => {
                return Some(Output::Table);
            }
            (
                "application/json",
                Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
                Some("meta.k8s.io"),
            ) => return Some(Output::Metadata),
            ("application/json" | "*/*" | "application/*", None, _) => return Some(Output::Json),
            ("application/yaml", None, _) => return Some(Output::Yaml),
            _ => {}
        }
    }
    None
}

/// Whether Accept asks for aggregated discovery; returns its version (`v2` or `v2beta1`).
pub fn aggregated_discovery(accept: Option<&str>) -> Option<&'static str> {
    for r in media_ranges(accept?) {
        let param = |k: &str| r.params.iter().find(|(pk, _)| *pk == k).map(|(_, v)| *v);
        if r.essence == "application/json"
            && param("g") == Some("apidiscovery.k8s.io")
            && param("as") == Some("APIGroupDiscoveryList")
        {
            match param("v") {
                Some("v2") => return Some("v2"),
                Some("v2beta1") => return Some("v2beta1"),
                _ => {}
            }
        }
        if matches!(r.essence, "application/json" | "*/*")
            && r.params.iter().all(|(k, _)| *k == "q")
        {
            // Plain JSON comes before (or instead of) aggregated discovery.
            return None;
        }
    }
    None
}

/// The media type of a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    Json,
    Yaml,
    Protobuf,
}

/// Reads the Content-Type of a create or update (a missing one is JSON).
pub fn input(content_type: Option<&str>) -> Result<Input, ApiError> {
    let essence = content_type
        .and_then(|c| c.split(';').next())
        .map(str::trim)
        .unwrap_or("");
    match essence {
        "" | "application/json" => Ok(Input::Json),
        "application/yaml" | "application/x-yaml" | "text/yaml" => Ok(Input::Yaml),
        "application/vnd.kubernetes.protobuf" => Ok(Input::Protobuf),
        other => Err(unsupported(other)),
    }
}

/// 415 for a body type the server does not read.
pub fn unsupported(media: &str) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {media:?})"
        ),
    )
}

/// Largest nesting depth accepted in a YAML body (JSON has serde_json's own limit of 128).
const MAX_YAML_DEPTH: usize = 128;

/// Decodes a JSON or YAML body into a value (protobuf bodies go to [`k1s_apimachinery::protobuf`]).
pub fn decode(input: Input, body: &[u8]) -> Result<Value, ApiError> {
    match input {
        Input::Json => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded as JSON: {e}"
            ))
        }),
        Input::Yaml => {
            let v: Value = serde_yaml::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!(
                    "the body of the request could not be decoded as YAML: {e}"
                ))
            })?;
            if depth(&v) > MAX_YAML_DEPTH {
                return Err(ApiError::bad_request(
                    "the body of the request is nested too deeply",
                ));
            }
            Ok(v)
        }
        Input::Protobuf => Err(unsupported("application/vnd.kubernetes.protobuf")),
    }
}

fn depth(v: &Value) -> usize {
    // Iterative, so a hostile document cannot overflow the stack here.
    let mut max = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(m) => stack.extend(m.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_kubectl_sends() {
        let get = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(output(Some(get)), Some(Output::Table));
        assert_eq!(output(Some("application/json")), Some(Output::Json));
        assert_eq!(output(None), Some(Output::Json));
        assert_eq!(output(Some("application/yaml")), Some(Output::Yaml));
        assert_eq!(
            output(Some("application/vnd.kubernetes.protobuf, */*")),
            Some(Output::Json)
        );
        assert_eq!(output(Some("application/vnd.kubernetes.protobuf")), None);
        assert_eq!(
            output(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            )),
            Some(Output::Metadata)
        );
        let disc = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_discovery(Some(disc)), Some("v2"));
        assert_eq!(aggregated_discovery(Some("application/json, */*")), None);
    }

    #[test]
    fn endpoints_without_tables_pass_table_ranges_over() {
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
        assert_eq!(output_without_table(Some(table)), None);
        let with_fallback = format!("{table}, application/json");
        assert_eq!(
            output_without_table(Some(&with_fallback)),
            Some(Output::Json)
        );
        assert_eq!(output(Some(&with_fallback)), Some(Output::Table));
        assert_eq!(output_without_table(None), Some(Output::Json));
    }

    #[test]
    fn bodies() {
        assert_eq!(input(None).unwrap(), Input::Json);
        assert_eq!(
            input(Some("application/json; charset=utf-8")).unwrap(),
            Input::Json
        );
        assert_eq!(input(Some("text/plain")).unwrap_err().code, 415);
        assert!(decode(Input::Json, b"{").is_err());
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert_eq!(decode(Input::Json, deep.as_bytes()).unwrap_err().code, 400);
        let deep_yaml = "[".repeat(150) + &"]".repeat(150);
        assert_eq!(
            decode(Input::Yaml, deep_yaml.as_bytes()).unwrap_err().code,
            400
        );
        assert_eq!(decode(Input::Yaml, b"a: 1").unwrap()["a"], 1);
    }
}
