//! Label and field selectors with the API server's syntax and error texts.

use std::collections::BTreeSet;

/// A label-selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Exists,
    DoesNotExist,
    Equals,
    NotEquals,
    In,
    NotIn,
    GreaterThan,
    LessThan,
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: Op,
    pub values: BTreeSet<String>,
}

/// A parsed label selector (requirements ANDed). The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether a label set (looked up by `get`) satisfies every requirement.
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| {
            let v = get(&r.key);
            match r.op {
                Op::Exists => v.is_some(),
                Op::DoesNotExist => v.is_none(),
                Op::Equals | Op::In => v.is_some_and(|v| r.values.contains(v)),
                Op::NotEquals | Op::NotIn => v.is_none_or(|v| !r.values.contains(v)),
                Op::GreaterThan | Op::LessThan => {
                    let (Some(v), Some(bound)) = (
                        v.and_then(|v| v.parse::<i64>().ok()),
                        r.values.iter().next(),
                    ) else {
                        return false;
                    };
                    let Ok(bound) = bound.parse::<i64>() else {
                        return false;
                    };
                    if r.op == Op::GreaterThan {
                        v > bound
                    } else {
                        v < bound
                    }
                }
            }
        })
    }

    /// Convenience for label maps in a JSON object (`metadata.labels`).
    pub fn matches_json(&self, labels: Option<&serde_json::Value>) -> bool {
        let map = labels.and_then(|l| l.as_object());
        self.matches(|k| map.and_then(|m| m.get(k)).and_then(|v| v.as_str()))
    }

    /// Parses a label selector string exactly as apimachinery's `labels.Parse` does.
    pub fn parse(s: &str) -> Result<Self, String> {
        let tokens = lex(s);
        let mut p = Parser { tokens, pos: 0 };
        p.parse().map(|requirements| LabelSelector { requirements })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Error,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn symbol_token(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::GreaterThan,
        "<" => Tok::LessThan,
        "!=" => Tok::NotEquals,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn lex(s: &str) -> Vec<(Tok, String)> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        while i < chars.len() && matches!(chars[i], ' ' | '\t' | '\r' | '\n') {
            i += 1;
        }
        if i >= chars.len() {
            out.push((Tok::End, String::new()));
            return out;
        }
        if is_special(chars[i]) {
            // Longest run of special symbols that still forms a known token.
            let mut buf = String::new();
            let mut last: Option<(Tok, String)> = None;
            while i < chars.len() && is_special(chars[i]) {
                buf.push(chars[i]);
                if let Some(t) = symbol_token(&buf) {
                    last = Some((t, buf.clone()));
                    i += 1;
                } else if last.is_some() {
                    break;
                } else {
                    i += 1;
                }
            }
            match last {
                Some(t) => out.push(t),
                None => {
                    out.push((Tok::Error, format!("error expected: keyword found '{buf}'")));
                    return out;
                }
            }
        } else {
            let start = i;
            while i < chars.len()
                && !is_special(chars[i])
                && !matches!(chars[i], ' ' | '\t' | '\r' | '\n')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let tok = match word.as_str() {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Identifier,
            };
            out.push((tok, word));
        }
    }
}

struct Parser {
    tokens: Vec<(Tok, String)>,
    pos: usize,
}

/// Parsing context: in value position the keywords `in`/`notin` are plain identifiers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

impl Parser {
    fn peek(&self, ctx: Ctx) -> (Tok, String) {
        let (t, l) = self
            .tokens
            .get(self.pos)
            .cloned()
            .unwrap_or((Tok::End, String::new()));
        (Self::in_ctx(t, ctx), l)
    }

    fn next(&mut self, ctx: Ctx) -> (Tok, String) {
        let r = self.peek(ctx);
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
        r
    }

    fn in_ctx(t: Tok, ctx: Ctx) -> Tok {
        if ctx == Ctx::Values && matches!(t, Tok::In | Tok::NotIn) {
            Tok::Identifier
        } else {
            t
        }
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.peek(Ctx::Values);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.next(Ctx::Values);
                    match t {
                        Tok::End => return Ok(reqs),
                        Tok::Comma => {
                            let (t2, l2) = self.peek(Ctx::Values);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::End => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let mut op = None;
        let (mut tok, mut lit) = self.next(Ctx::Values);
        if tok == Tok::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (tok, lit) = self.next(Ctx::Values);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let key = lit;
        if let Some(e) = key_error(&key) {
            return Err(format!(
                "key: Invalid value: {}: {e}",
                crate::errors::go_quote(&key)
            ));
        }
        let (t, _) = self.peek(Ctx::Values);
        if matches!(t, Tok::End | Tok::Comma) {
            return Ok(Requirement {
                key,
                op: op.unwrap_or(Op::Exists),
                values: BTreeSet::new(),
            });
        }
        if op == Some(Op::DoesNotExist) {
            return Ok(Requirement {
                key,
                op: Op::DoesNotExist,
                values: BTreeSet::new(),
            });
        }
        let (t, l) = self.next(Ctx::KeyAndOperator);
        let op = match t {
            Tok::In => Op::In,
            Tok::NotIn => Op::NotIn,
            Tok::Equals | Tok::DoubleEquals => Op::Equals,
            Tok::NotEquals => Op::NotEquals,
            Tok::GreaterThan => Op::GreaterThan,
            Tok::LessThan => Op::LessThan,
            _ => {
                return Err(format!(
                    "found '{l}', expected: {}",
                    "in, notin, =, ==, !=, gt, lt"
                ));
            }
        };
        let values = if matches!(op, Op::In | Op::NotIn) {
            self.values()?
        } else {
            self.exact_value()?
        };
        for (i, v) in values.iter().enumerate() {
            if let Some(e) = value_error(v) {
                return Err(format!(
                    "values[{i}][{key}]: Invalid value: {}: {e}",
                    crate::errors::go_quote(v)
                ));
            }
        }
        match op {
            Op::In | Op::NotIn if values.is_empty() => {
                return Err("for 'in', 'notin' operators, values set can't be empty".into());
            }
            Op::GreaterThan | Op::LessThan => {
                let ok = values.len() == 1 && values.iter().all(|v| v.parse::<i64>().is_ok());
                if !ok {
                    return Err(
                        "for 'Gt', 'Lt' operators, exactly one integer value is required".into(),
                    );
                }
            }
            _ => {}
        }
        Ok(Requirement { key, op, values })
    }

    fn values(&mut self) -> Result<BTreeSet<String>, String> {
        let (t, l) = self.next(Ctx::Values);
        if t != Tok::OpenPar {
            return Err(format!("found '{l}' expected: '('"));
        }
        let (t, l) = self.peek(Ctx::Values);
        match t {
            Tok::Identifier | Tok::Comma => {
                let s = self.identifiers()?;
                let (t, _) = self.next(Ctx::Values);
                if t != Tok::ClosedPar {
                    return Err(format!("found '{l}', expected: ')'"));
                }
                Ok(s)
            }
            Tok::ClosedPar => {
                self.next(Ctx::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{l}', expected: ',', ')' or identifier")),
        }
    }

    fn identifiers(&mut self) -> Result<BTreeSet<String>, String> {
        let mut s = BTreeSet::new();
        loop {
            let (t, l) = self.next(Ctx::Values);
            match t {
                Tok::Identifier => {
                    s.insert(l);
                    let (t2, l2) = self.peek(Ctx::Values);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(s),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if s.is_empty() {
                        s.insert(String::new());
                    }
                    let (t2, _) = self.peek(Ctx::Values);
                    if t2 == Tok::ClosedPar {
                        s.insert(String::new());
                        return Ok(s);
                    }
                    if t2 == Tok::Comma {
                        self.next(Ctx::Values);
                        s.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{l}', expected: ',', or identifier")),
            }
        }
    }

    fn exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        let (t, _) = self.peek(Ctx::Values);
        if matches!(t, Tok::End | Tok::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (t, l) = self.next(Ctx::Values);
        if t == Tok::Identifier {
            Ok(BTreeSet::from([l]))
        } else {
            Err(format!("found '{l}', expected: identifier"))
        }
    }
}

// Interim checks until the shared `validation` module lands; replaced by it at merge time.
fn key_error(key: &str) -> Option<String> {
    (key.is_empty() || key.len() > 317).then(|| "name part must be non-empty".to_string())
}

fn value_error(v: &str) -> Option<String> {
    (v.len() > 63).then(|| "must be no more than 63 bytes".to_string())
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub value: String,
    pub negated: bool,
}

/// A parsed field selector (terms ANDed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    pub terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parses `a=b,c!=d` (`==` accepted; `\` escapes `,`, `=`, `!`, `\`) like `fields.ParseSelector`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in split_unescaped(s, ',') {
            if part.is_empty() {
                continue;
            }
            let (field, value, negated) = split_term(&part)
                .ok_or_else(|| format!("invalid selector: '{s}'; can't understand '{part}'"))?;
            let value = unescape(&value).map_err(|e| format!("invalid field selector: {e}"))?;
            terms.push(FieldTerm {
                field,
                value,
                negated,
            });
        }
        Ok(Self { terms })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The value a term requires for `field`, when the selector pins it with `=`.
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && !t.negated)
            .map(|t| t.value.as_str())
    }

    pub fn matches(&self, mut value_of: impl FnMut(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let v = value_of(&t.field).unwrap_or_default();
            (v == t.value) != t.negated
        })
    }
}

fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if escaped {
        cur.push('\\');
    }
    out.push(cur);
    out
}

fn split_term(term: &str) -> Option<(String, String, bool)> {
    for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
        if let Some(i) = find_unescaped(term, op) {
            return Some((
                term[..i].to_string(),
                term[i + op.len()..].to_string(),
                negated,
            ));
        }
    }
    None
}

fn find_unescaped(s: &str, pat: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if s[i..].starts_with(pat) {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | ',' | '=' | '!')) => out.push(e),
                Some(e) => return Err(format!("invalid escape sequence: \\{e}")),
                None => return Err("unterminated escape sequence".into()),
            }
        } else if matches!(c, ',' | '=') {
            return Err(format!("invalid selector value: unescaped '{c}'"));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap()
    }

    fn labels<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
        move |k| pairs.iter().find(|(a, _)| *a == k).map(|(_, v)| *v)
    }

    #[test]
    fn parse_errors_match_the_api_server() {
        assert_eq!(
            LabelSelector::parse("env in prod").unwrap_err(),
            "unable to parse requirement: found 'prod' expected: '('"
        );
        assert_eq!(
            LabelSelector::parse("env=bad value").unwrap_err(),
            "found 'value', expected: ',' or 'end of string'"
        );
        assert_eq!(
            LabelSelector::parse("a,").unwrap_err(),
            "found '', expected: identifier after ','"
        );
        assert_eq!(
            LabelSelector::parse("a in (b").unwrap_err(),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
    }

    #[test]
    fn matching_follows_selector_semantics() {
        let l = [("env", "prod"), ("tier", "web")];
        assert!(sel("env=prod").matches(labels(&l)));
        assert!(sel("env==prod,tier=web").matches(labels(&l)));
        assert!(!sel("env!=prod").matches(labels(&l)));
        assert!(
            sel("canary!=true").matches(labels(&l)),
            "!= matches an absent key"
        );
        assert!(sel("env in (dev,prod)").matches(labels(&l)));
        assert!(!sel("env notin (dev,prod)").matches(labels(&l)));
        assert!(sel("x notin (a)").matches(labels(&l)));
        assert!(sel("tier").matches(labels(&l)) && !sel("!tier").matches(labels(&l)));
        assert!(sel("").matches(labels(&l)));
        assert!(
            sel("in in (in)").matches(labels(&[("in", "in")])),
            "keywords are identifiers in value position"
        );
    }

    #[test]
    fn field_selectors() {
        let f = FieldSelector::parse("metadata.name=b,status.successful!=1").unwrap();
        assert_eq!(f.exact("metadata.name"), Some("b"));
        assert!(f.matches(|k| Some(if k == "metadata.name" {
            "b".into()
        } else {
            "0".into()
        })));
        assert!(!f.matches(|_| Some("1".into())));
        assert!(FieldSelector::parse("novalue").is_err());
        assert_eq!(FieldSelector::parse("a==x").unwrap().exact("a"), Some("x"));
    }
}
