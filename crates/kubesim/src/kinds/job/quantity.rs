//! `resource.Quantity` as the codec reads and writes it (`k8s.io/apimachinery/pkg/api/resource`):
//! parsing with Go's error texts, rounding (to nano on parse, to milli for `ResourceList`s by
//! `SetDefaults_ResourceList`), and the canonical form the server answers with (`0.5` -> `500m`,
//! `1024Mi` -> `1Gi`, a JSON number `1` -> `"1"`).
//!
//! Values are held as an `i128` mantissa and a power of ten. Quantities beyond that range (more than 36
//! significant digits, or a binary value over ~10^38) are left as written.

use serde_json::Value;

/// Why a quantity does not parse (`resource.ErrFormatWrong` / `ErrSuffix`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    FormatWrong,
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

/// A parsed quantity: `mantissa * 10^exp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    mantissa: i128,
    exp: i32,
    format: Format,
}

/// Splits `str` like Go's `parseQuantityString`: (positive, integer digits, fraction digits, suffix).
fn split(s: &str) -> Result<(bool, &str, &str, &str), QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok((positive, "0", "", ""));
    }
    let num_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == num_start {
        "0"
    } else {
        &s[num_start..pos]
    };
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let d_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[d_start..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong);
    }
    Ok((positive, num, denom, &s[suffix_start..]))
}

/// The suffix's (base, exponent, format) (`quantitySuffixer.interpret`).
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    let dec = |e| Some((10, e, Format::DecimalSI));
    let bin = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => dec(0),
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E'])?;
            let e: i32 = rest.parse().ok()?;
            Some((10, e, Format::DecimalExponent))
        }
    }
}

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

impl Quantity {
    /// `resource.ParseQuantity` (values finer than a nano-unit are rounded up, away from zero).
    /// `Ok(None)` for values kubesim cannot represent exactly.
    pub fn parse(s: &str) -> Result<Option<Self>, QuantityError> {
        if s.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        let (positive, num, denom, suffix) = split(s)?;
        let (base, exponent, format) = interpret(suffix).ok_or(QuantityError::Suffix)?;
        if num.len() + denom.len() > 36 {
            return Ok(None);
        }
        let digits = format!("{num}{denom}");
        let Ok(mut mantissa) = digits.parse::<i128>() else {
            return Ok(None);
        };
        let mut exp = -(denom.len() as i32);
        if base == 10 {
            exp += exponent;
        } else {
            let Some(m) = 2i128
                .checked_pow(exponent.unsigned_abs())
                .and_then(|f| mantissa.checked_mul(f))
            else {
                return Ok(None);
            };
            mantissa = m;
        }
        if !positive {
            mantissa = -mantissa;
        }
        let q = Self {
            mantissa,
            exp,
            format,
        };
        Ok(q.round_up(-9))
    }

    /// `RoundUp(scale)`: drop precision below `10^scale`, rounding away from zero.
    pub fn round_up(self, scale: i32) -> Option<Self> {
        if self.exp >= scale {
            return Some(self);
        }
        let div = pow10(u32::try_from(scale - self.exp).ok()?)?;
        let mut m = self.mantissa / div;
        if self.mantissa % div != 0 {
            m += self.mantissa.signum();
        }
        Some(Self {
            mantissa: m,
            exp: scale,
            ..self
        })
    }

    /// The value as an integer, if it is one.
    fn as_integer(&self) -> Option<i128> {
        if self.exp >= 0 {
            self.mantissa.checked_mul(pow10(self.exp as u32)?)
        } else {
            let div = pow10(self.exp.unsigned_abs())?;
            (self.mantissa % div == 0).then(|| self.mantissa / div)
        }
    }

    /// `Quantity.String()`: the canonical form.
    pub fn canonical(&self) -> String {
        if self.mantissa == 0 {
            return "0".to_string();
        }
        let mut format = self.format;
        let mut integer = None;
        if format == Format::BinarySI {
            integer = self.as_integer();
            match integer {
                Some(v) if !(-1024 < v && v < 1024) => {}
                _ => format = Format::DecimalSI,
            }
        }
        if let (Format::BinarySI, Some(mut v)) = (format, integer) {
            let mut times = 0;
            while v.abs() >= 1024 && v % 1024 == 0 {
                v /= 1024;
                times += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                .get(times)
                .copied()
                .unwrap_or("");
            return format!("{v}{suffix}");
        }
        // Decimal: strip factors of ten, then bring the exponent down to a multiple of three.
        let (mut m, mut e) = (self.mantissa, self.exp);
        while m.abs() >= 10 && m % 10 == 0 {
            m /= 10;
            e += 1;
        }
        let r = e.rem_euclid(3);
        m = m.saturating_mul(pow10(r as u32).unwrap_or(1));
        e -= r;
        let suffix = if format == Format::DecimalExponent {
            if e == 0 {
                String::new()
            } else {
                format!("e{e}")
            }
        } else {
            // Go's suffixer has no name past E (10^18) and then prints no suffix at all.
            match e {
                -9 => "n",
                -6 => "u",
                -3 => "m",
                3 => "k",
                6 => "M",
                9 => "G",
                12 => "T",
                15 => "P",
                18 => "E",
                _ => "",
            }
            .to_string()
        };
        format!("{m}{suffix}")
    }
}

/// How a quantity field is decoded: its JSON (string, number or null) to the canonical string.
/// `resource_list` adds `SetDefaults_ResourceList`'s rounding up to a milli-unit.
pub fn canonicalize_json(v: &Value, resource_list: bool) -> Result<Option<Value>, QuantityError> {
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => "0".to_string(),
        _ => return Err(QuantityError::FormatWrong),
    };
    let Some(q) = Quantity::parse(&text)? else {
        return Ok(None);
    };
    let q = if resource_list {
        q.round_up(-3)
    } else {
        Some(q)
    };
    Ok(q.map(|q| Value::String(q.canonical())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(s: &str) -> String {
        Quantity::parse(s).unwrap().unwrap().canonical()
    }

    #[test]
    fn canonical_forms() {
        for (input, want) in [
            ("0", "0"),
            ("0.0", "0"),
            ("100m", "100m"),
            ("0.5", "500m"),
            ("1000m", "1"),
            ("1500", "1500"),
            ("2000", "2k"),
            ("1.5k", "1500"),
            ("128Mi", "128Mi"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("1000Mi", "1000Mi"),
            ("1Ki", "1Ki"),
            ("512", "512"),
            ("0.5Ki", "512"),
            ("1e3", "1e3"),
            ("1E6", "1e6"),
            ("1500e-3", "1500e-3"),
            ("-2k", "-2k"),
            ("+1", "1"),
            ("1G", "1G"),
            ("1000000000n", "1"),
            ("0.000000001", "1n"),
            ("0.0000000001", "1n"),
            ("1.", "1"),
            (".5", "500m"),
        ] {
            assert_eq!(c(input), want, "{input}");
        }
    }

    #[test]
    fn errors_like_go() {
        assert_eq!(Quantity::parse(""), Err(QuantityError::FormatWrong));
        assert_eq!(Quantity::parse("abc"), Err(QuantityError::FormatWrong));
        assert_eq!(Quantity::parse("1.2.3"), Err(QuantityError::FormatWrong));
        assert_eq!(Quantity::parse("1 Gi"), Err(QuantityError::FormatWrong));
        assert_eq!(Quantity::parse("1kk"), Err(QuantityError::Suffix));
        assert_eq!(Quantity::parse("1Gb"), Err(QuantityError::FormatWrong));
        assert_eq!(
            QuantityError::FormatWrong.to_string(),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }

    #[test]
    fn json_forms_and_resource_list_rounding() {
        assert_eq!(canonicalize_json(&json!(1), true), Ok(Some(json!("1"))));
        assert_eq!(
            canonicalize_json(&json!(0.25), true),
            Ok(Some(json!("250m")))
        );
        assert_eq!(
            canonicalize_json(&json!("0.0001"), true),
            Ok(Some(json!("1m")))
        );
        assert_eq!(
            canonicalize_json(&json!("0.0001"), false),
            Ok(Some(json!("100u")))
        );
        assert_eq!(
            canonicalize_json(&json!(true), false),
            Err(QuantityError::FormatWrong)
        );
    }
}
