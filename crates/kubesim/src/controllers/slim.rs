//! Reading only some members of a stored object: a controller that decides on a few fields of a Job
//! builds those as a `Value` and passes over the rest of its bytes (managedFields, most of the
//! metadata and status) without building, and then freeing, a tree for them.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::store::Stored;

/// What a view keeps of an object's member.
#[derive(Debug)]
pub(crate) enum Keep {
    /// The member as it is.
    Whole,
    /// Only these members of it (an object).
    Only(&'static [(&'static str, Keep)]),
}

/// The members `plan` names of a stored object, and of those the members their own plans name:
/// what [`pick`] makes of the parsed object. Parsed from the stored bytes, so a member left out is
/// scanned, not built; when a member with a plan of its own is not an object (never so in a stored
/// object) the whole object is parsed instead, so the view then holds more than the plan names.
pub(crate) fn view(st: &Stored, plan: &'static [(&'static str, Keep)]) -> Value {
    std::str::from_utf8(&st.json)
        .ok()
        .and_then(|text| {
            let mut de = serde_json::Deserializer::from_str(text);
            let v = Picked(plan).deserialize(&mut de).ok()?;
            de.end().ok().map(|()| v)
        })
        .unwrap_or_else(|| st.value())
}

/// [`view`] of an object already parsed: the reference it is held to.
#[cfg(test)]
pub(crate) fn pick(v: &Value, plan: &'static [(&'static str, Keep)]) -> Option<Value> {
    let m = v.as_object()?;
    let mut out = Map::new();
    for (k, keep) in plan {
        if let Some(member) = m.get(*k) {
            let kept = match keep {
                Keep::Whole => member.clone(),
                Keep::Only(sub) => pick(member, sub)?,
            };
            out.insert((*k).to_string(), kept);
        }
    }
    Some(Value::Object(out))
}

/// Deserialises an object into the members its plan names (an error for anything but an object).
struct Picked(&'static [(&'static str, Keep)]);

impl<'de> DeserializeSeed<'de> for Picked {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Picked {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(found) = map.next_key_seed(Key(self.0))? {
            match found {
                Some((k, &Keep::Whole)) => {
                    out.insert(k.to_string(), map.next_value::<Value>()?);
                }
                Some((k, &Keep::Only(sub))) => {
                    out.insert(k.to_string(), map.next_value_seed(Picked(sub))?);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// A key, as the plan entry it names (`None`: one the plan leaves out), without copying it.
struct Key(&'static [(&'static str, Keep)]);

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Option<(&'static str, &'static Keep)>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Option<(&'static str, &'static Keep)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(self
            .0
            .iter()
            .find(|(k, _)| *k == s)
            .map(|(k, keep)| (*k, keep)))
    }
}
