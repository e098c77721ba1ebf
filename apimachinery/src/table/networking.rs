//! Printers of the `networking.k8s.io` and `discovery.k8s.io` groups.

use jiff::Timestamp;
use serde_json::Value;

use super::core::load_balancer_ingress;
use super::format::{
    age, arr_at, format_label_selector, get, list_with_more, name, opt_int, opt_str, str_at,
};
use super::{Column, Printer};

pub(crate) struct Ingresses;

fn format_hosts(rules: &[Value]) -> String {
    const MAX: usize = 3;
    let mut list: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if list.len() == MAX {
            more = true;
        }
        let host = str_at(rule, "/host");
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".to_owned();
    }
    let ret = list.join(",");
    if more {
        format!("{ret} + {} more...", rules.len() - MAX)
    } else {
        ret
    }
}

impl Printer for Ingresses {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Class",
                "The name of the IngressClass resource that should be used for additional configuration",
            ),
            Column::s(
                "Hosts",
                "Hosts that incoming requests are matched against before the ingress rule",
            ),
            Column::s(
                "Address",
                "Address is a list containing ingress points for the load-balancer",
            ),
            Column::s("Ports", "Ports of TLS configurations that open"),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let address = get(obj, "/status/loadBalancer")
            .map(load_balancer_ingress)
            .unwrap_or_default();
        let ports = if arr_at(obj, "/spec/tls").is_empty() {
            "80"
        } else {
            "80, 443"
        };
        vec![
            name(obj).into(),
            opt_str(obj, "/spec/ingressClassName")
                .unwrap_or("<none>")
                .into(),
            format_hosts(arr_at(obj, "/spec/rules")).into(),
            address.into(),
            ports.into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct IngressClasses;

impl Printer for IngressClasses {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Controller",
                "Controller that is responsible for handling this class",
            ),
            Column::s(
                "Parameters",
                "A reference to a resource with additional parameters",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let parameters = match get(obj, "/spec/parameters") {
            Some(p) => {
                let mut s = str_at(p, "/kind").to_owned();
                if let Some(g) = opt_str(p, "/apiGroup") {
                    s = format!("{s}.{g}");
                }
                format!("{s}/{}", str_at(p, "/name"))
            }
            None => "<none>".to_owned(),
        };
        vec![
            name(obj).into(),
            str_at(obj, "/spec/controller").into(),
            parameters.into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct NetworkPolicies;

impl Printer for NetworkPolicies {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "Pod-Selector",
                "podSelector selects the pods to which this NetworkPolicy object applies.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        // podSelector is not a pointer upstream: a missing one is empty.
        let sel = get(obj, "/spec/podSelector")
            .cloned()
            .unwrap_or(Value::Object(Default::default()));
        vec![
            name(obj).into(),
            format_label_selector(Some(&sel)).into(),
            age(obj, now),
        ]
    }
}

pub(crate) struct ServiceCidrs;

impl Printer for ServiceCidrs {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "CIDRs",
                "CIDRs defines the IP blocks in CIDR notation from which to assign service cluster IPs.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let cidrs: Vec<&str> = arr_at(obj, "/spec/cidrs")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        vec![name(obj).into(), cidrs.join(",").into(), age(obj, now)]
    }
}

/// Upstream declares only `Name` and `ParentRef` for IP addresses (its rows
/// carry a stray age cell, dropped here to keep rows and columns aligned).
pub(crate) struct IpAddresses;

impl Printer for IpAddresses {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "ParentRef",
                "ParentRef references the resource that an IPAddress is attached to.",
            ),
        ]
    }

    fn cells(&self, obj: &Value, _now: Timestamp) -> Vec<Value> {
        let parent = match get(obj, "/spec/parentRef") {
            Some(p) => {
                let resource = str_at(p, "/resource");
                let gr = match str_at(p, "/group") {
                    "" => resource.to_owned(),
                    g => format!("{resource}.{g}"),
                };
                let mut s = gr.to_lowercase();
                let ns = str_at(p, "/namespace");
                if !ns.is_empty() {
                    s = format!("{s}/{ns}");
                }
                format!("{s}/{}", str_at(p, "/name"))
            }
            None => "<none>".to_owned(),
        };
        vec![name(obj).into(), parent.into()]
    }
}

pub(crate) struct EndpointSlices;

impl Printer for EndpointSlices {
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::name(),
            Column::s(
                "AddressType",
                "addressType specifies the type of address carried by this EndpointSlice.",
            ),
            Column::s(
                "Ports",
                "ports specifies the list of network ports exposed by each endpoint in this slice.",
            ),
            Column::s(
                "Endpoints",
                "endpoints is a list of unique endpoints in this slice.",
            ),
            Column::age(),
        ]
    }

    fn cells(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        let ports: Vec<String> = arr_at(obj, "/ports")
            .iter()
            .map(|p| match (opt_int(p, "/port"), opt_str(p, "/name")) {
                (Some(n), _) => n.to_string(),
                (None, Some(name)) => name.to_owned(),
                (None, None) => "*".to_owned(),
            })
            .collect();
        let addresses: Vec<String> = arr_at(obj, "/endpoints")
            .iter()
            .flat_map(|e| arr_at(e, "/addresses").iter())
            .map(|a| a.as_str().unwrap_or("").to_owned())
            .collect();
        vec![
            name(obj).into(),
            str_at(obj, "/addressType").into(),
            list_with_more(&ports, 3).into(),
            list_with_more(&addresses, 3).into(),
            age(obj, now),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::testutil::*;
    use serde_json::json;

    #[test]
    fn ingresses() {
        assert_eq!(
            names(&Ingresses),
            ["Name", "Class", "Hosts", "Address", "Ports", "Age"]
        );
        let ing = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(60)},
            "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example.com"]}],
                "rules": [{"host": "a.example.com"}, {"host": "b.example.com"}, {}, {"host": "c.example.com"}, {"host": "d.example.com"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}, {"ip": "10.0.0.1"}]}}
        });
        assert_eq!(
            row(&Ingresses, &ing),
            [
                "web",
                "nginx",
                "a.example.com,b.example.com,c.example.com + 2 more...",
                "10.0.0.1,10.0.0.2",
                "80, 443",
                "60s"
            ]
        );
        let bare = json!({"metadata": {"name": "x"}, "spec": {"rules": [{}]}});
        assert_eq!(row(&Ingresses, &bare)[1..5], ["<none>", "*", "", "80"]);
    }

    #[test]
    fn ingress_classes_and_policies() {
        let ic = json!({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx",
            "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb"}}});
        assert_eq!(
            row(&IngressClasses, &ic)[1..3],
            [
                "k8s.io/ingress-nginx",
                "IngressParameters.k8s.example.com/external-lb"
            ]
        );
        let np = json!({"metadata": {"name": "deny"}, "spec": {"podSelector": {}}});
        assert_eq!(row(&NetworkPolicies, &np)[1], "<none>");
        let np2 = json!({"metadata": {"name": "db"}, "spec": {"podSelector": {"matchLabels": {"role": "db"}}}});
        assert_eq!(row(&NetworkPolicies, &np2)[1], "role=db");
    }

    #[test]
    fn endpoint_slices() {
        let es = json!({
            "metadata": {"name": "web-abc"}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 80}, {"name": "named"}, {}, {"port": 9090}],
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3"]}, {"addresses": ["10.0.0.4"]}]
        });
        assert_eq!(
            row(&EndpointSlices, &es)[1..4],
            [
                "IPv4",
                "80,named,* + 1 more...",
                "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more..."
            ]
        );
        let empty = json!({"metadata": {"name": "e"}, "addressType": "IPv6"});
        assert_eq!(row(&EndpointSlices, &empty)[2..4], ["<unset>", "<unset>"]);
    }

    #[test]
    fn service_cidrs_and_ip_addresses() {
        let sc = json!({"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/16", "fd00::/108"]}});
        assert_eq!(row(&ServiceCidrs, &sc)[1], "10.96.0.0/16,fd00::/108");
        let ip = json!({"metadata": {"name": "10.96.0.1"}, "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}}});
        assert_eq!(
            row(&IpAddresses, &ip),
            ["10.96.0.1", "services/default/kubernetes"]
        );
        let gw = json!({"metadata": {"name": "x"}, "spec": {"parentRef": {"group": "gateway.networking.k8s.io", "resource": "Gateways", "name": "gw"}}});
        assert_eq!(
            row(&IpAddresses, &gw)[1],
            "gateways.gateway.networking.k8s.io/gw"
        );
    }
}
