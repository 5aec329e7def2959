//! Which proxy a connection to the API server goes through, chosen as kubectl chooses it.
//!
//! kubectl (client-go) uses the kubeconfig cluster's `proxy-url` when set, for every request and
//! whatever `NO_PROXY` says; otherwise Go's `http.ProxyFromEnvironment`: `HTTPS_PROXY`/`https_proxy`
//! for `https://` servers, `HTTP_PROXY`/`http_proxy` for `http://` ones, never for `localhost` or a
//! loopback address, and not for a server that `NO_PROXY`/`no_proxy` names (hosts, domains with or
//! without a leading `.` or `*.`, an optional `:port`, IP addresses, CIDRs, or `*`). The rules are
//! those of golang.org/x/net `http/httpproxy/proxy.go` (`useProxy`, `init`, `parseProxy`).

use std::net::IpAddr;

use http::Uri;

/// The proxy settings of the environment (the upper-case name wins, as in Go).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyEnv {
    /// `HTTP_PROXY` or `http_proxy`.
    pub http_proxy: Option<String>,
    /// `HTTPS_PROXY` or `https_proxy`.
    pub https_proxy: Option<String>,
    /// `NO_PROXY` or `no_proxy`.
    pub no_proxy: Option<String>,
}

impl ProxyEnv {
    /// Reads the process environment.
    pub fn from_env() -> Self {
        let any = |names: [&str; 2]| {
            names
                .iter()
                .find_map(|name| std::env::var(name).ok().filter(|value| !value.is_empty()))
        };
        Self {
            http_proxy: any(["HTTP_PROXY", "http_proxy"]),
            https_proxy: any(["HTTPS_PROXY", "https_proxy"]),
            no_proxy: any(["NO_PROXY", "no_proxy"]),
        }
    }
}

/// A proxy URL that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// The kubeconfig's `proxy-url` does not parse.
    #[error("the kubeconfig's proxy-url {url:?} is not a URL: {cause}")]
    NotAUrl {
        /// The URL as written.
        url: String,
        /// Why it does not parse.
        cause: String,
    },
    /// The kubeconfig's `proxy-url` has a scheme other than http, https or socks5.
    #[error("the kubeconfig's proxy-url {url:?} has scheme {scheme:?}: it must be http, https or socks5")]
    Scheme {
        /// The URL as written.
        url: String,
        /// Its scheme (empty when it has none).
        scheme: String,
    },
    /// The environment's proxy is not an address, even with `http://` before it.
    #[error("invalid proxy address {0:?} in the environment")]
    InvalidEnv(String),
}

/// The proxy for requests to `server`: the kubeconfig's `proxy-url` if given, else the
/// environment's as Go applies it. An error names a proxy URL that cannot be used.
pub fn proxy_for(server: &Uri, kubeconfig_proxy: Option<&str>, env: &ProxyEnv) -> Result<Option<Uri>, ProxyError> {
    if let Some(url) = kubeconfig_proxy.filter(|url| !url.trim().is_empty()) {
        return parse_kubeconfig_proxy(url).map(Some);
    }
    let configured = match server.scheme_str() {
        Some("https") => env.https_proxy.as_deref(),
        Some("http") => env.http_proxy.as_deref(),
        _ => None,
    };
    let Some(configured) = configured else {
        return Ok(None);
    };
    let Some(host) = server.host() else {
        return Ok(None);
    };
    let port = server
        .port_u16()
        .unwrap_or(if server.scheme_str() == Some("http") { 80 } else { 443 });
    if !use_proxy(host, port, env.no_proxy.as_deref().unwrap_or("")) {
        return Ok(None);
    }
    parse_env_proxy(configured).map(Some)
}

/// client-go's `parseProxyURL`: a kubeconfig `proxy-url` must be http, https or socks5.
fn parse_kubeconfig_proxy(url: &str) -> Result<Uri, ProxyError> {
    let uri: Uri = url
        .trim()
        .parse()
        .map_err(|err: http::uri::InvalidUri| ProxyError::NotAUrl {
            url: url.to_string(),
            cause: err.to_string(),
        })?;
    match uri.scheme_str() {
        Some("http" | "https" | "socks5") => Ok(uri),
        other => Err(ProxyError::Scheme {
            url: url.to_string(),
            scheme: other.unwrap_or("").to_string(),
        }),
    }
}

/// Go's `parseProxy`: a value without a known scheme is taken as `http://VALUE`.
fn parse_env_proxy(value: &str) -> Result<Uri, ProxyError> {
    let value = value.trim();
    if let Ok(uri) = value.parse::<Uri>() {
        if matches!(uri.scheme_str(), Some("http" | "https" | "socks5")) && uri.host().is_some() {
            return Ok(uri);
        }
    }
    format!("http://{value}")
        .parse::<Uri>()
        .ok()
        .filter(|uri| uri.host().is_some())
        .ok_or_else(|| ProxyError::InvalidEnv(value.to_string()))
}

/// Go's `useProxy`: false for localhost, loopback addresses, and hosts `no_proxy` names.
pub fn use_proxy(host: &str, port: u16, no_proxy: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    if host == "localhost" {
        return false;
    }
    let ip = host.parse::<IpAddr>().ok();
    if ip.is_some_and(|ip| ip.is_loopback()) {
        return false;
    }
    !no_proxy
        .split(',')
        .map(|entry| entry.trim().to_ascii_lowercase())
        .filter(|entry| !entry.is_empty())
        .any(|entry| entry_matches(&entry, &host, ip, port))
}

/// Whether one `NO_PROXY` entry covers the host (and port).
fn entry_matches(entry: &str, host: &str, ip: Option<IpAddr>, port: u16) -> bool {
    if entry == "*" {
        return true;
    }
    if let Some((network, bits)) = entry.split_once('/') {
        return match (network.parse::<IpAddr>(), bits.parse::<u8>(), ip) {
            (Ok(network), Ok(bits), Some(ip)) => cidr_contains(network, bits, ip),
            _ => false,
        };
    }
    let (entry_host, entry_port) = split_host_port(entry);
    if entry_host.is_empty() {
        return false;
    }
    let port_ok = entry_port.is_none_or(|p| p == port);
    if let Ok(entry_ip) = entry_host.parse::<IpAddr>() {
        return ip == Some(entry_ip) && port_ok;
    }
    let domain = entry_host.strip_prefix('*').unwrap_or(entry_host);
    let matches = match domain.strip_prefix('.') {
        // ".example.com" (or "*.example.com"): subdomains only.
        Some(_) => host.ends_with(domain),
        // "example.com": the host itself and its subdomains.
        None => host == domain || host.ends_with(&format!(".{domain}")),
    };
    matches && port_ok
}

/// `host:port`, `[v6]:port`, or a bare host (an IPv6 address without brackets has no port).
fn split_host_port(entry: &str) -> (&str, Option<u16>) {
    if let Some(rest) = entry.strip_prefix('[') {
        if let Some((host, after)) = rest.split_once(']') {
            return (host, after.strip_prefix(':').and_then(|p| p.parse().ok()));
        }
    }
    match entry.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse() {
            Ok(port) => (host, Some(port)),
            Err(_) => (entry, None),
        },
        _ => (entry, None),
    }
}

fn cidr_contains(network: IpAddr, bits: u8, ip: IpAddr) -> bool {
    match (network, ip) {
        (IpAddr::V4(network), IpAddr::V4(ip)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(network) & mask == u32::from(ip) & mask
        }
        (IpAddr::V6(network), IpAddr::V6(ip)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(network) & mask == u128::from(ip) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(https: Option<&str>, http: Option<&str>, no_proxy: Option<&str>) -> ProxyEnv {
        ProxyEnv {
            http_proxy: http.map(str::to_string),
            https_proxy: https.map(str::to_string),
            no_proxy: no_proxy.map(str::to_string),
        }
    }

    fn chosen(server: &str, kubeconfig: Option<&str>, env: &ProxyEnv) -> Option<String> {
        proxy_for(&server.parse().unwrap(), kubeconfig, env)
            .unwrap()
            .map(|uri| uri.to_string())
    }

    #[test]
    fn https_servers_use_https_proxy_and_http_servers_http_proxy() {
        let both = env(Some("http://secure:3128"), Some("http://plain:3128"), None);
        assert_eq!(
            chosen("https://k8s.example.com", None, &both).as_deref(),
            Some("http://secure:3128/")
        );
        assert_eq!(
            chosen("http://k8s.example.com:8080", None, &both).as_deref(),
            Some("http://plain:3128/")
        );
        // As in Go, an https server never falls back to HTTP_PROXY.
        let http_only = env(None, Some("http://plain:3128"), None);
        assert_eq!(chosen("https://k8s.example.com", None, &http_only), None);
    }

    #[test]
    fn a_bare_host_port_is_an_http_proxy() {
        let bare = env(Some("proxy.corp:3128"), None, None);
        assert_eq!(
            chosen("https://k8s.example.com", None, &bare).as_deref(),
            Some("http://proxy.corp:3128/")
        );
        let socks = env(Some("socks5://127.0.0.1:1080"), None, None);
        assert_eq!(
            chosen("https://k8s.example.com", None, &socks).as_deref(),
            Some("socks5://127.0.0.1:1080/")
        );
    }

    #[test]
    fn loopback_and_localhost_are_never_proxied_from_the_environment() {
        let proxy = env(Some("http://proxy:3128"), None, None);
        for server in [
            "https://localhost:6443",
            "https://127.0.0.1:6443",
            "https://127.9.9.9",
            "https://[::1]:6443",
        ] {
            assert_eq!(chosen(server, None, &proxy), None, "{server}");
        }
    }

    #[test]
    fn the_kubeconfig_proxy_url_wins_and_ignores_no_proxy() {
        let everything_excluded = env(Some("http://env:3128"), None, Some("*"));
        assert_eq!(
            chosen(
                "https://127.0.0.1:6443",
                Some("http://kubeconfig:8080"),
                &everything_excluded
            )
            .as_deref(),
            Some("http://kubeconfig:8080/")
        );
        assert_eq!(
            proxy_for(&"https://x".parse().unwrap(), Some("ftp://p:1"), &ProxyEnv::default())
                .unwrap_err()
                .to_string(),
            "the kubeconfig's proxy-url \"ftp://p:1\" has scheme \"ftp\": it must be http, https or socks5"
        );
    }

    #[test]
    fn no_proxy_hosts_domains_ports_ips_cidrs_and_wildcard() {
        let cases = [
            ("k8s.example.com", 443, "k8s.example.com", false),
            ("k8s.example.com", 443, "example.com", false),
            ("k8s.example.com", 443, ".example.com", false),
            ("k8s.example.com", 443, "*.example.com", false),
            ("example.com", 443, ".example.com", true),
            ("example.com", 443, "example.com", false),
            ("notexample.com", 443, "example.com", true),
            ("k8s.example.com", 6443, "example.com:6443", false),
            ("k8s.example.com", 443, "example.com:6443", true),
            ("10.1.2.3", 443, "10.0.0.0/8", false),
            ("11.1.2.3", 443, "10.0.0.0/8", true),
            ("10.1.2.3", 443, "10.1.2.3", false),
            ("10.1.2.3", 6443, "10.1.2.3:443", true),
            ("fd00::5", 443, "fd00::/8", false),
            ("fd00::5", 443, "[fd00::5]:443", false),
            ("anything.example.org", 443, "*", false),
            ("K8S.Example.COM", 443, "EXAMPLE.com", false),
            ("k8s.example.com", 443, " other.org , ,example.com ", false),
            ("k8s.example.com", 443, "other.org,,", true),
            ("k8s.example.com", 443, "", true),
        ];
        for (host, port, no_proxy, expected) in cases {
            assert_eq!(
                use_proxy(host, port, no_proxy),
                expected,
                "{host}:{port} with NO_PROXY={no_proxy:?}"
            );
        }
    }

    #[test]
    fn environment_no_proxy_applies_to_the_server() {
        let proxy = env(Some("http://proxy:3128"), None, Some("k8s.example.com"));
        assert_eq!(chosen("https://k8s.example.com:6443", None, &proxy), None);
        assert!(chosen("https://other.example.com:6443", None, &proxy).is_some());
    }
}
