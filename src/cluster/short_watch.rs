//! A watch that ends at once, without an event, made a failure the cache can see.
//!
//! An API server that answers a watch with `200` and an empty body (a proxy in front of it, say)
//! ends the watch as soon as it begins. kube-rs's watcher takes the end of a watch stream as the
//! routine end of a long watch and opens the next one within the same poll, yielding nothing: the
//! cache sees no failure to back off after, and the watches repeat in a loop as fast as the API
//! server answers. client-go's reflector calls a watch that lasted less than a second and
//! received nothing a "very short watch" and backs off; [`ShortWatchLayer`] does the same at the
//! client: such a watch's body ends with [`EndedAtOnce`] rather than cleanly, so that the watcher
//! yields it as a failed watch, which the cache logs, counts and waits after with the backoff
//! that failed lists use.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Request, Response, Uri};
use hyper::body::{Body, Bytes, Frame, SizeHint};
use tokio::time::Instant;
use tower::{BoxError, Layer, Service};

/// How soon after its response began a watch that received nothing may end before it counts as
/// having ended at once: client-go's bound for a "very short watch". A quiet watch that the API
/// server closes after its `timeoutSeconds` (minutes) is routine and not counted.
pub(crate) const SHORT_WATCH: Duration = Duration::from_secs(1);

/// A watch ended within [`SHORT_WATCH`] of its response, without an event.
#[derive(Debug, thiserror::Error)]
#[error("the watch ended at once (within {SHORT_WATCH:?} of its response) without an event")]
pub(crate) struct EndedAtOnce;

/// Wraps a Kubernetes client's service so that a watch whose body ends within
/// [`SHORT_WATCH`] without a byte fails with [`EndedAtOnce`]. Other requests, and a watch that
/// received anything, are passed through unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ShortWatchLayer;

impl<S> Layer<S> for ShortWatchLayer {
    type Service = ShortWatch<S>;

    fn layer(&self, inner: S) -> ShortWatch<S> {
        ShortWatch { inner }
    }
}

/// The service [`ShortWatchLayer`] makes.
#[derive(Debug, Clone)]
pub(crate) struct ShortWatch<S> {
    inner: S,
}

impl<S, ReqBody, B> Service<Request<ReqBody>> for ShortWatch<S>
where
    S: Service<Request<ReqBody>, Response = Response<B>>,
    S::Future: Send + 'static,
{
    type Response = Response<WatchBody<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let watch = is_watch(request.uri());
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            // The clock starts when the response begins: the wait for it has its own bound.
            Ok(response.map(|body| WatchBody::new(body, watch)))
        })
    }
}

/// Whether `uri` asks for a watch (`watch=true` or `watch=1` in its query, as the API server
/// reads it).
fn is_watch(uri: &Uri) -> bool {
    uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    })
}

/// A response body, which for a watch ends with [`EndedAtOnce`] when it ends within
/// [`SHORT_WATCH`] without a byte.
#[derive(Debug)]
pub(crate) struct WatchBody<B> {
    inner: B,
    /// When a watch's response began; `None` for any other request, and once the watch
    /// received a byte or ended.
    watch_began: Option<Instant>,
}

impl<B> WatchBody<B> {
    /// `inner`, checked when `watch` says it is a watch's body, its clock starting now.
    pub(crate) fn new(inner: B, watch: bool) -> WatchBody<B> {
        WatchBody {
            inner,
            watch_began: watch.then(Instant::now),
        }
    }
}

impl<B> Body for WatchBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        match frame {
            Some(Ok(frame)) => {
                if frame.data_ref().is_some_and(|data| !data.is_empty()) {
                    this.watch_began = None;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(error)) => {
                this.watch_began = None;
                Poll::Ready(Some(Err(error.into())))
            }
            None => match this.watch_began.take() {
                Some(began) if began.elapsed() < SHORT_WATCH => {
                    Poll::Ready(Some(Err(Box::new(EndedAtOnce))))
                }
                _ => Poll::Ready(None),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        // A watch that has received nothing may still end with an error.
        self.watch_began.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        match self.watch_began {
            Some(_) => SizeHint::default(),
            None => self.inner.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, Empty, Full};

    use super::*;

    /// Every frame of `body` until its end, data or error.
    async fn frames<B>(mut body: WatchBody<B>) -> Vec<Result<Bytes, String>>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            frames.push(match frame {
                Ok(frame) => Ok(frame.into_data().unwrap_or_default()),
                Err(error) => Err(error.to_string()),
            });
        }
        frames
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_whose_body_ends_at_once_without_a_byte_ends_with_ended_at_once() {
        let body = WatchBody::new(Empty::<Bytes>::new(), true);

        let frames = frames(body).await;

        assert_eq!(frames, [Err(EndedAtOnce.to_string())]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_watch_the_api_server_ends_after_the_bound_ends_cleanly() {
        let body = WatchBody::new(Empty::<Bytes>::new(), true);
        tokio::time::advance(SHORT_WATCH).await;

        let frames = frames(body).await;

        assert!(frames.is_empty(), "no error: {frames:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_that_received_an_event_ends_cleanly_however_soon() {
        let event = Bytes::from_static(b"{\"type\":\"BOOKMARK\"}\n");
        let body = WatchBody::new(Full::new(event.clone()), true);

        let frames = frames(body).await;

        assert_eq!(frames, [Ok(event)], "the event, then no error");
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_body_of_a_request_other_than_a_watch_ends_cleanly() {
        let body = WatchBody::new(Empty::<Bytes>::new(), false);

        let frames = frames(body).await;

        assert!(frames.is_empty(), "no error: {frames:?}");
    }

    #[test]
    fn a_watch_is_told_by_its_watch_parameter_as_the_api_server_reads_it() {
        let uri = |text: &'static str| Uri::from_static(text);

        assert!(is_watch(&uri(
            "/apis/x/v1/queues?&watch=true&timeoutSeconds=290"
        )));
        assert!(is_watch(&uri("/apis/x/v1/queues?watch=1")));
        assert!(!is_watch(&uri("/apis/x/v1/queues?limit=500")));
        assert!(!is_watch(&uri("/apis/x/v1/queues?watch=false")));
        assert!(!is_watch(&uri("/apis/x/v1/queues")));
    }
}
