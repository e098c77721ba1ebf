//! The operations of a group version, independent of the OpenAPI dialect they are written in.
//!
//! Paths, operation ids, `x-kubernetes-action` values and query parameters follow
//! kube-apiserver's conventions, since clients find operations by them: an operation id is
//! the action (`list`, `create`, `read`, `replace`, `patch`, `delete`, `deletecollection`,
//! `watch`, `connect`), the group version in camel case, `Namespaced` for namespaced
//! resources, the kind and the subresource, e.g. `patchAppsV1NamespacedDeploymentScale`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::schemas::{self, API_RESOURCE_LIST, DELETE_OPTIONS, PATCH, STATUS, WATCH_EVENT};
use crate::registry::{Catalog, ResourceType, Subresource};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    Get,
    Put,
    Post,
    Delete,
    Patch,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Put => "put",
            Self::Post => "post",
            Self::Delete => "delete",
            Self::Patch => "patch",
        }
    }
}

/// What a body or response holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// A definition, by name.
    Ref(String),
    /// Plain text (logs, streams of connect operations).
    Text,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Location {
    Path,
    Query,
}

impl Location {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Path => "path",
            Self::Query => "query",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Param {
    pub name: &'static str,
    pub location: Location,
    /// `string`, `boolean` or `integer`.
    pub ty: &'static str,
    pub description: String,
    pub required: bool,
    pub unique_items: bool,
}

/// How a request body is encoded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BodyKind {
    /// An object (JSON, YAML or protobuf).
    Object,
    /// A patch; `strategic` says whether strategic merge patch is accepted.
    Patch { strategic: bool },
}

#[derive(Debug, Clone)]
pub struct Body {
    pub payload: Payload,
    pub kind: BodyKind,
    pub required: bool,
}

#[derive(Debug, Clone)]
pub struct Operation {
    pub method: Method,
    pub id: String,
    pub description: String,
    pub tag: String,
    /// `x-kubernetes-action`.
    pub action: &'static str,
    /// `x-kubernetes-group-version-kind`, as `{group, kind, version}`.
    pub gvk: Option<Value>,
    pub params: Vec<Param>,
    pub body: Option<Body>,
    /// Status codes (besides 401) and what they carry.
    pub responses: Vec<(u16, Payload)>,
    /// Whether the response is a watch stream.
    pub watch: bool,
}

#[derive(Debug, Clone, Default)]
pub struct PathItem {
    /// Parameters shared by all operations (path parameters and `pretty`).
    pub params: Vec<Param>,
    pub ops: Vec<Operation>,
}

/// The paths of one group version, by path.
pub fn group_version(catalog: &Catalog, group: &str, version: &str) -> BTreeMap<String, PathItem> {
    let gv = GroupVersion::new(group, version);
    let mut paths: BTreeMap<String, PathItem> = BTreeMap::new();
    // Resource discovery of the group version.
    paths.insert(
        format!("{}/", gv.base),
        PathItem {
            params: Vec::new(),
            ops: vec![Operation {
                method: Method::Get,
                id: format!("get{}APIResources", gv.camel),
                description: "get available resources".into(),
                tag: gv.tag.clone(),
                action: "",
                gvk: None,
                params: Vec::new(),
                body: None,
                responses: vec![(200, Payload::Ref(API_RESOURCE_LIST.into()))],
                watch: false,
            }],
        },
    );
    for r in catalog.of(group, version) {
        resource_paths(&gv, r, &mut paths);
    }
    paths
}

struct GroupVersion {
    /// `/api/v1` or `/apis/<group>/<version>`.
    base: String,
    /// `CoreV1`, `AppsV1`, `RbacAuthorizationV1`, ...
    camel: String,
    /// `core_v1`, `rbacAuthorization_v1`, ...
    tag: String,
}

impl GroupVersion {
    fn new(group: &str, version: &str) -> Self {
        let base = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let short = if group.is_empty() {
            "core"
        } else {
            group.strip_suffix(".k8s.io").unwrap_or(group)
        };
        let group_camel: String = short.split(['.', '-']).map(capitalize).collect();
        let tag = format!("{}_{version}", lower_first(&group_camel));
        Self {
            base,
            camel: format!("{group_camel}{}", capitalize(version)),
            tag,
        }
    }
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_ascii_lowercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

fn param(name: &'static str, location: Location, ty: &'static str, description: &str) -> Param {
    Param {
        name,
        location,
        ty,
        description: description.to_owned(),
        required: location == Location::Path,
        unique_items: ty == "string" && location == Location::Query,
    }
}

fn query(name: &'static str, ty: &'static str, description: &str) -> Param {
    param(name, Location::Query, ty, description)
}

fn pretty() -> Param {
    query(
        "pretty",
        "string",
        "If 'true', the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool.",
    )
}

fn dry_run() -> Param {
    query(
        "dryRun",
        "string",
        "When present, modifications are not persisted. The only valid value is All (process all dry run stages).",
    )
}

/// The parameters of writes: `dryRun`, `fieldManager`, `fieldValidation`.
fn write_params() -> Vec<Param> {
    vec![
        dry_run(),
        query(
            "fieldManager",
            "string",
            "Name of the actor making the change, at most 128 printable characters. Required for apply patches, optional otherwise.",
        ),
        query(
            "fieldValidation",
            "string",
            "What the server does with unknown or duplicate fields in the object: Ignore (drop them silently), Warn (drop them and send a warning header per field) or Strict (fail the request). Defaults to Warn.",
        ),
    ]
}

fn patch_params() -> Vec<Param> {
    let mut params = write_params();
    params.push(query(
        "force",
        "boolean",
        "Force apply requests to take over fields owned by other managers. Must be unset for non-apply patches.",
    ));
    params
}

fn list_params(watch: bool) -> Vec<Param> {
    let mut params = Vec::new();
    if watch {
        params.push(query(
            "allowWatchBookmarks",
            "boolean",
            "Ask for BOOKMARK watch events; the server may send them at its discretion. Ignored by non-watch requests.",
        ));
    }
    params.extend([
        query(
            "continue",
            "string",
            "The continue token of a previous paged list, to get its next chunk.",
        ),
        query(
            "fieldSelector",
            "string",
            "Restrict the returned objects by their fields. Defaults to everything.",
        ),
        query(
            "labelSelector",
            "string",
            "Restrict the returned objects by their labels. Defaults to everything.",
        ),
        query(
            "limit",
            "integer",
            "Maximum number of objects of a list response; when more exist, the list metadata carries a continue token.",
        ),
        query(
            "resourceVersion",
            "string",
            "The resource version the request is served at (the rules depend on resourceVersionMatch). Defaults to the most recent data.",
        ),
        query(
            "resourceVersionMatch",
            "string",
            "How resourceVersion applies to list calls: Exact or NotOlderThan.",
        ),
        query(
            "sendInitialEvents",
            "boolean",
            "With watch=true, start the stream with synthetic ADDED events of all existing objects, followed by a BOOKMARK once they are sent.",
        ),
        query(
            "timeoutSeconds",
            "integer",
            "Time limit of the list or watch call, regardless of activity.",
        ),
    ]);
    if watch {
        params.push(query(
            "watch",
            "boolean",
            "Watch for changes to the described resources and return them as a stream of add, update and remove notifications.",
        ));
    }
    params
}

fn delete_params() -> Vec<Param> {
    vec![
        dry_run(),
        query(
            "gracePeriodSeconds",
            "integer",
            "Seconds before the object is deleted; zero means immediately. Defaults to the kind's default.",
        ),
        query(
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            "boolean",
            "Delete corrupt objects that cannot be read from storage (unsafe).",
        ),
        query(
            "orphanDependents",
            "boolean",
            "Deprecated in favour of propagationPolicy: whether dependents are orphaned.",
        ),
        query(
            "propagationPolicy",
            "string",
            "Whether and how garbage collection is performed: Orphan, Background or Foreground.",
        ),
    ]
}

fn path_params(namespaced: bool, named: Option<&str>) -> Vec<Param> {
    let mut params = Vec::new();
    if let Some(kind) = named {
        params.push(param(
            "name",
            Location::Path,
            "string",
            &format!("name of the {kind}"),
        ));
    }
    if namespaced {
        params.push(param(
            "namespace",
            Location::Path,
            "string",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    params.push(pretty());
    params
}

/// Builds the operations of one resource and its subresources into `paths`.
fn resource_paths(gv: &GroupVersion, r: &ResourceType, paths: &mut BTreeMap<String, PathItem>) {
    let ns = if r.namespaced { "Namespaced" } else { "" };
    let ns_path = if r.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let collection = format!("{}{ns_path}/{}", gv.base, r.plural);
    let item = format!("{collection}/{{name}}");
    let kind_ref = Payload::Ref(schemas::kind_name(r));
    let gvk = Some(schemas::gvk_object(&r.group, &r.version, &r.kind));
    let has = |verb: &str| r.verbs.contains(&verb);
    let kind = &r.kind;
    let op = |method, prefix: &str, suffix: &str, action, description: String| Operation {
        method,
        id: format!("{prefix}{}{suffix}", gv.camel),
        description,
        tag: gv.tag.clone(),
        action,
        gvk: gvk.clone(),
        params: Vec::new(),
        body: None,
        responses: Vec::new(),
        watch: false,
    };
    let object_body = |payload: &Payload| {
        Some(Body {
            payload: payload.clone(),
            kind: BodyKind::Object,
            required: true,
        })
    };
    let patch_body = Some(Body {
        payload: Payload::Ref(PATCH.into()),
        kind: BodyKind::Patch {
            strategic: r.schema.is_some(),
        },
        required: true,
    });
    let delete_body = Some(Body {
        payload: Payload::Ref(DELETE_OPTIONS.into()),
        kind: BodyKind::Object,
        required: false,
    });
    let mut add = |path: &str, shared: Vec<Param>, op: Operation| {
        let entry = paths.entry(path.to_owned()).or_default();
        if entry.params.is_empty() {
            entry.params = shared;
        }
        entry.ops.push(op);
    };

    // The collection.
    let shared = path_params(r.namespaced, None);
    if has("list") {
        let mut o = op(
            Method::Get,
            "list",
            &format!("{ns}{kind}"),
            "list",
            format!("list or watch objects of kind {kind}"),
        );
        o.params = list_params(true);
        o.responses = vec![(200, Payload::Ref(schemas::list_name(r)))];
        add(&collection, shared.clone(), o);
    }
    if has("create") {
        let mut o = op(
            Method::Post,
            "create",
            &format!("{ns}{kind}"),
            "post",
            format!("create a {kind}"),
        );
        o.params = write_params();
        o.body = object_body(&kind_ref);
        o.responses = vec![
            (200, kind_ref.clone()),
            (201, kind_ref.clone()),
            (202, kind_ref.clone()),
        ];
        add(&collection, shared.clone(), o);
    }
    if has("deletecollection") {
        let mut o = op(
            Method::Delete,
            "delete",
            &format!("Collection{ns}{kind}"),
            "deletecollection",
            format!("delete a collection of {kind}"),
        );
        o.params = delete_params();
        o.params.extend(list_params(false));
        o.params.sort_by_key(|p| p.name);
        o.body = delete_body.clone();
        o.responses = vec![(200, Payload::Ref(STATUS.into()))];
        add(&collection, shared.clone(), o);
    }

    // One object.
    let shared = path_params(r.namespaced, Some(kind));
    if has("get") {
        let mut o = op(
            Method::Get,
            "read",
            &format!("{ns}{kind}"),
            "get",
            format!("read the specified {kind}"),
        );
        o.responses = vec![(200, kind_ref.clone())];
        add(&item, shared.clone(), o);
    }
    if has("update") {
        let mut o = op(
            Method::Put,
            "replace",
            &format!("{ns}{kind}"),
            "put",
            format!("replace the specified {kind}"),
        );
        o.params = write_params();
        o.body = object_body(&kind_ref);
        o.responses = vec![(200, kind_ref.clone()), (201, kind_ref.clone())];
        add(&item, shared.clone(), o);
    }
    if has("patch") {
        let mut o = op(
            Method::Patch,
            "patch",
            &format!("{ns}{kind}"),
            "patch",
            format!("partially update the specified {kind}"),
        );
        o.params = patch_params();
        o.body = patch_body.clone();
        o.responses = vec![(200, kind_ref.clone()), (201, kind_ref.clone())];
        add(&item, shared.clone(), o);
    }
    if has("delete") {
        let mut o = op(
            Method::Delete,
            "delete",
            &format!("{ns}{kind}"),
            "delete",
            format!("delete a {kind}"),
        );
        o.params = delete_params();
        o.body = delete_body.clone();
        o.responses = vec![
            (200, Payload::Ref(STATUS.into())),
            (202, Payload::Ref(STATUS.into())),
        ];
        add(&item, shared.clone(), o);
    }

    // Watches (the deprecated `/watch/` paths) and lists across namespaces.
    if has("watch") {
        let watch_collection = format!("{}/watch{ns_path}/{}", gv.base, r.plural);
        let mut o = op(
            Method::Get,
            "watch",
            &format!("{ns}{kind}List"),
            "watchlist",
            format!(
                "watch changes to a list of {kind} (deprecated: use the watch parameter of the list operation)"
            ),
        );
        o.params = list_params(true);
        o.responses = vec![(200, Payload::Ref(WATCH_EVENT.into()))];
        o.watch = true;
        add(&watch_collection, path_params(r.namespaced, None), o);
        let mut o = op(
            Method::Get,
            "watch",
            &format!("{ns}{kind}"),
            "watch",
            format!(
                "watch changes to an object of kind {kind} (deprecated: use the watch parameter of the list operation, filtered by fieldSelector)"
            ),
        );
        o.params = list_params(true);
        o.responses = vec![(200, Payload::Ref(WATCH_EVENT.into()))];
        o.watch = true;
        add(
            &format!("{watch_collection}/{{name}}"),
            path_params(r.namespaced, Some(kind)),
            o,
        );
    }
    if r.namespaced && has("list") {
        let mut o = op(
            Method::Get,
            "list",
            &format!("{kind}ForAllNamespaces"),
            "list",
            format!("list or watch objects of kind {kind} in all namespaces"),
        );
        o.params = list_params(true);
        o.responses = vec![(200, Payload::Ref(schemas::list_name(r)))];
        add(&format!("{}/{}", gv.base, r.plural), vec![pretty()], o);
        if has("watch") {
            let mut o = op(
                Method::Get,
                "watch",
                &format!("{kind}ListForAllNamespaces"),
                "watchlist",
                format!(
                    "watch changes to a list of {kind} in all namespaces (deprecated: use the watch parameter of the list operation)"
                ),
            );
            o.params = list_params(true);
            o.responses = vec![(200, Payload::Ref(WATCH_EVENT.into()))];
            o.watch = true;
            add(
                &format!("{}/watch/{}", gv.base, r.plural),
                vec![pretty()],
                o,
            );
        }
    }

    for s in &r.subresources {
        subresource_paths(gv, r, s, &item, paths);
    }
}

/// Query parameters of the streaming subresources.
fn connect_params(name: &str) -> Vec<Param> {
    let container = || {
        query(
            "container",
            "string",
            "The container to use; defaults to the only container if there is one.",
        )
    };
    let streams = || {
        [
            query(
                "stderr",
                "boolean",
                "Redirect the standard error stream of the container.",
            ),
            query(
                "stdin",
                "boolean",
                "Redirect the standard input stream of the container.",
            ),
            query(
                "stdout",
                "boolean",
                "Redirect the standard output stream of the container.",
            ),
            query("tty", "boolean", "Allocate a terminal for the call."),
        ]
    };
    match name {
        "exec" => {
            let mut p = vec![
                query(
                    "command",
                    "string",
                    "The command to run (one parameter per argument).",
                ),
                container(),
            ];
            p.extend(streams());
            p
        }
        "attach" => {
            let mut p = vec![container()];
            p.extend(streams());
            p
        }
        "portforward" => vec![query(
            "ports",
            "integer",
            "The ports to forward. Required for WebSocket streams.",
        )],
        "log" => vec![
            container(),
            query("follow", "boolean", "Follow the log stream of the pod."),
            query(
                "insecureSkipTLSVerifyBackend",
                "boolean",
                "Skip verifying the serving certificate of the kubelet the logs come from.",
            ),
            query(
                "limitBytes",
                "integer",
                "Number of bytes to read from the server before ending the log output.",
            ),
            query(
                "previous",
                "boolean",
                "Return the logs of the previous, terminated instance of the container.",
            ),
            query(
                "sinceSeconds",
                "integer",
                "Only return logs newer than this many seconds.",
            ),
            query(
                "stream",
                "string",
                "Which stream to return: Stdout, Stderr or All (the default).",
            ),
            query(
                "tailLines",
                "integer",
                "Number of lines from the end of the log to show.",
            ),
            query(
                "timestamps",
                "boolean",
                "Prefix every line of log output with an RFC3339 timestamp.",
            ),
        ],
        _ => Vec::new(),
    }
}

fn subresource_paths(
    gv: &GroupVersion,
    r: &ResourceType,
    s: &Subresource,
    item: &str,
    paths: &mut BTreeMap<String, PathItem>,
) {
    let ns = if r.namespaced { "Namespaced" } else { "" };
    let path = format!("{item}/{}", s.name);
    let (group, version, kind) = s.kind.unwrap_or((&r.group, &r.version, &r.kind));
    let gvk = Some(schemas::gvk_object(group, version, kind));
    let suffix = format!("{ns}{}{}", r.kind, capitalize(s.name));
    let connect = matches!(s.name, "exec" | "attach" | "portforward" | "proxy");
    let text = connect || s.name == "log";
    let payload = if text {
        Some(Payload::Text)
    } else {
        schemas::subresource_kind_name(r, s.kind).map(Payload::Ref)
    };
    let shared = path_params(r.namespaced, Some(&r.kind));
    let entry = paths.entry(path).or_default();
    entry.params = shared;
    let what = format!("{} of the specified {}", s.name, r.kind);
    for verb in s.verbs {
        let (method, id, action, description) = match (*verb, connect) {
            ("get", true) => (
                Method::Get,
                format!("connect{}Get{suffix}", gv.camel),
                "connect",
                format!("connect GET requests to {what}"),
            ),
            ("create", true) => (
                Method::Post,
                format!("connect{}Post{suffix}", gv.camel),
                "connect",
                format!("connect POST requests to {what}"),
            ),
            ("get", false) => (
                Method::Get,
                format!("read{}{suffix}", gv.camel),
                "get",
                format!("read {what}"),
            ),
            ("update", false) => (
                Method::Put,
                format!("replace{}{suffix}", gv.camel),
                "put",
                format!("replace {what}"),
            ),
            ("patch", false) => (
                Method::Patch,
                format!("patch{}{suffix}", gv.camel),
                "patch",
                format!("partially update {what}"),
            ),
            ("create", false) => (
                Method::Post,
                format!("create{}{suffix}", gv.camel),
                "post",
                format!("create {what}"),
            ),
            _ => continue,
        };
        let mut o = Operation {
            method,
            id,
            description,
            tag: gv.tag.clone(),
            action,
            gvk: gvk.clone(),
            params: Vec::new(),
            body: None,
            responses: Vec::new(),
            watch: false,
        };
        if connect || s.name == "log" {
            o.params = connect_params(s.name);
        }
        let Some(payload) = payload.clone() else {
            o.responses = Vec::new();
            entry.ops.push(o);
            continue;
        };
        match method {
            Method::Get => o.responses = vec![(200, payload)],
            Method::Put => {
                o.params = write_params();
                o.body = Some(Body {
                    payload: payload.clone(),
                    kind: BodyKind::Object,
                    required: true,
                });
                o.responses = vec![(200, payload.clone()), (201, payload)];
            }
            Method::Patch => {
                o.params = patch_params();
                o.body = Some(Body {
                    payload: Payload::Ref(PATCH.into()),
                    kind: BodyKind::Patch {
                        strategic: r.schema.is_some(),
                    },
                    required: true,
                });
                o.responses = vec![(200, payload.clone()), (201, payload)];
            }
            Method::Post if connect => o.responses = vec![(200, payload)],
            Method::Post => {
                o.params = write_params();
                o.body = Some(Body {
                    payload: payload.clone(),
                    kind: BodyKind::Object,
                    required: true,
                });
                o.responses = vec![
                    (200, payload.clone()),
                    (201, payload.clone()),
                    (202, payload),
                ];
            }
            Method::Delete => {}
        }
        entry.ops.push(o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_version_names() {
        let gv = GroupVersion::new("", "v1");
        assert_eq!(
            (gv.base.as_str(), gv.camel.as_str(), gv.tag.as_str()),
            ("/api/v1", "CoreV1", "core_v1")
        );
        let gv = GroupVersion::new("rbac.authorization.k8s.io", "v1");
        assert_eq!(gv.camel, "RbacAuthorizationV1");
        assert_eq!(gv.tag, "rbacAuthorization_v1");
        let gv = GroupVersion::new("stable.example.com", "v1beta1");
        assert_eq!(gv.camel, "StableExampleComV1beta1");
        assert_eq!(gv.base, "/apis/stable.example.com/v1beta1");
    }
}
