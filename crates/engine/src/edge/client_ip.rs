//! The client's address: the socket peer, or X-Forwarded-For when the peer is trusted.
//!
//! X-Forwarded-For is read only when the socket peer is in `listen.trusted_proxies`; the
//! chain is walked right to left and the first address outside the trusted CIDRs wins.
//! Any parse failure falls back to the socket peer, so a spoofed header changes nothing.

use std::net::IpAddr;

use http::HeaderMap;
use ipnet::IpNet;

use super::in_any;

/// IPv4-mapped IPv6 addresses become plain IPv4.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Parsed once: a lookup by `&str` parses the name every time.
const X_FORWARDED_FOR: http::HeaderName = http::HeaderName::from_static("x-forwarded-for");

pub fn resolve(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let peer = canonical(peer);
    if trusted.is_empty() || !in_any(peer, trusted) {
        static UNTRUSTED_FORWARD: crate::once::Once = crate::once::Once::new();
        if headers.contains_key(&X_FORWARDED_FOR) && UNTRUSTED_FORWARD.first() {
            tracing::warn!(
                peer = %peer,
                "X-Forwarded-For came from {peer}, which is not in listen.trusted_proxies: the header is ignored and the peer's address is used for access_control and rate limits. If the gateway is behind a proxy or load balancer, add its address to listen.trusted_proxies (logged once)"
            );
        }
        return peer;
    }
    let mut hops: Vec<IpAddr> = Vec::new();
    for value in headers.get_all(&X_FORWARDED_FOR) {
        let Ok(text) = value.to_str() else {
            return peer;
        };
        for part in text.split(',') {
            match part.trim().parse::<IpAddr>() {
                Ok(ip) => hops.push(canonical(ip)),
                Err(_) => return peer,
            }
        }
    }
    hops.into_iter()
        .rev()
        .find(|ip| !in_any(*ip, trusted))
        .unwrap_or(peer)
}

/// An address on the public internet: not loopback, private, link-local, shared
/// (100.64/10), unique-local or unspecified.
pub fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (a == 100 && (64..128).contains(&b)))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn h(xff: &[&str]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for v in xff {
            m.append("x-forwarded-for", v.parse().unwrap());
        }
        m
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn public_addresses_are_told_from_private_ones() {
        for public in ["203.0.113.9", "8.8.8.8", "2001:db8::1", "::ffff:8.8.8.8"] {
            assert!(is_public(ip(public)), "{public}");
        }
        for private in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.1.1",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_public(ip(private)), "{private}");
        }
    }

    #[test]
    fn untrusted_peer_ignores_xff() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        assert_eq!(
            resolve(ip("203.0.113.9"), &h(&["1.2.3.4"]), &trusted),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn trusted_chain_walks_right_to_left() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let got = resolve(
            ip("10.0.0.5"),
            &h(&["6.6.6.6, 198.51.100.7", "10.1.1.1"]),
            &trusted,
        );
        assert_eq!(got, ip("198.51.100.7"));
    }

    #[test]
    fn garbage_falls_back_to_peer() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        assert_eq!(
            resolve(ip("10.0.0.5"), &h(&["1.2.3.4, nonsense"]), &trusted),
            ip("10.0.0.5")
        );
        assert_eq!(
            resolve(ip("::ffff:10.0.0.5"), &h(&["10.0.0.6"]), &trusted),
            ip("10.0.0.5")
        );
    }
}
