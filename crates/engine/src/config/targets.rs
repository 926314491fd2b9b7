//! Which configured URLs the reference refuses for their host, at load time: a cloud
//! metadata endpoint always, a loopback or unspecified address unless
//! `CLAUDE_GATEWAY_ALLOW_LOOPBACK` is set (upstream `base_url`, `oidc.issuer`,
//! `oidc.discovery_url`, `telemetry.forward_to[].url`, `cri.policy.webhook.url`).
//!
//! The sets were measured against the reference (Claude Code 2.1.337, `--check config`):
//! host names are judged by name only (`localhost` and private names pass, the metadata
//! names do not); IP literals, IPv4 embedded in IPv6 included, by address. Every outbound
//! call is checked again when it is made (`crate::outbound`, which shares
//! [`embedded_v4`]), against the resolved address.

use std::net::{Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Why a URL's host is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A cloud metadata endpoint or a link-local address: never a target.
    Metadata,
    /// A loopback or unspecified address: only with `CLAUDE_GATEWAY_ALLOW_LOOPBACK`.
    Loopback,
}

/// Metadata service names (compared without case and without a trailing dot).
const METADATA_NAMES: &[&str] = &[
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
];

/// IPv4 metadata endpoints outside 169.254/16 (Alibaba, Azure's wire server, Oracle).
const METADATA_V4: &[Ipv4Addr] = &[
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(168, 63, 129, 16),
    Ipv4Addr::new(192, 0, 0, 192),
];

/// IPv6 metadata endpoints (AWS, GCP, Alibaba, …).
const METADATA_V6: &[Ipv6Addr] = &[
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254),
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23),
    Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254),
    Ipv6Addr::new(0xfd00, 0xc1, 0, 0, 0, 0, 0xa9fe, 0xa9fe),
    Ipv6Addr::new(0xfd00, 0xa9fe, 0xa9fe, 0, 0, 0, 0, 1),
];

/// What, if anything, refuses `url`'s host.
pub fn refused(url: &Url) -> Option<Refused> {
    match url.host()? {
        Host::Domain(d) => {
            let name = d.trim_end_matches('.').to_ascii_lowercase();
            METADATA_NAMES
                .contains(&name.as_str())
                .then_some(Refused::Metadata)
        }
        Host::Ipv4(ip) => v4(ip),
        Host::Ipv6(ip) => v6(ip),
    }
}

fn v4(ip: Ipv4Addr) -> Option<Refused> {
    let o = ip.octets();
    if (o[0] == 169 && o[1] == 254) || METADATA_V4.contains(&ip) {
        Some(Refused::Metadata)
    } else if o[0] == 127 || o[0] == 0 {
        Some(Refused::Loopback)
    } else {
        None
    }
}

fn v6(ip: Ipv6Addr) -> Option<Refused> {
    let s = ip.segments();
    if METADATA_V6.contains(&ip) || s[0] & 0xffc0 == 0xfe80 {
        return Some(Refused::Metadata);
    }
    // NAT64's local-use prefix 64:ff9b:1::/48 can reach anything.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        return Some(Refused::Metadata);
    }
    if ip.is_loopback() || ip.is_unspecified() {
        return Some(Refused::Loopback);
    }
    embedded_v4(ip).and_then(v4)
}

/// The IPv4 address carried inside an IPv6 address, for the forms that route to it.
pub fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    match s {
        // IPv4-mapped ::ffff:a.b.c.d
        [0, 0, 0, 0, 0, 0xffff, hi, lo] => Some(low(hi, lo)),
        // IPv4-translated (SIIT) ::ffff:0:a.b.c.d
        [0, 0, 0, 0, 0xffff, 0, hi, lo] => Some(low(hi, lo)),
        // IPv4-compatible ::a.b.c.d (deprecated, still routed by some stacks)
        [0, 0, 0, 0, 0, 0, hi, lo] => Some(low(hi, lo)),
        // NAT64 well-known prefix 64:ff9b::/96
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(low(hi, lo)),
        // NAT64 local-use prefix 64:ff9b:1::/48
        [0x64, 0xff9b, 1, _, _, _, hi, lo] => Some(low(hi, lo)),
        // 6to4 2002:a.b.c.d::/48
        [0x2002, hi, lo, ..] => Some(low(hi, lo)),
        _ => None,
    }
}

/// `Err(message)` when `url` may not be configured; `allow_loopback` is
/// `CLAUDE_GATEWAY_ALLOW_LOOPBACK` (or a Gatehouse `allow_loopback` key where there is one).
pub fn check(url: &Url, allow_loopback: bool) -> Result<(), String> {
    match refused(url) {
        Some(Refused::Metadata) => Err(format!(
            "targets a cloud metadata or link-local address ({}), which the gateway never calls",
            url.host_str().unwrap_or_default()
        )),
        Some(Refused::Loopback) if !allow_loopback => Err(format!(
            "targets a loopback address ({}), which the gateway refuses unless CLAUDE_GATEWAY_ALLOW_LOOPBACK=1 is set in its environment (local tests and sidecars)",
            url.host_str().unwrap_or_default()
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn at(host: &str) -> Option<Refused> {
        refused(&Url::parse(&format!("http://{host}:9000/")).unwrap())
    }

    /// The host table measured against the reference's `--check config` (upstream
    /// `base_url`, with and without `CLAUDE_GATEWAY_ALLOW_LOOPBACK`).
    #[test]
    fn hosts_are_judged_as_the_reference_judges_them() {
        use Refused::{Loopback, Metadata};
        let table: &[(&str, Option<Refused>)] = &[
            ("127.0.0.1", Some(Loopback)),
            ("127.1.2.3", Some(Loopback)),
            ("0.0.0.0", Some(Loopback)),
            ("[::1]", Some(Loopback)),
            ("[::]", Some(Loopback)),
            ("[::ffff:127.0.0.1]", Some(Loopback)),
            ("2130706433", Some(Loopback)),
            ("0x7f000001", Some(Loopback)),
            ("169.254.169.254", Some(Metadata)),
            ("169.254.1.1", Some(Metadata)),
            ("100.100.100.200", Some(Metadata)),
            ("168.63.129.16", Some(Metadata)),
            ("192.0.0.192", Some(Metadata)),
            ("metadata.google.internal", Some(Metadata)),
            ("METADATA.GOOGLE.INTERNAL", Some(Metadata)),
            ("metadata.google.internal.", Some(Metadata)),
            ("metadata.goog", Some(Metadata)),
            ("metadata", Some(Metadata)),
            ("instance-data", Some(Metadata)),
            ("instance-data.ec2.internal", Some(Metadata)),
            ("[fd00:ec2::254]", Some(Metadata)),
            ("[fe80::1]", Some(Metadata)),
            ("[::ffff:169.254.169.254]", Some(Metadata)),
            ("[64:ff9b::a9fe:a9fe]", Some(Metadata)),
            ("localhost", None),
            ("foo.localhost", None),
            ("localhost.localdomain", None),
            ("ip6-localhost", None),
            ("10.0.0.1", None),
            ("instance-data.us-east-1.compute.internal", None),
            ("127.0.0.1.nip.io", None),
            ("host.docker.internal", None),
            ("api.anthropic.com", None),
        ];
        for (host, want) in table {
            assert_eq!(at(host), *want, "{host}");
        }
    }

    #[test]
    fn the_switch_allows_loopback_and_never_metadata() {
        let lo = Url::parse("http://127.0.0.1:1/").unwrap();
        let meta = Url::parse("http://169.254.169.254/").unwrap();
        assert!(
            check(&lo, false)
                .unwrap_err()
                .contains("CLAUDE_GATEWAY_ALLOW_LOOPBACK")
        );
        assert!(check(&lo, true).is_ok());
        assert!(check(&meta, true).unwrap_err().contains("metadata"));
    }
}
