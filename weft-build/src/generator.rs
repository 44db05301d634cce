//! The service generator: typed clients and servers of weft RPC for the
//! services of `.proto` files, written next to prost's messages.

use std::fmt::Write;

use prost_build::{Method, Service};

/// A [`prost_build::ServiceGenerator`] writing, for each service `Foo` in
/// package `pkg`, a module `foo_server` (the trait `Foo` to implement and
/// the `tower::Service` `FooServer` around it) and a module `foo_client`
/// (`FooClient`, one async method per RPC). The generated code names only
/// `std`, `weft` and the messages' types.
///
/// Use it through [`compile_protos`](super::compile_protos), or give it
/// to a `prost_build::Config` of your own:
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let files = protox::compile(["proto/echo.proto"], ["proto"])?;
/// prost_build::Config::new()
///     .service_generator(Box::new(weft_build::Generator::new()))
///     .compile_fds(files)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Generator {
    client: bool,
    server: bool,
}

impl Default for Generator {
    fn default() -> Self {
        Self::new()
    }
}

impl Generator {
    /// A generator writing clients and servers.
    pub fn new() -> Self {
        Self {
            client: true,
            server: true,
        }
    }

    /// Whether to write the `foo_client` modules (default yes).
    pub fn client(mut self, yes: bool) -> Self {
        self.client = yes;
        self
    }

    /// Whether to write the `foo_server` modules (default yes).
    pub fn server(mut self, yes: bool) -> Self {
        self.server = yes;
        self
    }
}

impl prost_build::ServiceGenerator for Generator {
    fn generate(&mut self, service: Service, buf: &mut String) {
        if self.server {
            write_server(&service, buf);
        }
        if self.client {
            write_client(&service, buf);
        }
    }
}

/// The generated client's own methods, which an RPC of the same name
/// (`New`, `GetRef`, `GetMut`, `IntoInner`) must not take.
const CLIENT_METHODS: [&str; 4] = ["new", "get_ref", "get_mut", "into_inner"];

/// The name of the client's method for an RPC: its snake-case name, or
/// `call_` and it when that is one of the client's own methods.
fn client_method_name(method: &Method) -> String {
    if CLIENT_METHODS.contains(&method.name.as_str()) {
        format!("call_{}", method.name)
    } else {
        method.name.clone()
    }
}

/// The `r#` of a raw identifier removed.
fn unraw(ident: &str) -> &str {
    ident.strip_prefix("r#").unwrap_or(ident)
}

/// `UpperCamel` (as prost writes service names) to `snake_case`.
fn snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    let mut previous: Option<char> = None;
    for c in unraw(camel).chars() {
        if c.is_uppercase() {
            if previous.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit()) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
        previous = Some(c);
    }
    out
}

/// A message type as named from inside the generated modules, one level
/// below the package's: a path relative to the package (`Foo`,
/// `super::other::Bar`) gains a `super::`; extern ones (`::prost_types::Any`,
/// `crate::x::Y`, and `()` for `google.protobuf.Empty`) stay as they are.
fn message_type(rust_type: &str) -> String {
    let relative =
        rust_type.starts_with(|c: char| c.is_alphabetic() || c == '_') && !rust_type.starts_with("crate::");
    if relative {
        format!("super::{rust_type}")
    } else {
        rust_type.to_owned()
    }
}

/// `"pkg.Service"`, what the router matches.
fn full_name(service: &Service) -> String {
    if service.package.is_empty() {
        service.proto_name.clone()
    } else {
        format!("{}.{}", service.package, service.proto_name)
    }
}

/// The proto comments as doc comments, or `fallback`.
fn docs(comments: &prost_build::Comments, indent: u8, fallback: &str, buf: &mut String) {
    if comments.leading.is_empty() && comments.trailing.is_empty() {
        for _ in 0..indent {
            buf.push_str("    ");
        }
        let _ = writeln!(buf, "/// {fallback}");
    } else {
        // Detached comments are not about the item.
        let attached = prost_build::Comments {
            leading_detached: Vec::new(),
            leading: comments.leading.clone(),
            trailing: comments.trailing.clone(),
        };
        attached.append_with_indent(indent, buf);
    }
}

/// The types of a method, as the trait and the client spell them.
struct Types {
    request: String,
    reply: String,
    /// What the handler takes.
    handler_request: String,
    /// What the handler returns in its `Response`.
    handler_reply: String,
    /// What the client returns in its `Response`.
    client_reply: String,
}

fn types(method: &Method) -> Types {
    let request = message_type(&method.input_type);
    let reply = message_type(&method.output_type);
    let handler_request = if method.client_streaming {
        format!("weft::rpc::codegen::Streaming<{request}>")
    } else {
        request.clone()
    };
    let handler_reply = if method.server_streaming {
        format!("ReplyStream<{reply}>")
    } else {
        reply.clone()
    };
    let client_reply = if method.server_streaming {
        format!("weft::rpc::codegen::Streaming<{reply}>")
    } else {
        reply.clone()
    };
    Types {
        request,
        reply,
        handler_request,
        handler_reply,
        client_reply,
    }
}

fn write_server(service: &Service, buf: &mut String) {
    let name = &service.name;
    let module = format!("{}_server", snake(name));
    let server = format!("{}Server", unraw(name));
    let full = full_name(service);

    let _ = writeln!(
        buf,
        "/// The server side of `{full}`: implement [`{module}::{name}`] and serve"
    );
    let _ = writeln!(buf, "/// [`{module}::{server}`] around it.");
    buf.push_str("#[allow(dead_code, missing_docs, clippy::single_match_else)]\n");
    let _ = writeln!(buf, "pub mod {module} {{");

    // The trait.
    buf.push_str(
        "    /// The replies of a streaming method: any `futures::Stream` of\n    /// results, boxed with `Box::pin`.\n",
    );
    buf.push_str("    pub type ReplyStream<T> = weft::rpc::codegen::ReplyStream<T>;\n\n");
    docs(&service.comments, 1, &format!("The methods of `{full}`."), buf);
    let _ = writeln!(buf, "    pub trait {name}: Send + Sync + 'static {{");
    for method in &service.methods {
        let t = types(method);
        docs(
            &method.comments,
            2,
            &format!("`{full}/{}`.", method.proto_name),
            buf,
        );
        let _ = writeln!(
            buf,
            "        fn {}(\n            &self,\n            request: weft::rpc::codegen::Request<{}>,\n        ) -> impl std::future::Future<\n            Output = Result<weft::rpc::codegen::Response<{}>, weft::rpc::codegen::Status>,\n        > + Send;",
            method.name, t.handler_request, t.handler_reply,
        );
    }
    buf.push_str("    }\n\n");

    // The service.
    let _ = writeln!(
        buf,
        "    /// Serves `{full}` with an implementation of [`{name}`]: give it to"
    );
    buf.push_str("    /// `weft::rpc::server::Server::builder().add_service(..)`.\n");
    let _ = writeln!(buf, "    pub struct {server}<T> {{");
    buf.push_str("        inner: weft::rpc::codegen::Arc<T>,\n");
    buf.push_str("        limit: weft::rpc::codegen::Limit,\n");
    buf.push_str("    }\n\n");

    let _ = writeln!(buf, "    impl<T> {server}<T> {{");
    let _ = writeln!(buf, "        /// Serves `{full}` with `inner`.");
    buf.push_str("        #[must_use]\n        pub fn new(inner: T) -> Self {\n");
    buf.push_str("            Self::from_arc(weft::rpc::codegen::Arc::new(inner))\n");
    buf.push_str("        }\n\n");
    buf.push_str("        /// Serves with a shared `inner`.\n");
    buf.push_str(
        "        #[must_use]\n        pub fn from_arc(inner: weft::rpc::codegen::Arc<T>) -> Self {\n",
    );
    buf.push_str("            Self {\n                inner,\n                limit: weft::rpc::codegen::Limit::new(None),\n            }\n        }\n\n");
    buf.push_str(
        "        /// Runs at most `max` calls of this service at once, as tower's\n        /// `ConcurrencyLimit` does: `poll_ready` is pending while `max`\n        /// calls run (so `LoadShed` around the service sheds), a call past\n        /// the limit waits before its request is read (one whose turn does\n        /// not come before its deadline is answered `RESOURCE_EXHAUSTED`,\n        /// never run), and a streaming call keeps its turn until its last\n        /// reply.\n",
    );
    buf.push_str(
        "        #[must_use]\n        pub fn max_concurrent_calls(mut self, max: usize) -> Self {\n",
    );
    buf.push_str("            self.limit = weft::rpc::codegen::Limit::new(Some(max));\n");
    buf.push_str("            self\n        }\n\n");
    buf.push_str("        /// The implementation.\n");
    buf.push_str(
        "        #[must_use]\n        pub fn get_ref(&self) -> &T {\n            &self.inner\n        }\n",
    );
    buf.push_str("    }\n\n");

    let _ = writeln!(buf, "    impl<T> Clone for {server}<T> {{");
    buf.push_str("        fn clone(&self) -> Self {\n            Self {\n                inner: self.inner.clone(),\n                limit: self.limit.clone(),\n            }\n        }\n    }\n\n");

    let _ = writeln!(buf, "    impl<T> std::fmt::Debug for {server}<T> {{");
    buf.push_str("        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {\n");
    let _ = writeln!(
        buf,
        "            f.debug_struct(\"{server}\").field(\"limit\", &self.limit).finish_non_exhaustive()"
    );
    buf.push_str("        }\n    }\n\n");

    let _ = writeln!(
        buf,
        "    impl<T> weft::rpc::codegen::NamedService for {server}<T> {{"
    );
    let _ = writeln!(buf, "        const NAME: &'static str = \"{full}\";");
    let early: Vec<String> = service
        .methods
        .iter()
        .filter(|method| idempotent(method))
        .map(|method| format!("{:?}", method.proto_name))
        .collect();
    if !early.is_empty() {
        buf.push_str("\n        // Marked `idempotency_level` IDEMPOTENT or NO_SIDE_EFFECTS: safe to\n");
        buf.push_str("        // run on a call that came as early data.\n");
        let _ = writeln!(
            buf,
            "        fn accepts_early(method: &str) -> bool {{\n            matches!(method, {})\n        }}",
            early.join(" | ")
        );
    }
    buf.push_str("    }\n\n");

    let _ = writeln!(
        buf,
        "    impl<T: {name}> weft::rpc::codegen::Service<weft::rpc::codegen::Call> for {server}<T> {{"
    );
    buf.push_str("        type Response = weft::rpc::codegen::Reply;\n");
    buf.push_str("        type Error = weft::rpc::codegen::Status;\n");
    buf.push_str("        type Future = weft::rpc::codegen::BoxFuture<\n            Result<weft::rpc::codegen::Reply, weft::rpc::codegen::Status>,\n        >;\n\n");
    buf.push_str("        // The call's turn of `max_concurrent_calls`, as tower's\n        // `ConcurrencyLimit` takes it: pending while every turn is taken.\n");
    buf.push_str("        fn poll_ready(\n            &mut self,\n            cx: &mut weft::rpc::codegen::Context<'_>,\n        ) -> weft::rpc::codegen::Poll<Result<(), weft::rpc::codegen::Status>> {\n            self.limit.poll_turn(cx).map(Ok)\n        }\n\n");
    buf.push_str("        fn call(&mut self, call: weft::rpc::codegen::Call) -> Self::Future {\n");
    buf.push_str("            let inner = self.inner.clone();\n");
    buf.push_str("            let turn = self.limit.take_turn();\n");
    buf.push_str(
        "            let method = call.method().rsplit_once('/').map_or(\"\", |(_, method)| method);\n",
    );
    buf.push_str("            match method {\n");
    for method in &service.methods {
        let t = types(method);
        let _ = writeln!(
            buf,
            "                {:?} => Box::pin(async move {{",
            method.proto_name
        );
        buf.push_str("                    let turn = turn.wait().await;\n");
        if method.client_streaming {
            let _ = writeln!(
                buf,
                "                    let request = call.into_streaming_request::<{}>();",
                t.request
            );
        } else {
            let _ = writeln!(
                buf,
                "                    let request = call.into_request::<{}>().await?;",
                t.request
            );
        }
        let _ = writeln!(
            buf,
            "                    let response = inner.{}(request).await?;",
            method.name
        );
        if method.server_streaming {
            buf.push_str(
                "                    let response = response.map(|replies| weft::rpc::codegen::hold(replies, turn));\n",
            );
            buf.push_str("                    Ok(weft::rpc::codegen::Reply::streaming(response))\n");
        } else {
            buf.push_str("                    let reply = weft::rpc::codegen::Reply::unary(response);\n");
            buf.push_str("                    drop(turn);\n");
            buf.push_str("                    Ok(reply)\n");
        }
        buf.push_str("                }),\n");
    }
    buf.push_str("                _ => {\n");
    buf.push_str("                    let status = weft::rpc::codegen::unknown_method(call.method());\n");
    buf.push_str("                    Box::pin(std::future::ready(Err(status)))\n");
    buf.push_str("                }\n");
    buf.push_str("            }\n        }\n    }\n");
    buf.push_str("}\n\n");
}

/// Whether the .proto marks `method` safe to repeat: protobuf's own
/// `option idempotency_level = IDEMPOTENT` (2) or `NO_SIDE_EFFECTS` (1).
fn idempotent(method: &Method) -> bool {
    matches!(method.options.idempotency_level, Some(1 | 2))
}

fn write_client(service: &Service, buf: &mut String) {
    let name = &service.name;
    let module = format!("{}_client", snake(name));
    let client = format!("{}Client", unraw(name));
    let full = full_name(service);

    let _ = writeln!(buf, "/// The client side of `{full}`: [`{module}::{client}`].");
    buf.push_str("#[allow(dead_code, missing_docs, clippy::missing_errors_doc)]\n");
    let _ = writeln!(buf, "pub mod {module} {{");
    docs(&service.comments, 1, &format!("Calls to `{full}`."), buf);
    buf.push_str("    ///\n");
    buf.push_str("    /// Over any `tower::Service` of `weft::rpc::client::RawCall`s: a\n");
    buf.push_str("    /// `weft::rpc::client::Client`, or tower middleware around one.\n");
    buf.push_str("    #[derive(Debug, Clone)]\n");
    let _ = writeln!(buf, "    pub struct {client}<T> {{");
    buf.push_str("        inner: T,\n    }\n\n");

    let _ = writeln!(buf, "    impl<T> {client}<T> {{");
    let _ = writeln!(buf, "        /// Calls to `{full}` over `inner`.");
    buf.push_str("        #[must_use]\n        pub fn new(inner: T) -> Self {\n            Self { inner }\n        }\n\n");
    buf.push_str("        /// The service the calls go through.\n");
    buf.push_str(
        "        #[must_use]\n        pub fn get_ref(&self) -> &T {\n            &self.inner\n        }\n\n",
    );
    buf.push_str("        /// The service the calls go through, mutably.\n");
    buf.push_str("        #[must_use]\n        pub fn get_mut(&mut self) -> &mut T {\n            &mut self.inner\n        }\n\n");
    buf.push_str("        /// The service the calls go through.\n");
    buf.push_str(
        "        #[must_use]\n        pub fn into_inner(self) -> T {\n            self.inner\n        }\n",
    );
    buf.push_str("    }\n\n");

    let _ = writeln!(buf, "    impl<T> {client}<T>");
    buf.push_str("    where\n");
    buf.push_str("        T: weft::rpc::codegen::Service<\n            weft::rpc::codegen::RawCall,\n            Response = weft::rpc::codegen::RawReply,\n        >,\n");
    buf.push_str("        T::Error: Into<weft::rpc::codegen::BoxError>,\n");
    buf.push_str("    {\n");
    for (i, method) in service.methods.iter().enumerate() {
        let t = types(method);
        if i > 0 {
            buf.push('\n');
        }
        docs(
            &method.comments,
            2,
            &format!("`{full}/{}`.", method.proto_name),
            buf,
        );
        let path = format!("{full}/{}", method.proto_name);
        let fn_name = client_method_name(method);
        if fn_name != method.name {
            let _ = writeln!(
                buf,
                "        ///\n        /// (Named `{fn_name}`: `{}` is the client's own method.)",
                method.name
            );
        }
        let (argument, conversion, helper) = match (method.client_streaming, method.server_streaming) {
            (false, false) => (
                format!("impl weft::rpc::codegen::IntoRequest<{}>", t.request),
                "into_request",
                "unary",
            ),
            (false, true) => (
                format!("impl weft::rpc::codegen::IntoRequest<{}>", t.request),
                "into_request",
                "server_streaming",
            ),
            (true, false) => (
                format!(
                    "impl weft::rpc::codegen::IntoStreamingRequest<Message = {}>",
                    t.request
                ),
                "into_streaming_request",
                "client_streaming",
            ),
            (true, true) => (
                format!(
                    "impl weft::rpc::codegen::IntoStreamingRequest<Message = {}>",
                    t.request
                ),
                "into_streaming_request",
                "streaming",
            ),
        };
        let _ = writeln!(
            buf,
            "        pub async fn {}(\n            &mut self,\n            request: {argument},\n        ) -> Result<weft::rpc::codegen::Response<{}>, weft::rpc::codegen::Status> {{",
            fn_name, t.client_reply,
        );
        // A method safe to repeat, with one request: it may go early.
        let named = if idempotent(method) && !method.client_streaming {
            format!("weft::rpc::client::Method::idempotent({path:?})")
        } else {
            format!("{path:?}")
        };
        let _ = writeln!(
            buf,
            "            weft::rpc::client::{helper}::<_, {}, {}{}>(&mut self.inner, {named}, request.{conversion}())\n                .await",
            t.request,
            t.reply,
            if method.client_streaming { ", _" } else { "" },
        );
        buf.push_str("        }\n");
    }
    buf.push_str("    }\n");
    buf.push_str("}\n\n");
}

#[cfg(test)]
#[path = "generator_tests.rs"]
mod tests;
