//! The protobuf wire format: a byte reader (varints, length-delimited and fixed fields), and
//! the walk of one message against a field table into its JSON form, with Go's zero-value rules
//! and the errors that name an unknown set field.

use serde_json::{Map, Value, json};

use super::{Field, Kind};
use crate::api::error::ApiError;

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = usize::try_from(self.varint()?).map_err(|_| "length overflow")?;
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or("truncated field")?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn skip(&mut self, wire: u64) -> Result<(), String> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.bytes().map(|_| ()),
            5 => self.advance(4),
            w => Err(format!("unsupported wire type {w}")),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), String> {
        self.fixed(n).map(|_| ())
    }

    fn fixed(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.pos + n > self.buf.len() {
            return Err("truncated fixed field".into());
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
}

fn string(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "string is not UTF-8".to_string())
}

/// Why a body did not decode.
pub(super) enum DecodeError {
    /// Not well-formed protobuf.
    Malformed(String),
    /// A set field no table lists, by JSON path and field number.
    Unknown(String),
}

impl From<String> for DecodeError {
    fn from(e: String) -> Self {
        DecodeError::Malformed(e)
    }
}

impl From<&str> for DecodeError {
    fn from(e: &str) -> Self {
        DecodeError::Malformed(e.to_string())
    }
}

impl DecodeError {
    pub(super) fn into_api(self, bad: &dyn Fn(&str) -> ApiError) -> ApiError {
        match self {
            DecodeError::Malformed(e) => bad(&e),
            DecodeError::Unknown(path) => ApiError::unsupported_media_type(format!(
                "the simulated server does not decode the protobuf field {path}; send application/json"
            )),
        }
    }
}

fn map_entry(b: &[u8], value: Kind) -> Result<(String, Value), String> {
    use base64::Engine;
    let mut r = Reader { buf: b, pos: 0 };
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    while r.pos < b.len() {
        let tag = r.varint()?;
        match (tag >> 3, tag & 7) {
            (1, 2) => k = string(r.bytes()?)?,
            (2, 2) => {
                let raw = r.bytes()?;
                v = match value {
                    Kind::MapBytes => json!(base64::engine::general_purpose::STANDARD.encode(raw)),
                    Kind::MapQty => json!(quantity(raw)?),
                    _ => json!(string(raw)?),
                };
            }
            (_, w) => r.skip(w)?,
        }
    }
    Ok((k, v))
}

/// The string form of a `resource.Quantity` message (`optional string string = 1`).
fn quantity(b: &[u8]) -> Result<String, String> {
    let mut r = Reader { buf: b, pos: 0 };
    let mut out = String::new();
    while r.pos < b.len() {
        let tag = r.varint()?;
        match (tag >> 3, tag & 7) {
            (1, 2) => out = string(r.bytes()?)?,
            (_, w) => r.skip(w)?,
        }
    }
    Ok(out)
}

/// Whether a length-delimited payload is the zero value: empty, or a message whose fields are
/// all zero (Go writes empty strings, zero ints and empty structs of non-pointer fields).
fn all_zero(b: &[u8]) -> bool {
    let mut r = Reader { buf: b, pos: 0 };
    while r.pos < b.len() {
        let Ok(tag) = r.varint() else { return false };
        let zero = match tag & 7 {
            0 => r.varint().is_ok_and(|v| v == 0),
            1 => r.fixed(8).is_ok_and(|f| f.iter().all(|x| *x == 0)),
            5 => r.fixed(4).is_ok_and(|f| f.iter().all(|x| *x == 0)),
            2 => r.bytes().is_ok_and(all_zero),
            _ => false,
        };
        if !zero {
            return false;
        }
    }
    true
}

pub(super) fn message(b: &[u8], fields: &[Field], path: &str) -> Result<Value, DecodeError> {
    let mut out = Map::new();
    message_into(b, fields, path, &mut out)?;
    Ok(Value::Object(out))
}

fn message_into(b: &[u8], fields: &[Field], path: &str, out: &mut Map<String, Value>) -> Result<(), DecodeError> {
    use base64::Engine;
    let mut r = Reader { buf: b, pos: 0 };
    while r.pos < b.len() {
        let tag = r.varint()?;
        let (num, wire) = (tag >> 3, tag & 7);
        let Some((_, name, kind)) = fields.iter().find(|(n, _, _)| u64::from(*n) == num) else {
            let zero = match wire {
                0 => r.varint()? == 0,
                2 => all_zero(r.bytes()?),
                1 => r.fixed(8)?.iter().all(|x| *x == 0),
                5 => r.fixed(4)?.iter().all(|x| *x == 0),
                w => return Err(format!("unsupported wire type {w}").into()),
            };
            if zero {
                continue;
            }
            let at = if path.is_empty() { "the object" } else { path };
            return Err(DecodeError::Unknown(format!("#{num} of {at}")));
        };
        let key = (*name).to_string();
        let sub = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        match (kind, wire) {
            (Kind::Str, 2) => {
                // Go's protobuf writes empty strings that JSON's omitempty leaves out.
                let v = string(r.bytes()?)?;
                if !v.is_empty() {
                    out.insert(key, json!(v));
                }
            }
            (Kind::Int0, 0) => {
                let v = r.varint()? as i64;
                if v != 0 {
                    out.insert(key, json!(v));
                }
            }
            (Kind::Bool0, 0) => {
                if r.varint()? != 0 {
                    out.insert(key, json!(true));
                }
            }
            (Kind::IntOrString, 2) => {
                let v = message(
                    r.bytes()?,
                    &[(1, "type", Kind::Int), (2, "int", Kind::Int), (3, "str", Kind::Str)],
                    &sub,
                )?;
                let value = if v.get("type").and_then(Value::as_i64) == Some(1) {
                    v.get("str").cloned().unwrap_or(json!(""))
                } else {
                    v.get("int").cloned().unwrap_or(json!(0))
                };
                out.insert(key, value);
            }
            (Kind::Bytes, 2) => {
                out.insert(key, json!(base64::engine::general_purpose::STANDARD.encode(r.bytes()?)));
            }
            (Kind::Int, 0) => {
                // Go's int32 and int64 are varints of the two's-complement value.
                out.insert(key, json!(r.varint()? as i64));
            }
            (Kind::Bool, 0) => {
                out.insert(key, json!(r.varint()? != 0));
            }
            (Kind::Time, 2) => {
                let t = message(r.bytes()?, &[(1, "s", Kind::Int), (2, "n", Kind::Int)], &sub)?;
                let secs = t.get("s").and_then(Value::as_i64).unwrap_or(0);
                // Go's zero time (year 1) means unset.
                if secs <= -62_135_596_800 || t.get("s").is_none() {
                    continue;
                }
                let ts = jiff::Timestamp::from_second(secs).map_err(|e| e.to_string())?;
                out.insert(key, json!(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()));
            }
            (Kind::Qty, 2) => {
                let q = quantity(r.bytes()?)?;
                if !q.is_empty() {
                    out.insert(key, json!(q));
                }
            }
            (Kind::Msg(f), 2) => {
                let m = message(r.bytes()?, f, &sub)?;
                out.insert(key, m);
            }
            (Kind::Inline(f), 2) => message_into(r.bytes()?, f, path, out)?,
            (Kind::RawJson, 2) => {
                let m = message(r.bytes()?, &[(1, "raw", Kind::Bytes)], &sub)?;
                let raw = m.get("raw").and_then(Value::as_str).unwrap_or_default();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(raw)
                    .map_err(|e| e.to_string())?;
                let v: Value = serde_json::from_slice(&bytes).map_err(|e| format!("field {sub}: {e}"))?;
                out.insert(key, v);
            }
            (Kind::RepStr, 2) => {
                let s = string(r.bytes()?)?;
                push(out, key, json!(s))?;
            }
            (Kind::RepInt, 0) => {
                let v = r.varint()? as i64;
                push(out, key, json!(v))?;
            }
            (Kind::RepInt, 2) => {
                // Packed form.
                let packed = r.bytes()?;
                let mut p = Reader { buf: packed, pos: 0 };
                while p.pos < packed.len() {
                    let v = p.varint()? as i64;
                    push(out, key.clone(), json!(v))?;
                }
            }
            (Kind::RepMsg(f), 2) => {
                let m = message(r.bytes()?, f, &format!("{sub}[]"))?;
                push(out, key, m)?;
            }
            (Kind::MapStr | Kind::MapBytes | Kind::MapQty, 2) => {
                let (k, v) = map_entry(r.bytes()?, *kind)?;
                out.entry(key)
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .ok_or("not a map")?
                    .insert(k, v);
            }
            (_, w) => return Err(format!("field {sub} has the wrong wire type {w}").into()),
        }
    }
    Ok(())
}

fn push(out: &mut Map<String, Value>, key: String, v: Value) -> Result<(), DecodeError> {
    out.entry(key)
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .ok_or("not a list")?
        .push(v);
    Ok(())
}
