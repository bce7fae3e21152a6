//! Draining the MCP endpoint without dropping a call.
//!
//! rmcp ends its streams when its cancellation token is cancelled — and in
//! stateless mode it also abandons every call still being answered (HTTP
//! 500 "empty response"), and in sessions mode the call's SSE stream ends
//! without its result. So rmcp's token is not the server's shutdown: it is
//! cancelled only once the calls in flight are answered. [`InFlight`]
//! counts `POST /mcp` requests from their arrival until their response
//! body has been sent (a sessions-mode result travels in that body), and
//! [`InFlight::end_streams_after`] cancels rmcp's token when the server
//! has stopped taking requests, its idle connections' linger is over (a
//! balancer may still send a call on one meanwhile) and the count is back
//! to zero. `GET`
//! streams (sessions mode's server-to-client stream) are not counted:
//! they are what the token ends.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::response::Response;
use http::Method;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The MCP requests being answered.
#[derive(Debug, Default, Clone)]
pub(crate) struct InFlight(Arc<Counter>);

#[derive(Debug, Default)]
struct Counter {
    calls: AtomicUsize,
    idle: Notify,
}

/// One request's place in the count, given up when dropped.
#[derive(Debug)]
struct Guard(Arc<Counter>);

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0.calls.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl InFlight {
    fn enter(&self) -> Guard {
        self.0.calls.fetch_add(1, Ordering::AcqRel);
        Guard(self.0.clone())
    }

    /// Requests counted now.
    pub(crate) fn count(&self) -> usize {
        self.0.calls.load(Ordering::Acquire)
    }

    /// Resolves when no request is counted.
    async fn idle(&self) {
        loop {
            let notified = self.0.idle.notified();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Cancels `streams` once `stopped` is cancelled, `linger` has passed
    /// (the server's idle connections may still bring calls until then)
    /// and every counted request has been answered. The caller bounds the
    /// whole drain (the grace period), so this may wait as long as the
    /// calls take.
    pub(crate) fn end_streams_after(
        &self,
        stopped: CancellationToken,
        linger: Duration,
        streams: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let in_flight = self.clone();
        async move {
            tokio::select! {
                () = stopped.cancelled() => {}
                // Nothing left to do when the streams ended some other way.
                () = streams.cancelled() => return,
            }
            tokio::time::sleep(linger).await;
            let waiting = in_flight.count();
            if waiting > 0 {
                tracing::info!(calls = waiting, "draining: waiting for MCP calls in flight");
            }
            in_flight.idle().await;
            streams.cancel();
        }
    }
}

impl InFlight {
    /// Answers `request` with `answer`, counting it, when it is a `POST`,
    /// until its response body has been sent or dropped.
    pub(crate) async fn counting<F>(
        &self,
        request: Request,
        answer: impl FnOnce(Request) -> F,
    ) -> Response
    where
        F: Future<Output = Response>,
    {
        if request.method() != Method::POST {
            return answer(request).await;
        }
        let guard = self.enter();
        let response = answer(request).await;
        let (parts, body) = response.into_parts();
        Response::from_parts(
            parts,
            Body::new(Counted {
                body,
                _guard: guard,
            }),
        )
    }
}

/// A response body that holds its request's place in the count until it
/// is sent or dropped.
struct Counted {
    body: Body,
    _guard: Guard,
}

impl HttpBody for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn streams_end_only_after_the_linger_and_the_last_call_in_flight() {
        let in_flight = InFlight::default();
        let (stopped, streams) = (CancellationToken::new(), CancellationToken::new());
        let first = in_flight.enter();
        let second = in_flight.enter();
        let drain = tokio::spawn(in_flight.end_streams_after(
            stopped.clone(),
            Duration::from_secs(5),
            streams.clone(),
        ));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!streams.is_cancelled(), "not stopped yet");
        stopped.cancel();
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert!(!streams.is_cancelled(), "two calls in flight");
        drop(first);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!streams.is_cancelled(), "one call in flight");
        drop(second);
        drain.await.unwrap();
        assert!(streams.is_cancelled());
        assert_eq!(in_flight.count(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_comes_during_the_linger_is_answered_before_streams_end() {
        let in_flight = InFlight::default();
        let (stopped, streams) = (CancellationToken::new(), CancellationToken::new());
        let drain = tokio::spawn(in_flight.end_streams_after(
            stopped.clone(),
            Duration::from_secs(1),
            streams.clone(),
        ));
        stopped.cancel();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!streams.is_cancelled(), "lingering");
        let late = in_flight.enter();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!streams.is_cancelled(), "the late call is in flight");
        drop(late);
        drain.await.unwrap();
        assert!(streams.is_cancelled());
    }

    #[tokio::test]
    async fn with_nothing_in_flight_streams_end_when_the_server_stops() {
        let in_flight = InFlight::default();
        let (stopped, streams) = (CancellationToken::new(), CancellationToken::new());
        stopped.cancel();
        in_flight
            .end_streams_after(stopped, Duration::ZERO, streams.clone())
            .await;
        assert!(streams.is_cancelled());
    }
}
