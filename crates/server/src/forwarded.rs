//! The client's address behind a proxy. A node behind HAProxy (or a CDN) sees the proxy's
//! address as its TCP peer, so per-address limits would count every client as one. When the
//! peer is a proxy the operator named (`serve --trusted-proxy`), the client is the right-most
//! address of `X-Forwarded-For` that is not itself a trusted proxy; from any other peer the
//! header is ignored (a client can write anything in it).

use std::net::IpAddr;

use axum::http::HeaderMap;

/// Most trusted proxy entries.
pub const TRUSTED_PROXIES_MAX: usize = 64;
/// `X-Forwarded-For` entries looked at, from the right.
const HOPS_MAX: usize = 16;

/// An address block: `10.0.0.0/8`, `::1/128`, or one address (`127.0.0.1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let bad = || format!("{raw:?} is not an address or an address block (10.0.0.0/8)");
        let (addr, prefix) = match raw.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (raw, None),
        };
        let net: IpAddr = addr.trim().parse().map_err(|_| bad())?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(bad)?,
            None => max,
        };
        Ok(Self { net, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match (self.net, ip) {
            // An IPv4 client seen over an IPv6 socket.
            (IpAddr::V4(_), IpAddr::V6(v6)) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            _ => ip,
        };
        match (self.net, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<Cidr>);

impl TrustedProxies {
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        if entries.len() > TRUSTED_PROXIES_MAX {
            return Err(format!("at most {TRUSTED_PROXIES_MAX} trusted proxies"));
        }
        entries
            .iter()
            .map(|e| Cidr::parse(e.as_ref()))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|cidr| cidr.contains(ip))
    }

    /// The client of a request whose TCP peer is `peer`.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if self.0.is_empty() || !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        // Every X-Forwarded-For line, in order, read from the right.
        let hops: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .collect();
        for hop in hops.iter().rev().take(HOPS_MAX) {
            let Ok(ip) = hop.trim().parse::<IpAddr>() else {
                // Garbage: what is left of it cannot be believed.
                return client;
            };
            client = ip;
            if !self.trusts(ip) {
                return ip;
            }
        }
        client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append("x-forwarded-for", v.parse().unwrap());
        }
        headers
    }

    fn ip(raw: &str) -> IpAddr {
        raw.parse().unwrap()
    }

    #[test]
    fn blocks_parse_and_contain() {
        let net = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(net.contains(ip("10.200.3.4")));
        assert!(!net.contains(ip("11.0.0.1")));
        assert!(net.contains(ip("::ffff:10.1.2.3")), "IPv4-mapped");
        assert!(Cidr::parse("::1").unwrap().contains(ip("::1")));
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
        assert!(Cidr::parse("fd00::/8").unwrap().contains(ip("fd12::1")));
        for bad in [
            "10.0.0.0/33",
            "10.0.0/8",
            "example.com",
            "",
            "::/129",
            "1.2.3.4/x",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_client_is_the_right_most_untrusted_hop() {
        let trusted = TrustedProxies::parse(&["10.0.0.0/8", "127.0.0.1"]).unwrap();
        let proxy = ip("10.0.0.5");
        // Through one proxy.
        assert_eq!(
            trusted.client(proxy, &headers(&["203.0.113.9"])),
            ip("203.0.113.9")
        );
        // A client that writes its own header cannot choose its address.
        assert_eq!(
            trusted.client(proxy, &headers(&["1.1.1.1, 203.0.113.9"])),
            ip("203.0.113.9")
        );
        // Through two proxies (a CDN in front of the balancer), over two header lines.
        assert_eq!(
            trusted.client(proxy, &headers(&["198.51.100.7", "10.9.9.9"])),
            ip("198.51.100.7")
        );
        // From a peer that is no proxy, the header is ignored.
        assert_eq!(
            trusted.client(ip("198.51.100.1"), &headers(&["203.0.113.9"])),
            ip("198.51.100.1")
        );
        // No header, or garbage: the last believable address.
        assert_eq!(trusted.client(proxy, &HeaderMap::new()), proxy);
        assert_eq!(trusted.client(proxy, &headers(&["nonsense"])), proxy);
        // Nobody trusted: the peer.
        assert_eq!(
            TrustedProxies::default().client(proxy, &headers(&["203.0.113.9"])),
            proxy
        );
    }

    #[test]
    fn the_list_is_bounded() {
        let many: Vec<String> = (0..=TRUSTED_PROXIES_MAX)
            .map(|i| format!("10.0.0.{i}"))
            .collect();
        assert!(TrustedProxies::parse(&many).is_err());
        assert!(TrustedProxies::parse(&["bad"]).is_err());
    }
}
