//! The generator's output for services it must name with care.

use super::*;

fn method(proto_name: &str, name: &str) -> Method {
    Method {
        name: name.to_owned(),
        proto_name: proto_name.to_owned(),
        comments: prost_build::Comments::default(),
        input_type: "super::Req".to_owned(),
        output_type: "super::Rep".to_owned(),
        input_proto_type: ".pkg.Req".to_owned(),
        output_proto_type: ".pkg.Rep".to_owned(),
        options: Default::default(),
        client_streaming: false,
        server_streaming: false,
    }
}

#[test]
fn rpcs_named_like_the_clients_own_methods_get_a_prefix() {
    let service = Service {
        name: "Store".to_owned(),
        proto_name: "Store".to_owned(),
        package: "pkg".to_owned(),
        comments: prost_build::Comments::default(),
        methods: vec![
            method("New", "new"),
            method("GetRef", "get_ref"),
            method("GetMut", "get_mut"),
            method("IntoInner", "into_inner"),
            method("Get", "get"),
        ],
        options: Default::default(),
    };
    let mut buf = String::new();
    write_client(&service, &mut buf);
    for name in [
        "call_new",
        "call_get_ref",
        "call_get_mut",
        "call_into_inner",
        "get",
    ] {
        assert!(buf.contains(&format!("pub async fn {name}(")), "{name}:\n{buf}");
    }
    assert_eq!(buf.matches("pub fn new(").count(), 1, "the constructor, once");
    assert!(buf.contains("pkg.Store/New"), "the wire name is unchanged");
}

#[test]
fn snake_case_of_service_names() {
    assert_eq!(snake("Echo"), "echo");
    assert_eq!(snake("KeyValue"), "key_value");
    assert_eq!(snake("Http2Proxy"), "http2_proxy");
    assert_eq!(snake("r#Self"), "self");
}
