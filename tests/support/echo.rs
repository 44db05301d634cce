//! The generated `weft.examples.Echo` service, and a server of it whose
//! `Say` answers as a test says (the other methods are unimplemented):
//! for tests of what carries calls rather than of the calls.

#![allow(dead_code)]

use std::{sync::Arc, time::Duration};

use weft::rpc::{Request, Response, Status, Streaming};

pub mod generated {
    weft::include_proto!("weft.examples");
}

pub use generated::{
    echo_client::EchoClient,
    echo_server::{Echo, EchoServer, ReplyStream},
    EchoReply, EchoRequest, ExpandRequest,
};

type Answer = dyn Fn(&Request<EchoRequest>) -> Result<String, Status> + Send + Sync;

/// `Say` answered by a function of the request (after `delay`, if any).
#[derive(Clone)]
pub struct Say {
    answer: Arc<Answer>,
    delay: Option<Duration>,
}

impl Say {
    pub fn new(
        answer: impl Fn(&Request<EchoRequest>) -> Result<String, Status> + Send + Sync + 'static,
    ) -> Self {
        Self {
            answer: Arc::new(answer),
            delay: None,
        }
    }

    /// Each answer waits `delay` first.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// The server of it.
    pub fn server(self) -> EchoServer<Say> {
        EchoServer::new(self)
    }
}

/// A `Say` request with `text`.
pub fn say(text: &str) -> EchoRequest {
    EchoRequest {
        text: text.into(),
        ..EchoRequest::default()
    }
}

impl Echo for Say {
    async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let text = (self.answer)(&request)?;
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        Ok(Response::new(EchoReply {
            text,
            ..EchoReply::default()
        }))
    }

    async fn expand(&self, _: Request<ExpandRequest>) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        Err(Status::unimplemented("not here"))
    }

    async fn collect(&self, _: Request<Streaming<EchoRequest>>) -> Result<Response<EchoReply>, Status> {
        Err(Status::unimplemented("not here"))
    }

    async fn chat(
        &self,
        _: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        Err(Status::unimplemented("not here"))
    }
}
