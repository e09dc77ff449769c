//! JSON syntax errors worded like Go's `encoding/json`, because the real API server puts them in
//! `Status` messages (`invalid character 'n' looking for beginning of object key string`,
//! `unexpected end of JSON input`), and the JSON kind names of its `cannot unmarshal` errors.

use serde_json::Value;

/// The JSON kind name Go's decoder uses in `cannot unmarshal X into ...` errors.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks `data` is one JSON value; on error returns Go's message for the first problem.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut s = Scanner { data, pos: 0 };
    s.skip_ws();
    if let Err(e) = s.value() {
        return Some(e);
    }
    s.skip_ws();
    if s.pos < data.len() {
        return Some(format!(
            "invalid character {} after top-level value",
            quote_char(data[s.pos])
        ));
    }
    None
}

/// Go's `quoteChar`: the offending byte in single quotes.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_string(),
        b'"' => "'\"'".to_string(),
        c if c >= 0x80 => format!("'\\x{c:02x}'"),
        c => {
            let q = crate::errors::go_quote(&(c as char).to_string());
            format!("'{}'", &q[1..q.len() - 1])
        }
    }
}

const EOF: &str = "unexpected end of JSON input";

struct Scanner<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.data.len()
            && matches!(self.data[self.pos], b' ' | b'\t' | b'\r' | b'\n')
        {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    fn bad(&self, c: u8, ctx: &str) -> String {
        format!("invalid character {} {ctx}", quote_char(c))
    }

    fn value(&mut self) -> Result<(), String> {
        let Some(c) = self.peek() else {
            return Err(EOF.into());
        };
        match c {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            c => Err(self.bad(c, "looking for beginning of value")),
        }
    }

    fn object(&mut self) -> Result<(), String> {
        if self.open(b'}')? {
            return Ok(());
        }
        loop {
            match self.peek() {
                None => return Err(EOF.into()),
                Some(b'"') => self.string()?,
                Some(c) => return Err(self.bad(c, "looking for beginning of object key string")),
            }
            self.skip_ws();
            match self.peek() {
                None => return Err(EOF.into()),
                Some(b':') => self.pos += 1,
                Some(c) => return Err(self.bad(c, "after object key")),
            }
            self.skip_ws();
            self.value()?;
            if !self.more(b'}', "after object key:value pair")? {
                return Ok(());
            }
        }
    }

    fn array(&mut self) -> Result<(), String> {
        if self.open(b']')? {
            return Ok(());
        }
        loop {
            self.value()?;
            if !self.more(b']', "after array element")? {
                return Ok(());
            }
        }
    }

    /// Steps over an opening `{` or `[`; true when `close` follows at once (an empty container).
    fn open(&mut self, close: u8) -> Result<bool, String> {
        self.pos += 1;
        self.skip_ws();
        match self.peek() {
            None => Err(EOF.into()),
            Some(c) if c == close => {
                self.pos += 1;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// After an element: `,` (true: another follows) or `close` (false: the container ends).
    fn more(&mut self, close: u8, context: &str) -> Result<bool, String> {
        self.skip_ws();
        match self.peek() {
            None => Err(EOF.into()),
            Some(b',') => {
                self.pos += 1;
                self.skip_ws();
                Ok(true)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(false)
            }
            Some(c) => Err(self.bad(c, context)),
        }
    }

    fn string(&mut self) -> Result<(), String> {
        self.pos += 1;
        loop {
            let Some(c) = self.peek() else {
                return Err(EOF.into());
            };
            self.pos += 1;
            match c {
                b'"' => return Ok(()),
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(EOF.into());
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            for _ in 0..4 {
                                let Some(h) = self.peek() else {
                                    return Err(EOF.into());
                                };
                                if !h.is_ascii_hexdigit() {
                                    return Err(self.bad(h, "in \\u hexadecimal character escape"));
                                }
                                self.pos += 1;
                            }
                        }
                        e => return Err(self.bad(e, "in string escape code")),
                    }
                }
                c if c < 0x20 => return Err(self.bad(c, "in string literal")),
                _ => {}
            }
        }
    }

    fn number(&mut self) -> Result<(), String> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
            match self.peek() {
                None => return Err(EOF.into()),
                Some(b'0'..=b'9') => {}
                Some(c) => return Err(self.bad(c, "in numeric literal")),
            }
        }
        if self.peek() == Some(b'0') {
            self.pos += 1;
        } else {
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            match self.peek() {
                None => return Err(EOF.into()),
                Some(b'0'..=b'9') => {}
                Some(c) => return Err(self.bad(c, "after decimal point in numeric literal")),
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            match self.peek() {
                None => return Err(EOF.into()),
                Some(b'0'..=b'9') => {}
                Some(c) => return Err(self.bad(c, "in exponent of numeric literal")),
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), String> {
        let name = std::str::from_utf8(word).unwrap_or("");
        for (i, &expected) in word.iter().enumerate() {
            let Some(c) = self.peek() else {
                return Err(EOF.into());
            };
            if c != expected {
                return Err(self.bad(
                    c,
                    &format!("in literal {name} (expecting {})", quote_char(word[i])),
                ));
            }
            self.pos += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_go() {
        assert_eq!(
            syntax_error(b"{not json").unwrap(),
            "invalid character 'n' looking for beginning of object key string"
        );
        assert_eq!(
            syntax_error(b"{\"a\":1").unwrap(),
            "unexpected end of JSON input"
        );
        assert_eq!(
            syntax_error(&[0x81, 0x20]).unwrap(),
            "invalid character '\\x81' looking for beginning of value"
        );
        assert_eq!(
            syntax_error(b"{} x").unwrap(),
            "invalid character 'x' after top-level value"
        );
        assert_eq!(
            syntax_error(b"[1 2]").unwrap(),
            "invalid character '2' after array element"
        );
        assert_eq!(
            syntax_error(b"tru").unwrap(),
            "unexpected end of JSON input"
        );
        assert_eq!(
            syntax_error(b"trux").unwrap(),
            "invalid character 'x' in literal true (expecting 'e')"
        );
        assert_eq!(
            syntax_error(b"{\"a\" 1}").unwrap(),
            "invalid character '1' after object key"
        );
        assert!(syntax_error(br#"{"a":[1,2.5e-3,"x\u00e9",true,null,{}]}"#).is_none());
    }
}
