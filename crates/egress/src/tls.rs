//! Just enough of TLS to read the server name a client asks for.
//!
//! The proxy reads the first bytes a client sends into a tunnel; if they are a TLS ClientHello
//! it takes the SNI extension from it, so that a tunnel opened for one host cannot carry a TLS
//! session for another (domain fronting). The bytes read are kept and forwarded unchanged.

/// What the first bytes of a tunnel are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// A complete ClientHello, and the host name of its SNI extension if it has one.
    Tls { sni: Option<String> },
    /// Not a TLS handshake record.
    NotTls,
    /// Looks like TLS but is not a well-formed ClientHello.
    Malformed(&'static str),
}

/// Record header: type, version, length.
const RECORD_HEADER: usize = 5;
const HANDSHAKE: u8 = 0x16;
const CLIENT_HELLO: u8 = 0x01;
/// The largest ClientHello accepted, across records (post-quantum key shares make them grow).
pub const MAX_HELLO: usize = 64 * 1024;

/// Inspect `buf`, the bytes read so far. `None`: need more bytes.
pub fn inspect(buf: &[u8]) -> Option<Hello> {
    if buf.is_empty() {
        return None;
    }
    if buf[0] != HANDSHAKE {
        return Some(Hello::NotTls);
    }
    // Reassemble the handshake message from consecutive handshake records.
    let mut msg = Vec::new();
    let mut rest = buf;
    loop {
        if rest.len() < RECORD_HEADER {
            return None;
        }
        if rest[0] != HANDSHAKE {
            return Some(Hello::Malformed(
                "ClientHello interrupted by another record type",
            ));
        }
        if rest[1] != 3 {
            return Some(Hello::Malformed("unknown TLS record version"));
        }
        let len = u16::from_be_bytes([rest[3], rest[4]]) as usize;
        if len == 0 || len > 16384 + 2048 {
            return Some(Hello::Malformed("bad TLS record length"));
        }
        if rest.len() < RECORD_HEADER + len {
            return None;
        }
        msg.extend_from_slice(&rest[RECORD_HEADER..RECORD_HEADER + len]);
        rest = &rest[RECORD_HEADER + len..];
        if msg.len() >= 4 {
            if msg[0] != CLIENT_HELLO {
                return Some(Hello::Malformed(
                    "first handshake message is not a ClientHello",
                ));
            }
            let body_len = u32::from_be_bytes([0, msg[1], msg[2], msg[3]]) as usize;
            if body_len + 4 > MAX_HELLO {
                return Some(Hello::Malformed("ClientHello too large"));
            }
            if msg.len() >= body_len + 4 {
                return Some(match parse_client_hello(&msg[4..4 + body_len]) {
                    Ok(sni) => Hello::Tls { sni },
                    Err(e) => Hello::Malformed(e),
                });
            }
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("truncated ClientHello");
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<usize, &'static str> {
        Ok(self.take(1)?[0] as usize)
    }
    fn u16(&mut self) -> Result<usize, &'static str> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]) as usize)
    }
}

fn parse_client_hello(body: &[u8]) -> Result<Option<String>, &'static str> {
    let mut r = Reader(body);
    r.take(2)?; // legacy_version
    r.take(32)?; // random
    let n = r.u8()?;
    r.take(n)?; // session id
    let n = r.u16()?;
    r.take(n)?; // cipher suites
    let n = r.u8()?;
    r.take(n)?; // compression methods
    if r.0.is_empty() {
        return Ok(None); // no extensions at all
    }
    let n = r.u16()?;
    let mut exts = Reader(r.take(n)?);
    let mut sni = None;
    while !exts.0.is_empty() {
        let ty = exts.u16()?;
        let len = exts.u16()?;
        let data = exts.take(len)?;
        if ty != 0 {
            continue;
        }
        if sni.is_some() {
            return Err("two server_name extensions");
        }
        let mut d = Reader(data);
        let list_len = d.u16()?;
        let mut list = Reader(d.take(list_len)?);
        while !list.0.is_empty() {
            let name_type = list.u8()?;
            let len = list.u16()?;
            let name = list.take(len)?;
            if name_type != 0 {
                continue;
            }
            if sni.is_some() {
                return Err("two host names in server_name");
            }
            let name = std::str::from_utf8(name).map_err(|_| "server_name is not ASCII")?;
            if !name.is_ascii() || name.is_empty() {
                return Err("server_name is not an ASCII host name");
            }
            sni = Some(name.to_ascii_lowercase());
        }
    }
    Ok(sni)
}

// address-literal: never connected (ClientHello bytes parsed only)
#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ClientHello with the given SNI, split into records of `chunk` bytes.
    pub(crate) fn hello(sni: Option<&str>, chunk: usize) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend([7u8; 32]);
        body.push(0); // session id
        body.extend([0, 2, 0x13, 0x01]); // one cipher suite
        body.extend([1, 0]); // null compression
        let mut exts = Vec::new();
        if let Some(name) = sni {
            let n = name.len() as u16;
            exts.extend([0, 0]);
            exts.extend((n + 5).to_be_bytes());
            exts.extend((n + 3).to_be_bytes());
            exts.push(0);
            exts.extend(n.to_be_bytes());
            exts.extend(name.as_bytes());
        }
        exts.extend([0, 43, 0, 3, 2, 3, 4]); // supported_versions
        body.extend((exts.len() as u16).to_be_bytes());
        body.extend(exts);
        let mut msg = vec![CLIENT_HELLO];
        msg.extend(&(body.len() as u32).to_be_bytes()[1..]);
        msg.extend(body);
        let mut out = Vec::new();
        for part in msg.chunks(chunk) {
            out.extend([HANDSHAKE, 3, 1]);
            out.extend((part.len() as u16).to_be_bytes());
            out.extend(part);
        }
        out
    }

    #[test]
    fn reads_sni_across_records_and_partial_input() {
        let h = hello(Some("Example.COM"), 20);
        for cut in 0..h.len() {
            assert_eq!(inspect(&h[..cut]), None, "cut at {cut}");
        }
        assert_eq!(
            inspect(&h),
            Some(Hello::Tls {
                sni: Some("example.com".into())
            })
        );
        assert_eq!(inspect(&hello(None, 1000)), Some(Hello::Tls { sni: None }));
        assert_eq!(inspect(b"GET / HTTP/1.1\r\n"), Some(Hello::NotTls));
        let mut bad = hello(Some("a.com"), 1000);
        bad[5] = 2; // not a ClientHello
        assert!(matches!(inspect(&bad), Some(Hello::Malformed(_))));
        // A length that claims more than the body has.
        let mut trunc = hello(Some("a.com"), 1000);
        let n = trunc.len();
        trunc[n - 8] = 0xff;
        assert!(matches!(inspect(&trunc), Some(Hello::Malformed(_))));
    }
}
