//! Shapes of the message descriptors in [`super::tables`].

/// One protobuf message: its fields, sorted by field number.
pub(super) struct Msg {
    /// `<group dir>.<version>.<Go type>`, for error messages.
    pub name: &'static str,
    pub fields: &'static [Field],
}

/// One field of a message.
pub(super) struct Field {
    pub num: u32,
    /// JSON property name (empty for inlined fields).
    pub name: &'static str,
    pub ty: Ty,
    pub card: Card,
    pub emit: Emit,
}

/// Value type of a field (element type for repeated fields, value type for maps).
///
/// Only the types used by the tables exist; the generator refuses others (unsigned,
/// floating point, `metav1.Duration`), so new ones show up as build errors.
#[derive(Clone, Copy, Debug)]
pub(super) enum Ty {
    Str,
    Bytes,
    Bool,
    I32,
    I64,
    /// Nested message, index into `MESSAGES`.
    Msg(u16),
    /// Named Go slice type wrapped in a message `{ repeated T items = 1; }`; JSON array.
    List(&'static Ty),
    /// `resource.Quantity { string string = 1; }` → JSON string.
    Quantity,
    /// `intstr.IntOrString { int64 type = 1; int32 intVal = 2; string strVal = 3; }`.
    IntOrString,
    /// `runtime.RawExtension { bytes raw = 1; }` → embedded JSON.
    RawExtension,
    /// `metav1.Time { int64 seconds = 1; int32 nanos = 2; }` → RFC 3339, seconds precision.
    Time,
    /// `metav1.MicroTime`, same wire shape as `Time` → RFC 3339 with 6 fractional digits.
    MicroTime,
    /// `metav1.FieldsV1 { bytes Raw = 1; }` → embedded JSON.
    FieldsV1,
}

/// Cardinality of a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Card {
    /// Singular.
    S,
    /// Repeated → JSON array.
    R,
    /// `map<string, T>` (entries: key = 1, value = 2) → JSON object.
    M,
    /// Singular message whose fields are inlined into the parent's JSON object
    /// (Go `json:",inline"`).
    I,
}

/// When a singular field appears in the JSON (mirrors Go's encoding/json of the decoded struct).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Emit {
    /// `omitempty`: omitted when zero; non-pointer structs are still emitted.
    O,
    /// No `omitempty`: always emitted, zero value when absent from the wire.
    A,
    /// Go pointer: emitted iff present on the wire, even when zero.
    P,
}

/// Shorthand constructor used by the generated tables.
pub(super) const fn f(num: u32, name: &'static str, ty: Ty, card: Card, emit: Emit) -> Field {
    Field {
        num,
        name,
        ty,
        card,
        emit,
    }
}
