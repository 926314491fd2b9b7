//! The workload issuer's keys and the token's signature, as the reference checks them
//! (Claude Code 2.1.333): ES256, ES384 or ES512, the algorithm matching the key's curve
//! (P-256, P-384, P-521). A key from the issuer's set is used only if it is an EC key on
//! one of those curves with a non-empty `kid`, and its `alg` and `use` are absent or fit
//! (`use` = `sig`). P-256 and P-384 verify through `jsonwebtoken` (ring); P-521, which ring
//! lacks, through RustCrypto's `p521`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, DecodingKey};
use p521::ecdsa::signature::Verifier;
use serde::Deserialize;
use serde_json::Value;

/// A signature algorithm workload tokens may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    Es256,
    Es384,
    Es512,
}

impl Alg {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "ES256" => Some(Alg::Es256),
            "ES384" => Some(Alg::Es384),
            "ES512" => Some(Alg::Es512),
            _ => None,
        }
    }

    fn of_curve(crv: &str) -> Option<Self> {
        match crv {
            "P-256" => Some(Alg::Es256),
            "P-384" => Some(Alg::Es384),
            "P-521" => Some(Alg::Es512),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Alg::Es256 => "ES256",
            Alg::Es384 => "ES384",
            Alg::Es512 => "ES512",
        }
    }
}

enum Inner {
    Ring(DecodingKey, Algorithm),
    P521(Box<p521::ecdsa::VerifyingKey>),
}

/// One usable key: its algorithm and how to verify with it.
pub struct VerifyKey {
    pub alg: Alg,
    inner: Inner,
}

#[derive(Deserialize)]
struct Jwk {
    kty: Option<String>,
    crv: Option<String>,
    x: Option<String>,
    y: Option<String>,
    kid: Option<String>,
    alg: Option<String>,
    #[serde(rename = "use")]
    usage: Option<String>,
}

impl VerifyKey {
    /// The key a JWK describes, with its `kid`, if the reference would use it.
    pub fn from_jwk(jwk: &Value) -> Option<(String, VerifyKey)> {
        let j: Jwk = serde_json::from_value(jwk.clone()).ok()?;
        let kid = j.kid.filter(|k| !k.is_empty())?;
        if j.kty.as_deref() != Some("EC") {
            return None;
        }
        let alg = Alg::of_curve(j.crv.as_deref()?)?;
        if j.alg.as_deref().is_some_and(|a| a != alg.name())
            || j.usage.as_deref().is_some_and(|u| u != "sig")
        {
            return None;
        }
        let (x, y) = (j.x?, j.y?);
        let inner = match alg {
            Alg::Es256 | Alg::Es384 => {
                let ring = if alg == Alg::Es256 {
                    Algorithm::ES256
                } else {
                    Algorithm::ES384
                };
                let key = DecodingKey::from_ec_components(&x, &y).ok()?;
                Inner::Ring(key, ring)
            }
            Alg::Es512 => {
                let (x, y) = (B64.decode(x).ok()?, B64.decode(y).ok()?);
                let (x, y) = (field_bytes(&x)?, field_bytes(&y)?);
                let point = p521::EncodedPoint::from_affine_coordinates(&x, &y, false);
                let key = p521::ecdsa::VerifyingKey::from_encoded_point(&point).ok()?;
                Inner::P521(Box::new(key))
            }
        };
        Some((kid, VerifyKey { alg, inner }))
    }

    /// Whether `signature` (JOSE's raw `r || s`) signs `message` with this key.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        match &self.inner {
            Inner::Ring(key, alg) => {
                let sig = B64.encode(signature);
                jsonwebtoken::crypto::verify(&sig, message, key, *alg).unwrap_or(false)
            }
            Inner::P521(key) => p521::ecdsa::Signature::from_slice(signature)
                .is_ok_and(|sig| key.verify(message, &sig).is_ok()),
        }
    }
}

/// A P-521 coordinate as the 66-byte field element (JWKs carry it at full length).
fn field_bytes(b: &[u8]) -> Option<p521::FieldBytes> {
    (b.len() == 66).then(|| p521::FieldBytes::clone_from_slice(b))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_that_do_not_fit_are_skipped() {
        let x = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU";
        let y = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0";
        let base = json!({"kty": "EC", "crv": "P-256", "x": x, "y": y, "kid": "k"});
        assert!(VerifyKey::from_jwk(&base).is_some());
        for (field, value) in [
            ("kid", json!("")),
            ("alg", json!("ES384")),
            ("use", json!("enc")),
            ("crv", json!("P-192")),
            ("kty", json!("RSA")),
        ] {
            let mut k = base.clone();
            k[field] = value;
            assert!(VerifyKey::from_jwk(&k).is_none(), "{field}");
        }
        let mut ok = base.clone();
        ok["alg"] = json!("ES256");
        ok["use"] = json!("sig");
        assert!(VerifyKey::from_jwk(&ok).is_some());
    }
}
