//! Edge guards: the listener (connection cap, slow-client timeouts), who is calling
//! (client IP), CIDR access lists, size limits, request ids, the Host checks and the
//! security headers every response carries.

pub mod client_ip;
pub mod limits;
pub mod listener;
pub mod request_id;
pub mod response_headers;

use std::net::IpAddr;

use axum::body::Body;
use http::{HeaderMap, HeaderValue, Response, StatusCode, Uri, header};
use ipnet::IpNet;

use crate::error::ApiError;

/// Whether `ip` falls in any of `nets` (IPv4-mapped IPv6 is compared as IPv4).
pub fn in_any(ip: IpAddr, nets: &[IpNet]) -> bool {
    let ip = client_ip::canonical(ip);
    nets.iter()
        .any(|n| n.contains(&ip) || canonical_net(n).is_some_and(|n| n.contains(&ip)))
}

fn canonical_net(net: &IpNet) -> Option<IpNet> {
    match net {
        IpNet::V6(v6) => {
            let mapped = v6.addr().to_ipv4_mapped()?;
            let prefix = v6.prefix_len().checked_sub(96)?;
            IpNet::new(IpAddr::V4(mapped), prefix).ok()
        }
        IpNet::V4(_) => None,
    }
}

/// The host a request is addressed to: its one `Host` header, else the target's authority
/// (HTTP/2 `:authority`, an absolute-form target). Two `Host` headers, an unreadable one,
/// or a `Host` that names another authority than the target are refused with 400: a proxy
/// in front could route by one and the gateway check the other.
pub fn single_host<'a>(uri: &'a Uri, headers: &'a HeaderMap) -> Result<Option<&'a str>, ApiError> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => {
            return Err(ApiError::InvalidRequest(
                "more than one Host header; send exactly one".into(),
            ));
        }
        (Some(h), None) => Some(h.to_str().map_err(|_| {
            ApiError::InvalidRequest("the Host header is not a valid host name".into())
        })?),
        (None, _) => None,
    };
    let authority = uri.authority().map(|a| a.as_str());
    match (host, authority) {
        (Some(h), Some(a)) if !h.eq_ignore_ascii_case(a) => Err(ApiError::InvalidRequest(
            "the Host header and the request target name different hosts".into(),
        )),
        (Some(h), _) => Ok(Some(h)),
        (None, a) => Ok(a),
    }
}

/// On a loopback listener, only loopback Host names are served: a web page that rebinds
/// its own DNS name to 127.0.0.1 cannot reach the gateway from a browser.
pub fn host_is_loopback(host: Option<&str>) -> bool {
    let Some(host) = host else { return false };
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                host
            }
        })
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<IpAddr>()
            .is_ok_and(|ip| client_ip::canonical(ip).is_loopback())
}

/// A JSON answer the gateway makes itself (never cached).
pub fn json_response(status: StatusCode, body: serde_json::Value) -> Response<Body> {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cidr_match_normalises_mapped_addresses() {
        let nets: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        assert!(in_any("10.1.2.3".parse().unwrap(), &nets));
        assert!(in_any("::ffff:10.1.2.3".parse().unwrap(), &nets));
        assert!(!in_any("11.0.0.1".parse().unwrap(), &nets));
        let mapped: Vec<IpNet> = vec!["::ffff:192.168.0.0/112".parse().unwrap()];
        assert!(in_any("192.168.3.4".parse().unwrap(), &mapped));
    }

    #[test]
    fn loopback_hosts() {
        for ok in [
            "127.0.0.1:8788",
            "localhost",
            "LOCALHOST:1",
            "[::1]:80",
            "a.localhost",
            "127.0.0.2",
        ] {
            assert!(host_is_loopback(Some(ok)), "{ok}");
        }
        for bad in [
            "evil.example:8788",
            "127.0.0.1.evil.example",
            "",
            "[::2]:80",
            "10.0.0.1",
        ] {
            assert!(!host_is_loopback(Some(bad)), "{bad}");
        }
        assert!(!host_is_loopback(None));
    }

    #[test]
    fn one_host_per_request() {
        let hm = |hosts: &[&str]| {
            let mut m = HeaderMap::new();
            for h in hosts {
                m.append(header::HOST, h.parse().unwrap());
            }
            m
        };
        let origin: Uri = "/v1/messages".parse().unwrap();
        let absolute: Uri = "http://127.0.0.1:8788/v1/messages".parse().unwrap();
        let host =
            |uri: &Uri, hosts: &[&str]| single_host(uri, &hm(hosts)).map(|h| h.map(str::to_owned));
        assert_eq!(
            host(&origin, &["a.example"]).unwrap().as_deref(),
            Some("a.example")
        );
        assert_eq!(host(&origin, &[]).unwrap(), None);
        assert_eq!(
            host(&absolute, &[]).unwrap().as_deref(),
            Some("127.0.0.1:8788")
        );
        assert!(host(&absolute, &["127.0.0.1:8788"]).is_ok());
        for (uri, hosts) in [
            (&origin, &["localhost", "evil.example"][..]),
            (&origin, &["localhost", "localhost"][..]),
            (&absolute, &["evil.example"][..]),
        ] {
            let e = host(uri, hosts).unwrap_err();
            assert_eq!(e.outcome().0, StatusCode::BAD_REQUEST, "{hosts:?}");
        }
    }
}
