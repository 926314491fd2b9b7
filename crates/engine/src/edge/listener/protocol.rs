//! Which HTTP version a connection speaks, decided before hyper reads a byte of it: the
//! ALPN protocol on TLS; on plain TCP, a peek at the first bytes for HTTP/2's connection
//! preface (prior knowledge), which leaves them in the socket.
//!
//! hyper-util's automatic builder reads those bytes instead and hands them back through a
//! rewind buffer, so hyper's HTTP/1 reader starts with 24 bytes in its 8 KiB read buffer
//! and grows it to 16 KiB to read the rest of the head: 8 KiB more per open connection
//! (measured with heaptrack), and one more read per connection. Peeked, hyper's own HTTP/1
//! or HTTP/2 connection reads from the socket itself. What a peek cannot settle (a preface
//! only partly arrived, a TLS session without ALPN) still goes to the automatic builder.

use tokio::net::TcpStream;

/// HTTP/2's connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How a connection is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
    /// Not known yet: hyper-util's automatic builder reads the first bytes.
    Detect,
}

/// The protocol the bytes seen so far start (`None`: the peer closed before sending any).
pub fn from_prefix(seen: &[u8]) -> Option<Protocol> {
    if seen.is_empty() {
        return None;
    }
    let n = seen.len().min(H2_PREFACE.len());
    Some(if seen[..n] != H2_PREFACE[..n] {
        Protocol::Http1
    } else if n == H2_PREFACE.len() {
        Protocol::Http2
    } else {
        Protocol::Detect
    })
}

/// Waits for the connection's first bytes and peeks at them (`None`: closed).
pub async fn peek(tcp: &TcpStream) -> std::io::Result<Option<Protocol>> {
    let mut seen = [0u8; H2_PREFACE.len()];
    let n = tcp.peek(&mut seen).await?;
    Ok(from_prefix(&seen[..n]))
}

/// The protocol a TLS session agreed on.
pub fn from_alpn(alpn: Option<&[u8]>) -> Protocol {
    match alpn {
        Some(b"h2") => Protocol::Http2,
        Some(b"http/1.1") => Protocol::Http1,
        _ => Protocol::Detect,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_decide() {
        assert_eq!(from_prefix(b""), None);
        assert_eq!(
            from_prefix(b"POST /v1/messages HTTP/1.1\r\n"),
            Some(Protocol::Http1)
        );
        assert_eq!(from_prefix(b"G"), Some(Protocol::Http1));
        // HTTP/1's "PRI" method is not the preface once a byte differs.
        assert_eq!(from_prefix(b"PRI * HTTP/1.1\r\n"), Some(Protocol::Http1));
        assert_eq!(from_prefix(b"PRI * HTTP/2.0\r\n"), Some(Protocol::Detect));
        assert_eq!(from_prefix(H2_PREFACE), Some(Protocol::Http2));
        let mut more = H2_PREFACE.to_vec();
        more.extend_from_slice(b"\x00\x00\x12\x04");
        assert_eq!(from_prefix(&more), Some(Protocol::Http2));
    }

    #[test]
    fn alpn_decides_on_tls() {
        assert_eq!(from_alpn(Some(b"h2")), Protocol::Http2);
        assert_eq!(from_alpn(Some(b"http/1.1")), Protocol::Http1);
        assert_eq!(from_alpn(None), Protocol::Detect);
    }
}
