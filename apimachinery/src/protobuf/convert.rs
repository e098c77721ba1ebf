//! Table-driven conversion of a protobuf message into the JSON that Go's
//! encoding/json would produce for the decoded Kubernetes object.

use base64::Engine as _;
use serde_json::{Map, Value};

use super::ProtobufError;
use super::schema::{Card, Emit, Field, Msg, Ty};
use super::tables::MESSAGES;
use super::wire::{LEN, Reader, VARINT};

/// Maximum message nesting accepted.
pub(super) const MAX_DEPTH: usize = 100;

type Result<T> = std::result::Result<T, ProtobufError>;

/// Decodes `data` as message `MESSAGES[idx]` into a JSON object.
pub(super) fn message(idx: u16, data: &[u8], depth: usize) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    message_into(msg(idx)?, data, depth, &mut out)?;
    Ok(out)
}

fn msg(idx: u16) -> Result<&'static Msg> {
    MESSAGES
        .get(usize::from(idx))
        .ok_or(ProtobufError::Internal("message index out of range"))
}

fn message_into(
    m: &'static Msg,
    data: &[u8],
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep(MAX_DEPTH));
    }
    let mut r = Reader::new(data);
    while !r.is_empty() {
        let (num, wt) = r.key()?;
        let Some(field) = m.fields.iter().find(|f| f.num == num) else {
            r.skip(wt)?;
            continue;
        };
        match field.card {
            Card::S => {
                let existing = out.get_mut(field.name);
                if let (Ty::Msg(idx), Some(Value::Object(obj))) = (field.ty, existing) {
                    // A repeated occurrence of a singular message merges into it.
                    let data = expect_len(&mut r, wt, m, field)?;
                    message_into(msg(idx)?, data, depth + 1, obj)?;
                    continue;
                }
                let value = value(&mut r, wt, field.ty, m, field, depth)?;
                set_single(out, field, value);
            }
            Card::R => {
                let packable = matches!(field.ty, Ty::Bool | Ty::I32 | Ty::I64);
                let mut items = Vec::new();
                if packable && wt == LEN {
                    let mut packed = Reader::new(r.bytes()?);
                    while !packed.is_empty() {
                        if let Some(v) = value(
                            &mut packed,
                            scalar_wire_type(field.ty),
                            field.ty,
                            m,
                            field,
                            depth,
                        )? {
                            items.push(v);
                        }
                    }
                } else if let Some(v) = value(&mut r, wt, field.ty, m, field, depth)? {
                    items.push(v);
                }
                let slot = out
                    .entry(field.name)
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(arr) = slot {
                    arr.extend(items);
                } else {
                    *slot = Value::Array(items);
                }
            }
            Card::M => {
                let entry = expect_len(&mut r, wt, m, field)?;
                let (k, v) = map_entry(entry, field, m, depth)?;
                let slot = out
                    .entry(field.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(obj) = slot {
                    obj.insert(k, v);
                }
            }
            Card::I => {
                let Ty::Msg(idx) = field.ty else {
                    return Err(ProtobufError::Internal("inlined field is not a message"));
                };
                let data = expect_len(&mut r, wt, m, field)?;
                message_into(msg(idx)?, data, depth + 1, out)?;
            }
        }
    }
    defaults(m, out, depth)
}

/// Fills in what Go's encoding/json emits for fields absent from the wire.
fn defaults(m: &'static Msg, out: &mut Map<String, Value>, depth: usize) -> Result<()> {
    for field in m.fields {
        match field.card {
            Card::I => {
                if let Ty::Msg(idx) = field.ty {
                    if depth + 1 > MAX_DEPTH {
                        return Err(ProtobufError::TooDeep(MAX_DEPTH));
                    }
                    defaults(msg(idx)?, out, depth + 1)?;
                }
            }
            Card::S if field.emit != Emit::P && !out.contains_key(field.name) => {
                let value = match (field.ty, field.emit) {
                    (Ty::Msg(idx), _) => Some(Value::Object(message(idx, &[], depth + 1)?)),
                    (_, Emit::A) => zero(field.ty),
                    _ => None,
                };
                if let Some(v) = value {
                    out.insert(field.name.to_owned(), v);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Go's JSON form of a type's zero value, where it has one worth emitting.
fn zero(ty: Ty) -> Option<Value> {
    Some(match ty {
        Ty::Str => Value::String(String::new()),
        Ty::Bool => Value::Bool(false),
        Ty::I32 | Ty::I64 | Ty::IntOrString => Value::from(0),
        Ty::Quantity => Value::String("0".to_owned()),
        _ => return None,
    })
}

fn is_zero(ty: Ty, v: &Value) -> bool {
    match (ty, v) {
        (Ty::Msg(_) | Ty::Quantity | Ty::RawExtension | Ty::FieldsV1, _) => false,
        (_, Value::String(s)) => s.is_empty(),
        (_, Value::Bool(b)) => !b,
        (_, Value::Number(n)) => n.as_f64() == Some(0.0),
        (_, Value::Array(a)) => a.is_empty(),
        (_, Value::Null) => true,
        _ => false,
    }
}

fn set_single(out: &mut Map<String, Value>, field: &Field, value: Option<Value>) {
    let keep = match (&value, field.emit) {
        (None, _) => false,
        (Some(v), Emit::O) => !is_zero(field.ty, v),
        (Some(_), _) => true,
    };
    match value {
        Some(v) if keep => {
            out.insert(field.name.to_owned(), v);
        }
        _ => {
            out.remove(field.name);
        }
    }
}

fn scalar_wire_type(ty: Ty) -> u8 {
    match ty {
        Ty::Bool | Ty::I32 | Ty::I64 => VARINT,
        _ => LEN,
    }
}

fn wrong_wire_type(m: &Msg, field: &Field, got: u8) -> ProtobufError {
    ProtobufError::WrongWireType {
        field: format!("{}.{}", m.name, field_label(field)),
        got,
        expected: scalar_wire_type(field.ty),
    }
}

fn field_label(field: &Field) -> String {
    if field.name.is_empty() {
        format!("#{}", field.num)
    } else {
        field.name.to_owned()
    }
}

fn expect_len<'a>(r: &mut Reader<'a>, wt: u8, m: &Msg, field: &Field) -> Result<&'a [u8]> {
    if wt != LEN {
        return Err(ProtobufError::WrongWireType {
            field: format!("{}.{}", m.name, field_label(field)),
            got: wt,
            expected: LEN,
        });
    }
    r.bytes()
}

fn invalid(m: &Msg, field: &Field, reason: impl Into<String>) -> ProtobufError {
    ProtobufError::InvalidValue {
        field: format!("{}.{}", m.name, field_label(field)),
        reason: reason.into(),
    }
}

/// Reads one value of type `ty` (wire type `wt`). `None` means "unset" (e.g. a zero Time).
fn value(
    r: &mut Reader<'_>,
    wt: u8,
    ty: Ty,
    m: &Msg,
    field: &Field,
    depth: usize,
) -> Result<Option<Value>> {
    if wt != scalar_wire_type(ty) {
        return Err(wrong_wire_type(m, field, wt));
    }
    let v = match ty {
        Ty::Str => Value::String(String::from_utf8_lossy(r.bytes()?).into_owned()),
        Ty::Bytes => Value::String(base64::engine::general_purpose::STANDARD.encode(r.bytes()?)),
        Ty::Bool => Value::Bool(r.varint()? != 0),
        Ty::I32 => Value::from(r.varint()? as i32),
        Ty::I64 => Value::from(r.varint()? as i64),
        Ty::Msg(idx) => Value::Object(message(idx, r.bytes()?, depth + 1)?),
        Ty::List(elem) => list(r.bytes()?, *elem, m, field, depth + 1)?,
        Ty::Quantity => quantity(r.bytes()?)?,
        Ty::IntOrString => int_or_string(r.bytes()?, m, field)?,
        Ty::Time => return timestamp(r.bytes()?, false, m, field),
        Ty::MicroTime => return timestamp(r.bytes()?, true, m, field),
        Ty::RawExtension | Ty::FieldsV1 => return embedded_json(r.bytes()?, m, field, depth),
    };
    Ok(Some(v))
}

/// A map entry message: key = 1 (string), value = 2.
fn map_entry(data: &[u8], field: &Field, m: &Msg, depth: usize) -> Result<(String, Value)> {
    if depth + 1 > MAX_DEPTH {
        return Err(ProtobufError::TooDeep(MAX_DEPTH));
    }
    let mut r = Reader::new(data);
    let mut key = String::new();
    let mut val: Option<Value> = None;
    while !r.is_empty() {
        match r.key()? {
            (1, LEN) => key = String::from_utf8_lossy(r.bytes()?).into_owned(),
            (1, wt) => {
                return Err(ProtobufError::WrongWireType {
                    field: format!("{}.{} (map key)", m.name, field.name),
                    got: wt,
                    expected: LEN,
                });
            }
            (2, wt) => {
                if let (Ty::Msg(idx), Some(Value::Object(obj))) = (field.ty, val.as_mut()) {
                    let data = expect_len(&mut r, wt, m, field)?;
                    message_into(msg(idx)?, data, depth + 2, obj)?;
                } else {
                    val = value(&mut r, wt, field.ty, m, field, depth + 1)?;
                }
            }
            (_, wt) => r.skip(wt)?,
        }
    }
    let val = match val {
        Some(v) => v,
        None => match field.ty {
            Ty::Msg(idx) => Value::Object(message(idx, &[], depth + 2)?),
            Ty::Bytes => Value::String(String::new()),
            Ty::List(_) => Value::Array(Vec::new()),
            ty => zero(ty).unwrap_or(Value::Null),
        },
    };
    Ok((key, val))
}

/// A named slice type's wrapper message `{ repeated T items = 1; }`.
fn list(data: &[u8], elem: Ty, m: &Msg, field: &Field, depth: usize) -> Result<Value> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep(MAX_DEPTH));
    }
    let mut r = Reader::new(data);
    let mut items = Vec::new();
    while !r.is_empty() {
        let (num, wt) = r.key()?;
        if num != 1 {
            r.skip(wt)?;
            continue;
        }
        let packable = scalar_wire_type(elem) != LEN;
        if packable && wt == LEN {
            let mut packed = Reader::new(r.bytes()?);
            while !packed.is_empty() {
                items.extend(value(
                    &mut packed,
                    scalar_wire_type(elem),
                    elem,
                    m,
                    field,
                    depth,
                )?);
            }
        } else {
            items.extend(value(&mut r, wt, elem, m, field, depth)?);
        }
    }
    Ok(Value::Array(items))
}

/// Iterates the fields of a small fixed-shape message (Quantity, Time, ...),
/// rejecting wrong wire types for the numbers listed in `known`.
fn small_fields<'a>(
    data: &'a [u8],
    what: &'static str,
    known: &[(u32, u8)],
    mut each: impl FnMut(u32, &mut Reader<'a>) -> Result<()>,
) -> Result<()> {
    let mut r = Reader::new(data);
    while !r.is_empty() {
        let (num, wt) = r.key()?;
        match known.iter().find(|(n, _)| *n == num) {
            Some(&(_, expected)) if expected == wt => each(num, &mut r)?,
            Some(&(_, expected)) => {
                return Err(ProtobufError::WrongWireType {
                    field: format!("{what}#{num}"),
                    got: wt,
                    expected,
                });
            }
            None => r.skip(wt)?,
        }
    }
    Ok(())
}

fn quantity(data: &[u8]) -> Result<Value> {
    let mut s = String::new();
    small_fields(data, "resource.Quantity", &[(1, LEN)], |_, r| {
        s = String::from_utf8_lossy(r.bytes()?).into_owned();
        Ok(())
    })?;
    if s.is_empty() {
        s.push('0');
    }
    Ok(Value::String(s))
}

fn int_or_string(data: &[u8], m: &Msg, field: &Field) -> Result<Value> {
    let (mut kind, mut int_val, mut str_val) = (0i64, 0i32, String::new());
    small_fields(
        data,
        "intstr.IntOrString",
        &[(1, VARINT), (2, VARINT), (3, LEN)],
        |num, r| {
            match num {
                1 => kind = r.varint()? as i64,
                2 => int_val = r.varint()? as i32,
                _ => str_val = String::from_utf8_lossy(r.bytes()?).into_owned(),
            }
            Ok(())
        },
    )?;
    match kind {
        0 => Ok(Value::from(int_val)),
        1 => Ok(Value::String(str_val)),
        other => Err(invalid(
            m,
            field,
            format!("int-or-string has unknown type {other}"),
        )),
    }
}

fn timestamp(data: &[u8], micro: bool, m: &Msg, field: &Field) -> Result<Option<Value>> {
    if data.is_empty() {
        // Go decodes an empty Time as the zero time, which encodes as JSON null.
        return Ok(None);
    }
    let (mut seconds, mut nanos) = (0i64, 0i32);
    small_fields(
        data,
        "metav1.Time",
        &[(1, VARINT), (2, VARINT)],
        |num, r| {
            if num == 1 {
                seconds = r.varint()? as i64;
            } else {
                nanos = r.varint()? as i32;
            }
            Ok(())
        },
    )?;
    // metav1.Time keeps whole seconds only; MicroTime truncates to microseconds.
    let nanos = if micro {
        i64::from(nanos) / 1000 * 1000
    } else {
        0
    };
    let total = i128::from(seconds) * 1_000_000_000 + i128::from(nanos);
    let secs = total.div_euclid(1_000_000_000);
    let frac = total.rem_euclid(1_000_000_000) as u32;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400) as u32;
    let (y, mo, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return Err(invalid(
            m,
            field,
            format!("timestamp {seconds}s is outside years 0..9999"),
        ));
    }
    let (h, mi, s) = (sod / 3600, sod / 60 % 60, sod % 60);
    let text = if micro {
        format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}Z",
            frac / 1000
        )
    } else {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    };
    Ok(Some(Value::String(text)))
}

/// Proleptic Gregorian (year, month, day) of a count of days since 1970-01-01.
fn civil_from_days(days: i128) -> (i128, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i128::from(mo <= 2);
    (y, mo, d)
}

/// `RawExtension.raw` / `FieldsV1.Raw`: JSON text (or a nested `k8s\0` protobuf object).
fn embedded_json(data: &[u8], m: &Msg, field: &Field, depth: usize) -> Result<Option<Value>> {
    let mut raw: &[u8] = &[];
    small_fields(data, "raw bytes", &[(1, LEN)], |_, r| {
        raw = r.bytes()?;
        Ok(())
    })?;
    if raw.is_empty() {
        return Ok(None);
    }
    if raw.starts_with(&super::MAGIC) {
        return super::decode_at_depth(raw, depth + 1).map(Some);
    }
    serde_json::from_slice(raw)
        .map(Some)
        .map_err(|e| invalid(m, field, format!("embedded object is not valid json: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
