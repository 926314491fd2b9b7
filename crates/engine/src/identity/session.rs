//! Gatehouse's own session tokens: HS256 JWTs with `kid`, `iss` = public URL, `aud`, `exp`,
//! `jti` and the user's `sub`, `email`, `name`, `groups`. The IdP's tokens never reach the
//! client. Verification takes the time from the injected clock and names the exact reason
//! for a refusal.

use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, Header, Validation, errors::ErrorKind};
use serde::{Deserialize, Serialize};

use super::keys::KeyRing;
pub use super::user::{LOCAL_SUBJECT, UserIdentity};

/// The audience of every session token.
pub const AUDIENCE: &str = "gatehouse";
/// Allowed clock difference when checking `exp`, `nbf` and `iat`.
pub const LEEWAY_SECS: i64 = 30;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionClaims {
    pub iss: String,
    pub aud: String,
    pub sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    pub iat: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    pub exp: i64,
    pub jti: String,
    /// `admin.billing_group_tag` when the session was minted: the request-tag name Claude
    /// Code puts the person's billing group under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billing_group_tag: Option<String>,
}

impl SessionClaims {
    pub fn identity(&self) -> UserIdentity {
        UserIdentity {
            sub: self.sub.clone(),
            email: self.email.clone(),
            name: self.name.clone(),
            groups: self.groups.clone(),
        }
    }
}

/// Why a session token was refused (stable strings for events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("malformed")]
    Malformed,
    #[error("bad_algorithm")]
    BadAlgorithm,
    #[error("unknown_kid")]
    UnknownKid,
    #[error("bad_signature")]
    BadSignature,
    #[error("expired")]
    Expired,
    #[error("not_yet_valid")]
    NotYetValid,
    #[error("wrong_audience")]
    WrongAudience,
    #[error("wrong_issuer")]
    WrongIssuer,
    #[error("revoked")]
    Revoked,
}

impl SessionError {
    pub fn reason(self) -> &'static str {
        match self {
            SessionError::Malformed => "malformed",
            SessionError::BadAlgorithm => "bad_algorithm",
            SessionError::UnknownKid => "unknown_kid",
            SessionError::BadSignature => "bad_signature",
            SessionError::Expired => "expired",
            SessionError::NotYetValid => "not_yet_valid",
            SessionError::WrongAudience => "wrong_audience",
            SessionError::WrongIssuer => "wrong_issuer",
            SessionError::Revoked => "revoked",
        }
    }
}

pub fn mint(
    keys: &KeyRing,
    issuer: &str,
    ttl_secs: i64,
    now: DateTime<Utc>,
    who: &UserIdentity,
) -> Option<(String, SessionClaims)> {
    mint_tagged(keys, issuer, ttl_secs, now, who, None)
}

/// [`mint`] with the `billing_group_tag` claim.
pub fn mint_tagged(
    keys: &KeyRing,
    issuer: &str,
    ttl_secs: i64,
    now: DateTime<Utc>,
    who: &UserIdentity,
    billing_group_tag: Option<&str>,
) -> Option<(String, SessionClaims)> {
    let (kid, key) = keys.signing()?;
    let iat = now.timestamp();
    let claims = SessionClaims {
        iss: issuer.to_owned(),
        aud: AUDIENCE.to_owned(),
        sub: who.sub.clone(),
        email: who.email.clone(),
        name: who.name.clone(),
        groups: who.groups.clone(),
        iat,
        nbf: None,
        exp: iat + ttl_secs,
        jti: uuid::Uuid::new_v4().to_string(),
        billing_group_tag: billing_group_tag.map(str::to_owned),
    };
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.to_owned());
    let token = jsonwebtoken::encode(&header, &claims, key).ok()?;
    Some((token, claims))
}

/// Checks signature, algorithm, key, issuer and audience, but not time (revocation of an
/// expired token is still a revocation).
pub fn decode(keys: &KeyRing, issuer: &str, token: &str) -> Result<SessionClaims, SessionError> {
    let header = jsonwebtoken::decode_header(token).map_err(|e| match e.kind() {
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => SessionError::BadAlgorithm,
        _ => SessionError::Malformed,
    })?;
    if header.alg != Algorithm::HS256 {
        return Err(SessionError::BadAlgorithm);
    }
    let kid = header.kid.ok_or(SessionError::UnknownKid)?;
    let key = keys.verifying(&kid).ok_or(SessionError::UnknownKid)?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_audience(&[AUDIENCE]);
    validation.set_issuer(&[issuer]);
    validation.set_required_spec_claims(&["exp", "sub", "aud", "iss"]);
    // Time is checked below against the injected clock.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    let data =
        jsonwebtoken::decode::<SessionClaims>(token, key, &validation).map_err(|e| {
            match e.kind() {
                ErrorKind::InvalidSignature => SessionError::BadSignature,
                ErrorKind::InvalidAudience => SessionError::WrongAudience,
                ErrorKind::InvalidIssuer => SessionError::WrongIssuer,
                ErrorKind::InvalidAlgorithm => SessionError::BadAlgorithm,
                _ => SessionError::Malformed,
            }
        })?;
    Ok(data.claims)
}

pub fn verify(
    keys: &KeyRing,
    issuer: &str,
    token: &str,
    now: DateTime<Utc>,
    lifetime_secs: i64,
) -> Result<SessionClaims, SessionError> {
    let c = decode(keys, issuer, token)?;
    check_time(&c, now, lifetime_secs)?;
    Ok(c)
}

/// `exp`, `nbf` and `iat` against `now`, with [`LEEWAY_SECS`]. A session ends at `exp` or
/// at `iat` + the configured lifetime (`session.ttl_hours`), whichever comes first: a
/// token signed with a key the gateway holds but an `exp` far past the lifetime (a key
/// leaked, or minted under an older, longer setting) still ends on time.
pub fn check_time(
    c: &SessionClaims,
    now: DateTime<Utc>,
    lifetime_secs: i64,
) -> Result<(), SessionError> {
    let t = now.timestamp();
    // Saturating: claims at the ends of the i64 range must not wrap around.
    let ends = c.exp.min(c.iat.saturating_add(lifetime_secs));
    if ends.saturating_add(LEEWAY_SECS) <= t {
        return Err(SessionError::Expired);
    }
    if c.nbf.is_some_and(|nbf| nbf.saturating_sub(LEEWAY_SECS) > t)
        || c.iat.saturating_sub(LEEWAY_SECS) > t
    {
        return Err(SessionError::NotYetValid);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::secret::Secret;
    use base64::Engine;
    use chrono::Duration;

    const ISS: &str = "https://gw.example";

    fn ring(s: &[&str]) -> KeyRing {
        KeyRing::new(&s.iter().map(|x| Secret::new(*x)).collect::<Vec<_>>())
    }

    fn alice() -> UserIdentity {
        UserIdentity {
            sub: "alice".into(),
            email: Some("alice@corp.example".into()),
            name: None,
            groups: vec!["eng".into()],
        }
    }

    #[test]
    fn forgeries_and_expiry_are_refused_with_reasons() {
        let a = "secret-a-secret-a-secret-a-secret-a";
        let b = "secret-b-secret-b-secret-b-secret-b";
        let keys = ring(&[a]);
        let now = Utc::now();
        let (tok, claims) = mint(&keys, ISS, 3600, now, &alice()).unwrap();
        assert_eq!(verify(&keys, ISS, &tok, now, 3600).unwrap(), claims);
        assert_eq!(
            verify(&keys, "https://other", &tok, now, 3600),
            Err(SessionError::WrongIssuer)
        );
        assert_eq!(
            verify(&keys, ISS, &tok, now + Duration::hours(2), 3600),
            Err(SessionError::Expired)
        );
        assert_eq!(
            verify(&keys, ISS, &tok, now - Duration::hours(1), 3600),
            Err(SessionError::NotYetValid)
        );
        // Rotation: signed under a, verified while a is listed, refused once removed.
        assert!(verify(&ring(&[b, a]), ISS, &tok, now, 3600).is_ok());
        assert_eq!(
            verify(&ring(&[b]), ISS, &tok, now, 3600),
            Err(SessionError::UnknownKid)
        );
        // A token re-signed with another secret under a's kid.
        let parts: Vec<&str> = tok.split('.').collect();
        let (other, _) = mint(&ring(&[b]), ISS, 3600, now, &alice()).unwrap();
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            parts[1],
            other.split('.').nth(2).unwrap()
        );
        assert_eq!(
            verify(&keys, ISS, &forged, now, 3600),
            Err(SessionError::BadSignature)
        );
        // alg none, and an alg we never accept.
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let kid = keys.signing().unwrap().0.to_owned();
        let none = format!(
            "{}.{}.",
            b64(&format!(r#"{{"alg":"none","kid":"{kid}"}}"#)),
            parts[1]
        );
        assert!(matches!(
            verify(&keys, ISS, &none, now, 3600),
            Err(SessionError::BadAlgorithm | SessionError::Malformed)
        ));
        let hs512 = format!(
            "{}.{}.{}",
            b64(&format!(r#"{{"alg":"HS512","kid":"{kid}"}}"#)),
            parts[1],
            parts[2]
        );
        assert_eq!(
            verify(&keys, ISS, &hs512, now, 3600),
            Err(SessionError::BadAlgorithm)
        );
        assert_eq!(
            verify(&keys, ISS, "not.a.jwt", now, 3600),
            Err(SessionError::Malformed)
        );
        // Wrong audience.
        let mut wrong = claims.clone();
        wrong.aud = "someone-else".into();
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid);
        let t = jsonwebtoken::encode(&header, &wrong, keys.signing().unwrap().1).unwrap();
        assert_eq!(
            verify(&keys, ISS, &t, now, 3600),
            Err(SessionError::WrongAudience)
        );
    }

    /// Times at the ends of the i64 range overflowed the leeway arithmetic (seed
    /// fuzz/corpus/tokens/signed-claims-exp-i64-max.json).
    #[test]
    fn extreme_times_do_not_overflow() {
        let keys = ring(&["secret-a-secret-a-secret-a-secret-a"]);
        let now = Utc::now();
        let (_, mut claims) = mint(&keys, ISS, 3600, now, &alice()).unwrap();
        let (kid, key) = keys.signing().unwrap();
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid.to_owned());
        let sign = |c: &SessionClaims| jsonwebtoken::encode(&header, c, key).unwrap();
        (claims.exp, claims.iat, claims.nbf) = (i64::MAX, i64::MIN, Some(i64::MIN));
        // Issued at the start of time: whatever `exp` says, its lifetime is over.
        assert_eq!(
            verify(&keys, ISS, &sign(&claims), now, i64::MAX),
            Err(SessionError::Expired)
        );
        claims.iat = now.timestamp();
        assert!(verify(&keys, ISS, &sign(&claims), now, i64::MAX).is_ok());
        claims.exp = 0;
        assert_eq!(
            verify(&keys, ISS, &sign(&claims), now, i64::MAX),
            Err(SessionError::Expired)
        );
        (claims.exp, claims.iat) = (i64::MAX, i64::MAX);
        let future = verify(&keys, ISS, &sign(&claims), now, i64::MAX);
        assert_eq!(future, Err(SessionError::NotYetValid));
    }

    /// A validly signed token whose `exp` lies far past the configured lifetime still ends
    /// at `iat` + lifetime (issue 35, finding 1).
    #[test]
    fn a_session_ends_at_its_lifetime_whatever_its_exp_says() {
        let keys = ring(&["secret-a-secret-a-secret-a-secret-a"]);
        let now = Utc::now();
        let (_, mut claims) = mint(&keys, ISS, 3600, now, &alice()).unwrap();
        let (kid, key) = keys.signing().unwrap();
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid.to_owned());
        claims.exp = i64::MAX;
        let token = jsonwebtoken::encode(&header, &claims, key).unwrap();
        assert!(verify(&keys, ISS, &token, now + Duration::minutes(59), 3600).is_ok());
        assert_eq!(
            verify(&keys, ISS, &token, now + Duration::hours(2), 3600),
            Err(SessionError::Expired)
        );
        // Within the leeway of the lifetime's end it still holds.
        assert!(
            verify(
                &keys,
                ISS,
                &token,
                now + Duration::seconds(3600 + LEEWAY_SECS - 1),
                3600
            )
            .is_ok()
        );
    }
}
