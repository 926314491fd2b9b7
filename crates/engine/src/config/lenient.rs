//! Numbers written as strings, as the reference coerces them: `port: ${PORT}` expands to
//! a string, and `port: "8080"` is a port. Used with `#[serde(default, deserialize_with =
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
        Ok(Some(NumberOrText::Text(s))) => s,
        Err(_) => {
            return Err(D::Error::custom(
                "invalid value: expected a number (or a string holding one)",
            ));
        }
    };
    // As the reference's coercion (JavaScript's `Number`): blank text is 0.
    let text = if text.trim().is_empty() {
        "0".to_owned()
    } else {
        text
    };
    text.trim()
        .parse()
        .map(Some)
        .map_err(|e| D::Error::custom(format!("invalid value `{text}`: {e}")))
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
}
