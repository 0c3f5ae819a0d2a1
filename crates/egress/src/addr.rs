//! Addresses the proxy will not connect to unless they are listed explicitly.
//!
//! A name on the allowlist can be made to resolve anywhere by whoever controls its DNS, so the
//! proxy checks what it resolved to before connecting: the host's own services (loopback), the
//! local network (private, link-local, CGNAT) and cloud metadata services are out of reach
//! unless the policy lists that exact name or address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is special.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrClass {
    Unspecified,
    Loopback,
    Private,
    LinkLocal,
    /// 100.64.0.0/10, carrier-grade NAT (also where some clouds put services).
    SharedAddressSpace,
    Multicast,
    Broadcast,
    /// Reserved, documentation, benchmarking or protocol-assignment ranges.
    Reserved,
    /// A cloud provider's instance metadata service.
    CloudMetadata,
}

impl fmt::Display for AddrClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddrClass::Unspecified => "unspecified",
            AddrClass::Loopback => "loopback",
            AddrClass::Private => "private",
            AddrClass::LinkLocal => "link-local",
            AddrClass::SharedAddressSpace => "shared (CGNAT)",
            AddrClass::Multicast => "multicast",
            AddrClass::Broadcast => "broadcast",
            AddrClass::Reserved => "reserved",
            AddrClass::CloudMetadata => "cloud metadata",
        })
    }
}

/// Metadata services, checked before the ranges that contain them so the reason is precise.
const METADATA_V4: [Ipv4Addr; 4] = [
    Ipv4Addr::new(169, 254, 169, 254), // AWS, GCP, Azure, OpenStack, …
    Ipv4Addr::new(169, 254, 170, 2),   // AWS ECS task metadata
    Ipv4Addr::new(169, 254, 169, 123), // AWS time sync
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud
];
const METADATA_V6: [Ipv6Addr; 1] = [
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254), // AWS (IPv6 endpoint)
];

/// The class of a special address, `None` for an ordinary public one.
pub fn classify(ip: IpAddr) -> Option<AddrClass> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddrClass> {
    if METADATA_V4.contains(&ip) {
        return Some(AddrClass::CloudMetadata);
    }
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => AddrClass::Unspecified,
        (127, _, _) => AddrClass::Loopback,
        (10, _, _) | (192, 168, _) => AddrClass::Private,
        (172, 16..=31, _) => AddrClass::Private,
        (169, 254, _) => AddrClass::LinkLocal,
        (100, 64..=127, _) => AddrClass::SharedAddressSpace,
        (224..=239, _, _) => AddrClass::Multicast,
        (255, 255, 255) if ip == Ipv4Addr::BROADCAST => AddrClass::Broadcast,
        (240..=255, _, _) => AddrClass::Reserved,
        (192, 0, 0) | (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => AddrClass::Reserved,
        (198, 18..=19, _) => AddrClass::Reserved,
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddrClass> {
    if METADATA_V6.contains(&ip) {
        return Some(AddrClass::CloudMetadata);
    }
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some(AddrClass::Unspecified);
    }
    if ip.is_loopback() {
        return Some(AddrClass::Loopback);
    }
    // Addresses that embed an IPv4 address: judge the embedded one.
    let embedded =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64 well-known prefix
        return classify_v4(embedded(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        // 6to4
        return classify_v4(embedded(s[1], s[2]));
    }
    if s[..6] == [0, 0, 0, 0, 0, 0] {
        // IPv4-compatible (deprecated)
        return Some(classify_v4(embedded(s[6], s[7])).unwrap_or(AddrClass::Reserved));
    }
    Some(match s[0] {
        x if x & 0xfe00 == 0xfc00 => AddrClass::Private, // unique local fc00::/7
        x if x & 0xffc0 == 0xfe80 => AddrClass::LinkLocal,
        x if x & 0xffc0 == 0xfec0 => AddrClass::Private, // deprecated site-local
        x if x & 0xff00 == 0xff00 => AddrClass::Multicast,
        0x2001 if s[1] == 0x0db8 => AddrClass::Reserved, // documentation
        _ => return None,
    })
}

// address-literal: never connected (classification only)
#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Option<AddrClass> {
        classify(s.parse().unwrap())
    }

    #[test]
    fn special_addresses() {
        use AddrClass::*;
        for (addr, class) in [
            ("127.0.0.1", Loopback),
            ("127.8.9.10", Loopback),
            ("::1", Loopback),
            ("::ffff:127.0.0.1", Loopback),
            ("0.0.0.0", Unspecified),
            ("::", Unspecified),
            ("10.1.2.3", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("fd12::1", Private),
            ("169.254.1.1", LinkLocal),
            ("fe80::1", LinkLocal),
            ("169.254.169.254", CloudMetadata),
            ("fd00:ec2::254", CloudMetadata),
            ("100.100.100.200", CloudMetadata),
            ("::ffff:169.254.169.254", CloudMetadata),
            ("64:ff9b::a9fe:a9fe", CloudMetadata),
            ("2002:7f00:1::", Loopback),
            ("100.64.0.1", SharedAddressSpace),
            ("224.0.0.1", Multicast),
            ("ff02::1", Multicast),
            ("255.255.255.255", Broadcast),
            ("240.0.0.1", Reserved),
        ] {
            assert_eq!(c(addr), Some(class), "{addr}");
        }
        for public in [
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "93.184.216.34",
        ] {
            assert_eq!(c(public), None, "{public}");
        }
    }
}
