//! Serialising a new version of a stored object: its top-level members (`"spec":{…}`) that the write
//! left unchanged are copied from the previous version's bytes instead of serialised again. A status
//! write keeps the spec and a spec write keeps the status (`keep_stored`), so a third to a half of a
//! stored Job is copied.

use serde_json::Value;

use super::Stored;

/// How many top-level members a stored object records the place of (a Job or Pod has three:
/// metadata, spec, status); members after these are always serialised.
pub(super) const MEMBERS: usize = 4;

/// Where a stored object's first top-level members end in its bytes: member `i` is
/// `json[start(i)..ends[i]]` (its key, `:` and value), `start(0)` = 1 (after `{`), `start(i)` =
/// `ends[i - 1] + 1` (after the `,`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Members {
    ends: [u32; MEMBERS],
    len: u8,
}

impl Members {
    /// The bytes of the member whose serialised key and `:` are `prefix`.
    fn find<'a>(&self, json: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
        let mut start = 1;
        for &end in &self.ends[..usize::from(self.len)] {
            let member = json.get(start..end as usize)?;
            if member.starts_with(prefix) {
                return Some(member);
            }
            start = end as usize + 1;
        }
        None
    }
}

/// The version a write was made from: its stored form and that form parsed ([`Stored::value`]; a
/// served form with `kind`/`apiVersion` added is fine, stored objects have neither). Members of the
/// new version identical to the parsed ones serialise to the stored bytes, so those are copied.
#[derive(Clone, Copy)]
pub struct Basis<'a> {
    pub stored: &'a Stored,
    pub value: &'a Value,
}

impl<'a> Basis<'a> {
    /// The bytes of `key`'s member (`prefix`: its serialised key and `:`) if `value` is unchanged.
    fn unchanged(self, prefix: &[u8], key: &str, value: &Value) -> Option<&'a [u8]> {
        // The metadata always changes (its resourceVersion): not worth comparing.
        if key == "metadata" {
            return None;
        }
        let member = self.stored.members.find(&self.stored.json, prefix)?;
        let old = self.value.get(key)?;
        crate::json::identical(value, old).then_some(member)
    }
}

/// `value` serialised as `serde_json::to_writer` does, appended to `buf`, which must be empty (the
/// places recorded are offsets in it); returns the places of its first members. Unchanged members are
/// copied from `basis`.
pub(super) fn serialise(
    buf: &mut Vec<u8>,
    value: &Value,
    basis: Option<Basis<'_>>,
) -> serde_json::Result<Members> {
    debug_assert!(buf.is_empty(), "member places are offsets from the start");
    let mut members = Members::default();
    let Value::Object(map) = value else {
        serde_json::to_writer(&mut *buf, value)?;
        return Ok(members);
    };
    // serde_json's compact form of a map: `{`, then `"key":value` joined by `,`, then `}`.
    buf.push(b'{');
    for (i, (key, v)) in map.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        let start = buf.len();
        serde_json::to_writer(&mut *buf, key)?;
        buf.push(b':');
        match basis.and_then(|b| b.unchanged(&buf[start..], key, v)) {
            Some(member) => {
                let value_bytes = &member[buf.len() - start..];
                buf.extend_from_slice(value_bytes);
            }
            None => serde_json::to_writer(&mut *buf, v)?,
        }
        if i < MEMBERS
            && let Ok(end) = u32::try_from(buf.len())
        {
            members.ends[i] = end;
            members.len = (i + 1) as u8;
        }
    }
    buf.push(b'}');
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            prop_oneof![Just(0.0), Just(-0.0), Just(1.5), Just(1e300)].prop_map(Value::from),
            "[a-c\"\\\\\u{1}é]{0,4}".prop_map(Value::from),
        ]
    }

    fn tree() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                prop::collection::btree_map("[a-c\"]{1,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// An object with up to six members named from a small set (so old and new share some), each
    /// taken from `a` or `b` so that some are equal and some not.
    fn object() -> impl Strategy<Value = Value> {
        prop::collection::btree_map(
            prop_oneof![
                Just("metadata".to_string()),
                Just("spec".to_string()),
                Just("status".to_string()),
                "[a-z\"]{1,3}",
            ],
            tree(),
            0..7,
        )
        .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    /// Half of `new`'s members replaced by `old`'s of the same name (when it has one), so the
    /// comparison finds equal members as well as different ones.
    fn mix(mut new: Value, old: &Value, pick: &[bool]) -> Value {
        if let (Value::Object(n), Value::Object(o)) = (&mut new, old) {
            for ((k, v), take) in n.iter_mut().zip(pick.iter().cycle()) {
                if *take && let Some(ov) = o.get(k) {
                    *v = ov.clone();
                }
            }
        }
        new
    }

    proptest! {
        /// The copy of unchanged members gives exactly the bytes serialising all of it gives.
        #[test]
        fn copying_unchanged_members_serialises_alike(
            old in object(),
            new in object(),
            pick in prop::collection::vec(any::<bool>(), 1..4),
        ) {
            let new = mix(new, &old, &pick);
            let prev = Stored::new(1, old);
            let parsed = prev.value();
            let basis = Basis { stored: &prev, value: &parsed };
            let (mut copied, mut full) = (Vec::new(), Vec::new());
            serialise(&mut copied, &new, Some(basis)).unwrap();
            serialise(&mut full, &new, None).unwrap();
            prop_assert_eq!(&copied, &serde_json::to_vec(&new).unwrap());
            prop_assert_eq!(&full, &serde_json::to_vec(&new).unwrap());
        }

        /// Writes one after another through this thread's reused scratch buffer (larger and smaller
        /// ones, copying members or not) each get exactly their own serialisation.
        #[test]
        fn the_scratch_buffer_gives_each_write_its_own_bytes(
            writes in prop::collection::vec((object(), object(), any::<bool>()), 1..6),
        ) {
            for (old, new, copy) in &writes {
                let prev = Stored::new(1, old.clone());
                let parsed = prev.value();
                let basis = copy.then_some(Basis { stored: &prev, value: &parsed });
                let (json, _) = crate::store::serialised(new, basis);
                prop_assert_eq!(&json[..], &serde_json::to_vec(new).unwrap()[..]);
            }
        }
    }

    #[test]
    fn an_unchanged_spec_is_copied_and_a_changed_status_is_not() {
        let prev = Stored::new(
            7,
            json!({"metadata": {"name": "a"}, "spec": {"x": [1, 2]}, "status": {"n": 1}}),
        );
        let parsed = prev.value();
        let basis = Basis {
            stored: &prev,
            value: &parsed,
        };
        let new = json!({"metadata": {"name": "a"}, "spec": {"x": [1, 2]}, "status": {"n": 2}});
        let spec = br#""spec":"#;
        let status = br#""status":"#;
        assert!(basis.unchanged(spec, "spec", &new["spec"]).is_some());
        assert!(basis.unchanged(status, "status", &new["status"]).is_none());
        let mut bytes = Vec::new();
        let members = serialise(&mut bytes, &new, Some(basis)).unwrap();
        assert_eq!(bytes, serde_json::to_vec(&new).unwrap());
        assert_eq!(
            members.find(&bytes, status),
            Some(&br#""status":{"n":2}"#[..])
        );
    }
}
