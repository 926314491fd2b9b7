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

pub fn resolve(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let peer = canonical(peer);
    if trusted.is_empty() || !in_any(peer, trusted) {
        return peer;
    }
    let mut hops: Vec<IpAddr> = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
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
