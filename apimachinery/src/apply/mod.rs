//! Server-side apply and field ownership (`metadata.managedFields`), with the semantics of
//! sigs.k8s.io/structured-merge-diff as kube-apiserver 1.33 uses it.
//!
//! - [`apply`] merges an applied configuration into the live object by the type's schema,
//!   records the applier as owner of the fields it applied, removes fields it applied before
//!   and no longer applies (unless someone else owns them), and reports conflicts with other
//!   managers unless forced.
//! - [`record_update`] records an ordinary write (create, update, patch; operation `Update`):
//!   the fields it changed become owned by its manager and are taken from the others.
//!
//! Objects are JSON; the schema of a kind says which lists are atomic, sets or keyed maps
//! and which maps and structs are granular or atomic ([`schema_for`] for built-in kinds,
//! [`schema_from_openapi`] for custom resources).

mod builtin;
mod fieldset;
mod managed;
mod merge;
mod schema;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};

pub use fieldset::{FieldSet, FieldSetError, Path, PathElement, PathElementError, path_to_string};
pub use merge::{ItemError, MergeError};
pub use schema::{Schema, TypeKey, builtin_kinds, schema_for, schema_from_openapi};

use managed::{Entry, Managed, ManagerId, OP_APPLY, OP_UPDATE};
use merge::{Comparison, Sides};

/// The maximum number of `Update` managers kept; older ones merge into `ancient-changes`.
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager that owns the fields of an object nobody managed when it is first applied.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The annotation client-side `kubectl apply` keeps its last applied configuration in.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Fields owned by other managers would change (HTTP 409, reason `Conflict`; one
    /// `FieldManagerConflict` cause per conflict, see [`Conflict::cause_message`]).
    #[error("{}", conflicts_message(.0))]
    Conflicts(Vec<Conflict>),
    /// The applied configuration is not a JSON object (HTTP 400).
    #[error("the applied configuration must be a JSON object")]
    ConfigNotObject,
    /// The applied configuration sets `metadata.managedFields` (HTTP 400).
    #[error("metadata.managedFields must be nil")]
    ManagedFieldsSet,
    /// The object written by an update is not a JSON object (HTTP 400).
    #[error("the object must be a JSON object")]
    ObjectNotObject,
    /// A list of the applied configuration whose items cannot be told apart (HTTP 400): an
    /// item without its key fields, or a duplicated key or set item.
    #[error(transparent)]
    Schema(MergeError),
    /// The applied configuration cannot be merged into the live object (HTTP 400), e.g. a
    /// list of the live object whose items cannot be told apart.
    #[error("failed to merge config: {0}")]
    Merge(#[source] MergeError),
}

/// A field another manager owns and the apply would change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The manager's name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// The API version the manager wrote with (set for `Update` managers).
    pub api_version: String,
    /// The subresource the manager wrote through, `""` for the main resource.
    pub subresource: String,
    /// The field, as upstream prints it: `.spec.replicas`,
    /// `.spec.template.spec.containers[name="c"].image`.
    pub field: String,
}

impl Conflict {
    /// The manager as upstream describes it: `"kubectl"`, `"kubectl" with subresource
    /// "scale" using apps/v1` (Update managers name their API version).
    pub fn describe_manager(&self) -> String {
        let mut s = fieldset::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(
                " with subresource {}",
                fieldset::go_quote(&self.subresource)
            ));
        }
        if self.operation == OP_UPDATE {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    /// The message of this conflict's `StatusCause` (whose `field` is [`Conflict::field`]).
    pub fn cause_message(&self) -> String {
        format!("conflict with {}", self.describe_manager())
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "conflict with {}: {}",
            self.describe_manager(),
            self.field
        )
    }
}

/// The message of a conflict error, as upstream words it.
fn conflicts_message(conflicts: &[Conflict]) -> String {
    if let [c] = conflicts {
        return format!("Apply failed with 1 conflict: {c}");
    }
    let mut lines = Vec::new();
    let mut last: Option<String> = None;
    let mut sorted: Vec<&Conflict> = conflicts.iter().collect();
    sorted.sort_by_key(|c| c.describe_manager());
    for c in sorted {
        let m = c.describe_manager();
        if last.as_ref() != Some(&m) {
            lines.push(format!("conflicts with {m}:"));
            last = Some(m);
        }
        lines.push(format!("- {}", c.field));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Metadata fields nobody owns.
fn strip_set() -> &'static FieldSet {
    static SET: std::sync::LazyLock<FieldSet> = std::sync::LazyLock::new(|| {
        let f = |s: &str| PathElement::Field(s.to_string());
        let mut set = FieldSet::new();
        for top in ["apiVersion", "kind", "metadata"] {
            set.insert(&[f(top)]);
        }
        for m in [
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "clusterName",
            "generation",
            "managedFields",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            set.insert(&[f("metadata"), f(m)]);
        }
        set
    });
    &SET
}

/// The fields a write through `subresource` does not take ownership of: `status` for the
/// main resource of a kind with a status subresource, `spec` for `/status`.
fn reset_fields(schema: &Schema, subresource: Option<&str>) -> FieldSet {
    let mut set = FieldSet::new();
    match subresource {
        None | Some("") if schema.status_subresource() => {
            set.insert(&[PathElement::Field("status".into())])
        }
        Some("status") => set.insert(&[PathElement::Field("spec".into())]),
        _ => {}
    }
    set
}

fn managed_fields_of(obj: &Value) -> Option<&Value> {
    obj.get("metadata").and_then(|m| m.get("managedFields"))
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut o = obj.clone();
    remove_managed_fields(&mut o);
    o
}

fn remove_managed_fields(obj: &mut Value) {
    if let Some(Value::Object(m)) = obj.get_mut("metadata") {
        m.remove("managedFields");
    }
}

fn set_managed_fields(obj: &mut Value, managed: &Managed) {
    let encoded = managed::encode(managed);
    let Value::Object(o) = obj else { return };
    match encoded {
        Some(v) => {
            let meta = o
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if !meta.is_object() {
                *meta = Value::Object(Map::new());
            }
            if let Value::Object(m) = meta {
                m.insert("managedFields".to_string(), v);
            }
        }
        None => {
            if let Some(Value::Object(m)) = o.get_mut("metadata") {
                m.remove("managedFields");
            }
        }
    }
}

/// Updates the ownership of other managers for the change from `old` to `new` made by
/// `workflow` (`None`: a manager not in `managers`): fields it modified or added are taken
/// from them (a conflict unless `force`), and fields it removed are no longer owned by anyone.
#[allow(clippy::too_many_arguments)]
fn update_managers(
    schema: &Schema,
    old: &Value,
    new: &Value,
    sides: Sides,
    managers: &mut Managed,
    workflow: Option<&ManagerId>,
    force: bool,
    ignored: &FieldSet,
) -> Result<Comparison, Vec<Conflict>> {
    let mut cmp = Comparison::default();
    merge::compare(
        schema,
        schema.root(),
        Some(old),
        Some(new),
        sides,
        &mut Vec::new(),
        &mut cmp,
    );
    cmp.exclude(ignored);
    let mut conflicts: Vec<(ManagerId, FieldSet)> = Vec::new();
    // What changed, built only if another manager could own some of it (not on a create).
    let mut changed: Option<FieldSet> = None;
    for (id, entry) in managers.iter() {
        if Some(id) == workflow {
            continue;
        }
        let changed = changed.get_or_insert_with(|| cmp.modified.union(&cmp.added));
        let c = entry.set.intersection(changed);
        if !c.is_empty() {
            conflicts.push((id.clone(), c));
        }
    }
    if !force && !conflicts.is_empty() {
        let mut out = Vec::new();
        for (id, set) in &conflicts {
            let Some(entry) = managers.get(id) else {
                continue;
            };
            for p in set.paths() {
                out.push(Conflict {
                    manager: id.manager.clone(),
                    operation: if entry.applied {
                        OP_APPLY
                    } else {
                        id.operation
                    }
                    .to_string(),
                    api_version: entry.api_version.clone(),
                    subresource: id.subresource.clone(),
                    field: path_to_string(&p),
                });
            }
        }
        return Err(out);
    }
    for (id, set) in &conflicts {
        if let Some(e) = managers.get_mut(id) {
            e.set.subtract(set);
        }
    }
    if !cmp.removed.is_empty() {
        for (id, e) in managers.iter_mut() {
            if Some(id) != workflow {
                e.set.subtract(&cmp.removed);
            }
        }
    }
    managers.retain(|_, e| !e.set.is_empty());
    Ok(cmp)
}

/// Removes what the applier applied last time and no longer applies, unless another manager
/// (or the new configuration) still owns it.
fn prune(schema: &Schema, merged: Value, managers: &Managed, last: Option<&FieldSet>) -> Value {
    let Some(last) = last.filter(|l| !l.is_empty()) else {
        return merged;
    };
    let root = schema.root();
    let named = |set: &FieldSet| merge::ensure_named_fields_are_members(schema, root, set);
    let fields_of = |v: &Value| named(&merge::to_field_set(schema, root, v));
    let remove = |v: &Value, set: &FieldSet| {
        merge::remove_items(schema, root, v, set).unwrap_or_else(|| Value::Object(Map::new()))
    };
    let last = named(last);
    let pruned = remove(&merged, &last);
    // Add back what anyone owns.
    let mut owned = FieldSet::new();
    for e in managers.values() {
        owned.union_with(&e.set);
    }
    let merged_set = fields_of(&merged);
    let pruned = remove(
        &merged,
        &merged_set.difference(&fields_of(&pruned).union(&named(&owned))),
    );
    // Only remove what the applier owned before.
    let pruned_set = fields_of(&pruned);
    remove(
        &merged,
        &merged_set.difference(&pruned_set).intersection(&last),
    )
}

/// Server-side apply of `config` by `manager` onto `live` (`None`: the object is created).
///
/// Returns the merged object with `metadata.managedFields` updated. `api_version` is the
/// version of the request (`apps/v1`); `subresource` is `None` for the main resource;
/// `now` is the RFC 3339 time recorded for the applier when the object changes.
///
/// The caller still sets server fields (resourceVersion, uid, ...), applies defaults,
/// validates, and for a kind with a status subresource keeps the live `status` on main
/// resource writes (the applier does not own it).
///
/// As upstream, `kubectl` migrating from client-side apply may take over conflicting fields
/// whose live values still match the `kubectl.kubernetes.io/last-applied-configuration`
/// annotation.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    schema: &Schema,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    force: bool,
    now: &str,
) -> Result<Value, ApplyError> {
    match apply_once(
        schema,
        live,
        config,
        manager,
        api_version,
        subresource,
        force,
        now,
    ) {
        Err(ApplyError::Conflicts(conflicts)) if manager == "kubectl" => {
            let Some(allowed) =
                live.and_then(|l| allowed_conflicts_from_last_applied(schema, l, api_version))
            else {
                return Err(ApplyError::Conflicts(conflicts));
            };
            let remaining: Vec<Conflict> = conflicts
                .into_iter()
                .filter(|c| !allowed.contains(&c.field))
                .collect();
            if remaining.is_empty() {
                apply_once(
                    schema,
                    live,
                    config,
                    manager,
                    api_version,
                    subresource,
                    true,
                    now,
                )
            } else {
                Err(ApplyError::Conflicts(remaining))
            }
        }
        r => r,
    }
}

/// The fields of the last client-side applied configuration whose live values still match it.
fn allowed_conflicts_from_last_applied(
    schema: &Schema,
    live: &Value,
    api_version: &str,
) -> Option<HashSet<String>> {
    let text = live
        .get("metadata")?
        .get("annotations")?
        .get(LAST_APPLIED_ANNOTATION)?
        .as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    if !last.is_object() || last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return None;
    }
    let root = schema.root();
    merge::validate(schema, root, &last, &mut Vec::new()).ok()?;
    let mut typed_live = live.clone();
    merge::fill_present(schema, root, &mut typed_live);
    let mut cmp = Comparison::default();
    merge::compare(
        schema,
        root,
        Some(&last),
        Some(&typed_live),
        Sides::AS_GIVEN,
        &mut Vec::new(),
        &mut cmp,
    );
    let allowed = merge::to_field_set(schema, root, &last)
        .difference(&cmp.modified)
        .difference(&cmp.added)
        .difference(&cmp.removed);
    Some(allowed.paths().iter().map(|p| path_to_string(p)).collect())
}

#[allow(clippy::too_many_arguments)]
fn apply_once(
    schema: &Schema,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    force: bool,
    now: &str,
) -> Result<Value, ApplyError> {
    if !config.is_object() {
        return Err(ApplyError::ConfigNotObject);
    }
    if managed_fields_of(config).is_some_and(|m| !m.is_null()) {
        return Err(ApplyError::ManagedFieldsSet);
    }
    let root = schema.root();
    merge::validate(schema, root, config, &mut Vec::new()).map_err(ApplyError::Schema)?;
    let live_obj = match live {
        Some(l) if l.is_object() => without_managed_fields(l),
        _ => Value::Object(Map::new()),
    };
    // Invalid managedFields on the live object are reset (upstream fails the request).
    let mut managers = live
        .map(|l| managed::decode(managed_fields_of(l)).unwrap_or_default())
        .unwrap_or_default();
    let applier = ManagerId::new(manager, OP_APPLY, api_version, subresource);
    let ignored = reset_fields(schema, subresource);
    let mut typed_live = live_obj.clone();
    merge::fill_present(schema, root, &mut typed_live);
    if managers.is_empty() {
        // Fields of an object nobody manages yet belong to `before-first-apply`.
        let mut empty = Value::Object(Map::new());
        merge::fill_present(schema, root, &mut empty);
        let id = ManagerId::new(BEFORE_FIRST_APPLY, OP_UPDATE, api_version, subresource);
        record_changes(
            schema,
            &empty,
            &typed_live,
            Sides::AS_GIVEN,
            &mut managers,
            id,
            api_version,
            now,
            &ignored,
        );
    }
    let last = managers.get(&applier).map(|e| e.set.clone());
    let set = merge::to_field_set(schema, root, config).recursive_difference(&ignored);
    let time = managers.get(&applier).and_then(|e| e.time.clone());
    managers.insert(
        applier.clone(),
        Entry {
            set,
            api_version: api_version.to_string(),
            applied: true,
            time,
        },
    );
    let merge_prune = |live: &Value| -> Result<Value, ApplyError> {
        let merged = merge::merge(schema, root, Some(live), Some(config), &mut Vec::new())
            .map_err(ApplyError::Merge)?
            .unwrap_or_else(|| Value::Object(Map::new()));
        Ok(prune(schema, merged, &managers, last.as_ref()))
    };
    // Ownership is computed on the object as upstream types it (fields Go always has present);
    // the result keeps the object's own shape.
    let typed_new = merge_prune(&typed_live)?;
    let mut new = merge_prune(&live_obj)?;
    update_managers(
        schema,
        &typed_live,
        &typed_new,
        Sides::AS_GIVEN,
        &mut managers,
        Some(&applier),
        force,
        &ignored,
    )
    .map_err(ApplyError::Conflicts)?;
    merge::drop_nulls(schema, root, &mut new);
    let changed = !fieldset::values_equal(&new, &live_obj);

    strip_manager(&mut managers, &applier);
    if changed && let Some(e) = managers.get_mut(&applier) {
        e.time = Some(now.to_string());
    }
    if manager == "kubectl" {
        update_last_applied(&mut new, config);
    }
    set_managed_fields(&mut new, &managers);
    Ok(new)
}

/// Removes the metadata fields nobody owns from a manager's set.
fn strip_manager(managers: &mut Managed, id: &ManagerId) {
    if let Some(e) = managers.get_mut(id) {
        e.set.subtract(strip_set());
        if e.set.is_empty() {
            managers.remove(id);
        }
    }
}

/// Keeps the client-side apply annotation current when `kubectl` applies server-side.
fn update_last_applied(obj: &mut Value, config: &Value) {
    let has = obj
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(LAST_APPLIED_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if !has {
        return;
    }
    let mut applied = config.clone();
    if let Some(Value::Object(a)) = applied
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
    {
        a.remove(LAST_APPLIED_ANNOTATION);
    }
    let text = serde_json::to_string(&applied).unwrap_or_default();
    if let Some(Value::Object(a)) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
    {
        a.insert(LAST_APPLIED_ANNOTATION.to_string(), Value::String(text));
    }
}

/// Records an ordinary write by `manager` (operation `Update`): fields changed from `old`
/// (`None`: a create) to `new` become owned by `manager` and are no longer owned by others;
/// fields removed are no longer owned by anyone. Sets `new`'s `metadata.managedFields`.
///
/// `managedFields` sent in `new` are used if valid and non-empty (otherwise those of `old`);
/// `[]` or `[{}]` clears them (and, as upstream, an existing object — one with a uid — whose
/// managedFields are empty is not tracked until it is applied). On subresources the body's
/// managedFields are ignored. An empty `manager` is recorded as `unknown`; upstream derives
/// the default from the user agent, which is the caller's job.
///
/// For the scale subresource, pass the parent object before and after the change, the
/// parent's API version and `Some("scale")`.
pub fn record_update(
    schema: &Schema,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    now: &str,
) -> Result<(), ApplyError> {
    if !new.is_object() {
        return Err(ApplyError::ObjectNotObject);
    }
    let on_subresource = subresource.is_some_and(|s| !s.is_empty());
    let decode_old = || {
        old.map(|o| managed::decode(managed_fields_of(o)).unwrap_or_default())
            .unwrap_or_default()
    };
    let mut managers = if on_subresource {
        decode_old()
    } else if managed::is_reset(managed_fields_of(new)) {
        Managed::new()
    } else {
        match managed::decode(managed_fields_of(new)) {
            Ok(m) if !m.is_empty() => m,
            _ => decode_old(),
        }
    };
    remove_managed_fields(new);
    let old_uid = old
        .and_then(|o| o.get("metadata"))
        .and_then(|m| m.get("uid"))
        .and_then(Value::as_str);
    if managers.is_empty() && old_uid.is_some_and(|u| !u.is_empty()) {
        // As upstream: an existing object nobody manages is not tracked until it is applied.
        return Ok(());
    }
    let old_obj = match old {
        Some(o) if o.is_object() => without_managed_fields(o),
        _ => Value::Object(Map::new()),
    };
    let ignored = reset_fields(schema, subresource);
    let id = ManagerId::new(manager, OP_UPDATE, api_version, subresource);
    // Compared as upstream types them (see `merge::fill_present`), without filled copies.
    record_changes(
        schema,
        &old_obj,
        new,
        Sides::TYPED,
        &mut managers,
        id,
        api_version,
        now,
        &ignored,
    );
    set_managed_fields(new, &managers);
    Ok(())
}

/// Records the change from `old` to `new` (seen as `sides` says) as made by the Update
/// manager `id`.
#[allow(clippy::too_many_arguments)]
fn record_changes(
    schema: &Schema,
    old: &Value,
    new: &Value,
    sides: Sides,
    managers: &mut Managed,
    id: ManagerId,
    api_version: &str,
    now: &str,
    ignored: &FieldSet,
) {
    // Forced: never conflicts. The comparison already leaves out `ignored`.
    let cmp =
        update_managers(schema, old, new, sides, managers, None, true, ignored).unwrap_or_default();
    let mut set = if cmp.modified.is_empty() {
        cmp.added
    } else {
        let mut set = cmp.modified;
        set.union_with(&cmp.added);
        set
    };
    set.subtract(strip_set());
    if !set.is_empty() {
        let set = match managers.remove(&id) {
            Some(prev) => set.union(&prev.set),
            None => set,
        };
        managers.insert(
            id,
            Entry {
                set,
                api_version: api_version.to_string(),
                applied: false,
                time: Some(now.to_string()),
            },
        );
    }
    managed::cap_update_managers(managers, MAX_UPDATE_MANAGERS);
}
