//! The live view over HTTP: the page, and the snapshot as JSON.

use std::{
    convert::Infallible,
    future::{ready, Ready},
    task::{Context, Poll},
};

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::Full;
use tower::Service;

use super::Admin;

/// The page: no external assets, it fetches `snapshot.json` beside it
/// every second and draws the tables.
const PAGE: &str = include_str!("page.html");

/// The live view as a tower service for any HTTP server (`weft::http::serve`,
/// hyper's, axum's `nest_service`): `GET` of a path ending in `/` or
/// `index.html` is the page, one ending in `snapshot.json` the
/// [`Snapshot`](super::Snapshot) as JSON, anything else `404`.
#[derive(Debug, Clone)]
pub struct AdminService {
    admin: Admin,
}

impl AdminService {
    pub(super) fn new(admin: Admin) -> Self {
        Self { admin }
    }

    fn respond(&self, path: &str) -> Response<Full<Bytes>> {
        let (status, kind, body) = if path.ends_with("snapshot.json") {
            match serde_json::to_vec(&self.admin.snapshot()) {
                Ok(json) => (StatusCode::OK, "application/json", Bytes::from(json)),
                Err(err) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain; charset=utf-8",
                    Bytes::from(format!("the snapshot would not serialize: {err}")),
                ),
            }
        } else if path.is_empty() || path.ends_with('/') || path.ends_with("index.html") {
            (
                StatusCode::OK,
                "text/html; charset=utf-8",
                Bytes::from_static(PAGE.as_bytes()),
            )
        } else {
            (
                StatusCode::NOT_FOUND,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"not found"),
            )
        };
        let mut response = Response::new(Full::new(body));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static(kind));
        headers.insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        );
        response
    }
}

impl<B> Service<Request<B>> for AdminService {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        ready(Ok(self.respond(request.uri().path())))
    }
}
