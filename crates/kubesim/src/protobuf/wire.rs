//! The protobuf wire format: varints, fixed-width numbers and length-delimited fields, read with the
//! error wording of the Go (gogo-protobuf) unmarshalers the real server uses.

use super::ProtoError;

pub const VARINT: u8 = 0;
pub const FIXED64: u8 = 1;
pub const LEN: u8 = 2;
pub const START_GROUP: u8 = 3;
pub const END_GROUP: u8 = 4;
pub const FIXED32: u8 = 5;

pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn varint(&mut self) -> Result<u64, ProtoError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or(ProtoError::UnexpectedEof)?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(ProtoError::Overflow)
    }

    /// A field key: (field number, wire type).
    pub fn key(&mut self) -> Result<(u64, u8), ProtoError> {
        let k = self.varint()?;
        let (num, wire) = (k >> 3, (k & 7) as u8);
        if wire == END_GROUP {
            return Err(ProtoError::Wire(
                "wiretype end group for non-group".to_owned(),
            ));
        }
        if num == 0 {
            return Err(ProtoError::Wire(format!(
                "illegal tag 0 (wire type {wire})"
            )));
        }
        Ok((num, wire))
    }

    pub fn bytes(&mut self) -> Result<&'a [u8], ProtoError> {
        let len = usize::try_from(self.varint()?).map_err(|_| ProtoError::Overflow)?;
        let end = self
            .pos
            .checked_add(len)
            .ok_or(ProtoError::NegativeLength)?;
        let out = self
            .buf
            .get(self.pos..end)
            .ok_or(ProtoError::UnexpectedEof)?;
        self.pos = end;
        Ok(out)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], ProtoError> {
        let end = self.pos + N;
        let b = self
            .buf
            .get(self.pos..end)
            .ok_or(ProtoError::UnexpectedEof)?;
        self.pos = end;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    pub fn fixed64(&mut self) -> Result<u64, ProtoError> {
        Ok(u64::from_le_bytes(self.fixed::<8>()?))
    }

    pub fn fixed32(&mut self) -> Result<u32, ProtoError> {
        Ok(u32::from_le_bytes(self.fixed::<4>()?))
    }

    /// Skips a field of an unknown number (unknown fields are ignored, as the Go unmarshalers do).
    pub fn skip(&mut self, wire: u8) -> Result<(), ProtoError> {
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.fixed64().map(drop),
            LEN => self.bytes().map(drop),
            FIXED32 => self.fixed32().map(drop),
            START_GROUP => loop {
                let (_, w) = match self.key() {
                    Err(ProtoError::Wire(_)) => return Ok(()),
                    other => other?,
                };
                self.skip(w)?;
            },
            other => Err(ProtoError::Wire(format!("illegal wireType {other}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_keys_and_lengths() {
        // 300 = ac 02; field 2, wire type 2, length 3 "abc"; -1 as a 10-byte varint.
        let data = [
            0xac, 0x02, 0x12, 0x03, b'a', b'b', b'c', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0x01,
        ];
        let mut r = Reader::new(&data);
        assert_eq!(r.varint().unwrap(), 300);
        assert_eq!(r.key().unwrap(), (2, LEN));
        assert_eq!(r.bytes().unwrap(), b"abc");
        assert_eq!(r.varint().unwrap() as i64, -1);
        assert!(r.done());
        assert!(matches!(
            Reader::new(&[0x12, 0x05, b'a']).skip_field(),
            Err(ProtoError::UnexpectedEof)
        ));
        assert!(matches!(
            Reader::new(&[0x00]).key(),
            Err(ProtoError::Wire(m)) if m == "illegal tag 0 (wire type 0)"
        ));
    }

    impl Reader<'_> {
        fn skip_field(&mut self) -> Result<(), ProtoError> {
            let (_, w) = self.key()?;
            self.skip(w)
        }
    }
}
