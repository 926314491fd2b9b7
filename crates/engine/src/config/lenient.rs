//! Numbers written as strings, as the reference coerces them (JavaScript's `Number`,
//! [`js_string_number`]): `port: ${PORT}` expands to a string, and `port: "8080"` is a
//! port. Used with `#[serde(default, deserialize_with =
//! "lenient::opt")]`; the schema says "a number or a string of one".

use std::fmt::Display;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::de::Error;
use serde::{Deserialize, Deserializer};

#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Int(i128),
    Float(f64),
    Text(String),
}

/// An optional number, or a string holding one.
pub fn opt<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: Display,
{
    let text = match Option::<NumberOrText>::deserialize(d) {
        Ok(None) => return Ok(None),
        Ok(Some(NumberOrText::Int(n))) => n.to_string(),
        Ok(Some(NumberOrText::Float(n))) => n.to_string(),
        Ok(Some(NumberOrText::Text(s))) => as_digits(&s),
        Err(_) => {
            return Err(D::Error::custom(
                "invalid value: expected a number (or a string holding one)",
            ));
        }
    };
    text.trim()
        .parse()
        .map(Some)
        .map_err(|e| D::Error::custom(format!("invalid value `{text}`: {e}")))
}

/// Text read as the reference reads it ([`js_string_number`]: blank is 0, `0x10` is 16,
/// `1e3` is 1000) and written back in digits for the field's own parser; text that is
/// no number stays as written, so the error quotes it.
fn as_digits(text: &str) -> String {
    let n = js_string_number(text);
    if n.is_finite() && n.fract() == 0.0 && n.abs() < 1e18 {
        format!("{}", n as i64)
    } else if n.is_finite() {
        n.to_string()
    } else {
        text.to_owned()
    }
}

/// JavaScript's `Number(text)`: surrounding white space ignored, empty is 0, `Infinity`,
/// `0x`/`0o`/`0b` integers, decimal literals; anything else NaN.
pub fn js_string_number(text: &str) -> f64 {
    let t = text.trim_matches(|c: char| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}');
    if t.is_empty() {
        return 0.0;
    }
    match t {
        "Infinity" | "+Infinity" => return f64::INFINITY,
        "-Infinity" => return f64::NEG_INFINITY,
        _ => {}
    }
    let radix = match t.get(..2) {
        Some("0x" | "0X") => Some(16),
        Some("0o" | "0O") => Some(8),
        Some("0b" | "0B") => Some(2),
        _ => None,
    };
    if let Some(radix) = radix {
        let digits = &t[2..];
        if digits.is_empty() {
            return f64::NAN;
        }
        return digits
            .chars()
            .try_fold(0.0_f64, |acc, c| {
                c.to_digit(radix)
                    .map(|d| acc * f64::from(radix) + f64::from(d))
            })
            .unwrap_or(f64::NAN);
    }
    if decimal_literal(t) {
        t.parse().unwrap_or(f64::NAN)
    } else {
        f64::NAN
    }
}

/// `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`.
fn decimal_literal(t: &str) -> bool {
    let b = t.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if b.get(i) == Some(&b'.') {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Schema of an integer field that also takes a string of digits.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum IntOrString {
    Int(u64),
    Text(String),
}

/// Schema of a number field that also takes a string holding one.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum NumberOrString {
    Number(f64),
    Text(String),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(Deserialize)]
    struct Port {
        #[serde(default, deserialize_with = "opt")]
        port: Option<u16>,
    }

    #[test]
    fn numbers_and_strings_of_numbers() {
        let p = |y: &str| serde_yaml_ng::from_str::<Port>(y).map(|p| p.port);
        assert_eq!(p("port: 8080").unwrap(), Some(8080));
        assert_eq!(p("port: '8080'").unwrap(), Some(8080));
        assert_eq!(p("{}").unwrap(), None);
        assert!(
            p("port: '80x'")
                .unwrap_err()
                .to_string()
                .contains("invalid value `80x`")
        );
        assert!(p("port: 70000").is_err());
        assert!(p("port: true").is_err());
    }

    /// Text is read as JavaScript's `Number` reads it, as the reference coerces it.
    #[test]
    fn text_is_read_as_the_reference_reads_it() {
        let p = |y: &str| serde_yaml_ng::from_str::<Port>(y).map(|p| p.port);
        assert_eq!(p("port: ' 8080 '").unwrap(), Some(8080));
        assert_eq!(p("port: ''").unwrap(), Some(0));
        assert_eq!(p("port: '0x1F90'").unwrap(), Some(8080));
        assert_eq!(p("port: '8.08e3'").unwrap(), Some(8080));
        assert!(p("port: 'abc'").unwrap_err().to_string().contains("`abc`"));
        assert!(p("port: '80.5'").is_err());
    }
}
