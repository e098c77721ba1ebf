//! What a resource request addresses: `/api/v1/...` and `/apis/<group>/<version>/...` paths
//! split into group, version, namespace, resource, name and subresource, and the query.

use std::collections::HashMap;

/// The parts of a resource path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    /// Empty for the group version's discovery document.
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// What follows `.../NAME/proxy` (`/stats/summary`), for the `proxy` subresource.
    pub proxy_path: Option<String>,
    /// The deprecated `/watch/` path form.
    pub watch_path: bool,
}

/// What a path under `/api` or `/apis` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiPath {
    /// `/api` (core) or `/apis`: group discovery.
    Root { core: bool },
    /// `/apis/<group>`: one group's discovery.
    Group(String),
    /// A group version or something in it.
    Resource(Target),
    /// Not an API path this server knows.
    Unknown,
}

/// Splits a path under `/api` or `/apis`.
pub fn parse(path: &str) -> ApiPath {
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api"] => return ApiPath::Root { core: true },
        ["apis"] => return ApiPath::Root { core: false },
        ["apis", g] => return ApiPath::Group((*g).to_owned()),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return ApiPath::Unknown,
    };
    let mut t = Target {
        group: group.to_owned(),
        version: version.to_owned(),
        ..Default::default()
    };
    let mut rest = rest;
    if rest.first() == Some(&"watch") {
        t.watch_path = true;
        rest = &rest[1..];
    }
    // Empty segments are no path of the API's, except in what a `proxy` subresource forwards.
    let proxy_at = rest
        .iter()
        .enumerate()
        .skip(2)
        .find_map(|(i, s)| (*s == "proxy").then_some(i));
    if rest[..proxy_at.unwrap_or(rest.len())]
        .iter()
        .any(|s| s.is_empty())
    {
        return ApiPath::Unknown;
    }
    let tail = match rest {
        [] => return ApiPath::Resource(t),
        ["namespaces", ns, res, tail @ ..] if !matches!(*res, "status" | "finalize") => {
            t.namespace = Some((*ns).to_owned());
            t.resource = (*res).to_owned();
            tail
        }
        [res, tail @ ..] => {
            t.resource = (*res).to_owned();
            tail
        }
    };
    match tail {
        [] => {}
        [name] => t.name = Some((*name).to_owned()),
        [name, "proxy", ..] => {
            t.name = Some((*name).to_owned());
            t.subresource = Some("proxy".to_owned());
            // What follows `NAME/proxy` in the path as sent, trailing slash included
            // (`pods/web/proxy/` asks for `/`, `.../proxy/a/` for `/a/`).
            let marker = format!("/{}/{name}/proxy", t.resource);
            let after = path
                .find(&marker)
                .map(|i| &path[i + marker.len()..])
                .unwrap_or_default();
            t.proxy_path = Some(if after.is_empty() {
                "/".to_owned()
            } else {
                after.to_owned()
            });
        }
        [name, sub] => {
            t.name = Some((*name).to_owned());
            t.subresource = Some((*sub).to_owned());
        }
        _ => return ApiPath::Unknown,
    }
    ApiPath::Resource(t)
}

/// The labels of a request in the request metrics: upstream's verb (LIST and WATCH for
/// collection reads) and the resource it addressed (empty for non-resource paths).
pub fn metrics_info(
    method: &http::Method,
    path: &str,
    query: Option<&str>,
) -> crate::metrics::RequestInfo {
    let target = match parse(path) {
        ApiPath::Resource(t) => Some(t),
        _ => None,
    };
    let watch = target.as_ref().is_some_and(|t| t.watch_path)
        || flag(&self::query(query), "watch") == Some(true);
    let named = target.as_ref().is_some_and(|t| t.name.is_some());
    let verb = match *method {
        http::Method::GET if target.is_some() && watch => "WATCH",
        http::Method::GET if target.as_ref().is_some_and(|t| !t.resource.is_empty()) && !named => {
            "LIST"
        }
        ref m => m.as_str(),
    };
    let t = target.unwrap_or_default();
    crate::metrics::RequestInfo {
        verb: verb.to_owned(),
        group: t.group,
        version: t.version,
        resource: t.resource,
        subresource: t.subresource.unwrap_or_default(),
    }
}

/// The query string as a map (the last value of a repeated key wins).
pub fn query(q: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(q.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// A boolean query parameter as Go's `strconv.ParseBool` reads it.
pub fn flag(q: &HashMap<String, String>, key: &str) -> Option<bool> {
    q.get(key)
        .map(|v| matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(path: &str) -> Target {
        match parse(path) {
            ApiPath::Resource(t) => t,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn proxy_paths_keep_what_follows_as_sent() {
        let proxy = |p: &str| match parse(p) {
            ApiPath::Resource(t) => (t.name, t.subresource, t.proxy_path),
            other => panic!("{p}: {other:?}"),
        };
        assert_eq!(
            proxy("/api/v1/namespaces/d/pods/https:web:443/proxy/a//b/"),
            (
                Some("https:web:443".into()),
                Some("proxy".into()),
                Some("/a//b/".into())
            )
        );
        assert_eq!(
            proxy("/api/v1/namespaces/d/services/web/proxy")
                .2
                .as_deref(),
            Some("/")
        );
        assert_eq!(
            proxy("/api/v1/namespaces/proxy/pods/web/proxy/")
                .2
                .as_deref(),
            Some("/")
        );
        assert_eq!(
            proxy("/api/v1/nodes/n1/proxy/stats/summary").2.as_deref(),
            Some("/stats/summary")
        );
        assert_eq!(parse("/api/v1/namespaces/d/pods//x"), ApiPath::Unknown);
    }

    #[test]
    fn paths() {
        assert_eq!(parse("/api"), ApiPath::Root { core: true });
        assert_eq!(parse("/apis/"), ApiPath::Root { core: false });
        assert_eq!(parse("/apis/apps"), ApiPath::Group("apps".into()));
        let t = target("/api/v1/namespaces/d/pods/p/status");
        assert_eq!(
            (
                t.namespace.as_deref(),
                t.resource.as_str(),
                t.name.as_deref(),
                t.subresource.as_deref()
            ),
            (Some("d"), "pods", Some("p"), Some("status"))
        );
        let t = target("/api/v1/namespaces/d");
        assert_eq!(
            (t.resource.as_str(), t.name.as_deref(), t.namespace),
            ("namespaces", Some("d"), None)
        );
        let t = target("/api/v1/namespaces/d/finalize");
        assert_eq!(
            (t.name.as_deref(), t.subresource.as_deref()),
            (Some("d"), Some("finalize"))
        );
        let t = target("/apis/apps/v1/watch/namespaces/d/deployments");
        assert!(t.watch_path);
        assert_eq!(
            (t.group.as_str(), t.resource.as_str()),
            ("apps", "deployments")
        );
        let t = target("/apis/apps/v1");
        assert!(t.resource.is_empty());
        assert_eq!(parse("/api/v1/pods/a/b/c"), ApiPath::Unknown);
        assert_eq!(parse("/nope"), ApiPath::Unknown);
    }

    #[test]
    fn metric_verbs() {
        let get = http::Method::GET;
        assert_eq!(
            metrics_info(&get, "/api/v1/namespaces/d/pods", None).verb,
            "LIST"
        );
        assert_eq!(
            metrics_info(&get, "/api/v1/namespaces/d/pods", Some("watch=1")).verb,
            "WATCH"
        );
        let one = metrics_info(&get, "/apis/apps/v1/namespaces/d/deployments/x/scale", None);
        assert_eq!(
            (
                one.verb.as_str(),
                one.group.as_str(),
                one.resource.as_str(),
                one.subresource.as_str()
            ),
            ("GET", "apps", "deployments", "scale")
        );
        assert_eq!(metrics_info(&get, "/version", None).resource, "");
    }

    #[test]
    fn queries() {
        let q = query(Some("labelSelector=app%3Dweb&watch=1&limit=5"));
        assert_eq!(q["labelSelector"], "app=web");
        assert_eq!(flag(&q, "watch"), Some(true));
        assert_eq!(flag(&q, "missing"), None);
    }
}
