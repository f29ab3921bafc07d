//! A request body that must keep arriving: after a grace period (the header timeout) it must
//! average at least a minimum rate, or the read fails and the connection is closed. While it
//! is being read the connection says so, so that at the connection cap one that is only
//! trickling a body (and has not shown a credential) can be closed to make room.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

/// Why a body read stopped.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request body arrived too slowly ({received} bytes in {elapsed:?}; at least {rate} bytes/s are needed after the first {grace:?})"
)]
pub struct TooSlow {
    received: u64,
    elapsed: Duration,
    rate: u64,
    grace: Duration,
}

/// How a connection's body reads are bounded.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub grace: Duration,
    /// Bytes per second, on average, after the grace.
    pub min_rate: u64,
}

/// The body of one request, read under [`Pace`].
pub struct Deadline<B> {
    inner: B,
    pace: Pace,
    started: Instant,
    received: u64,
    timer: Pin<Box<Sleep>>,
    /// The connection's "reading a body since" mark (milliseconds + 1; 0: not reading).
    reading: Arc<AtomicU64>,
    /// Closes the connection when the body is too slow.
    close: CancellationToken,
    done: bool,
}

impl<B: http_body::Body> Deadline<B> {
    /// `now_mark` is the registry's clock now (for [`Deadline::reading`]).
    pub fn new(
        inner: B,
        pace: Pace,
        reading: Arc<AtomicU64>,
        now_mark: u64,
        close: CancellationToken,
    ) -> Self {
        let started = Instant::now();
        let done = inner.is_end_stream();
        if !done {
            reading.store(now_mark + 1, Ordering::Release);
        }
        Self {
            inner,
            pace,
            started,
            received: 0,
            timer: Box::pin(tokio::time::sleep_until(started + pace.grace)),
            reading,
            close,
            done,
        }
    }

    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            self.reading.store(0, Ordering::Release);
        }
    }

    /// When the body must have arrived so far: the grace, plus the time the bytes received
    /// would take at the minimum rate.
    fn due(&self) -> Instant {
        let rate = self.pace.min_rate.max(1);
        self.started + self.pace.grace + Duration::from_millis(self.received * 1000 / rate)
    }
}

impl<B> Drop for Deadline<B> {
    fn drop(&mut self) {
        if !self.done {
            self.reading.store(0, Ordering::Release);
        }
    }
}

impl<B> http_body::Body for Deadline<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.done {
            return Pin::new(&mut this.inner).poll_frame(cx).map_err(Into::into);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    let due = this.due();
                    this.timer.as_mut().reset(due);
                }
                if this.inner.is_end_stream() {
                    this.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.finish();
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Pending => {
                if this.timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let slow = TooSlow {
                    received: this.received,
                    elapsed: this.started.elapsed(),
                    rate: this.pace.min_rate,
                    grace: this.pace.grace,
                };
                tracing::debug!("closing a connection: {slow}");
                this.finish();
                this.close.cancel();
                Poll::Ready(Some(Err(slow.into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// A body that sends one byte per `every`, `n` times.
    fn trickle(
        n: usize,
        every: Duration,
    ) -> http_body_util::StreamBody<
        futures::stream::BoxStream<'static, Result<http_body::Frame<Bytes>, std::io::Error>>,
    > {
        use futures::StreamExt;
        let s = futures::stream::iter(0..n)
            .then(move |_| async move {
                tokio::time::sleep(every).await;
                Ok(http_body::Frame::data(Bytes::from_static(b"x")))
            })
            .boxed();
        http_body_util::StreamBody::new(s)
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_is_cut_after_the_grace_and_a_steady_body_is_not() {
        let pace = Pace {
            grace: Duration::from_secs(3),
            min_rate: 1000,
        };
        let reading = Arc::new(AtomicU64::new(0));
        let close = CancellationToken::new();
        let slow = Deadline::new(
            trickle(100, Duration::from_secs(1)),
            pace,
            reading.clone(),
            41,
            close.clone(),
        );
        assert_eq!(reading.load(Ordering::Acquire), 42, "marked as reading");
        let err = slow.collect().await.unwrap_err();
        assert!(err.to_string().contains("too slowly"), "{err}");
        assert!(close.is_cancelled(), "the connection is closed");
        assert_eq!(reading.load(Ordering::Acquire), 0);

        // 10,000 bytes at 1 ms each (1,000/s), well past the grace: always within the pace.
        let close = CancellationToken::new();
        let steady = Deadline::new(
            trickle(10_000, Duration::from_millis(1)),
            pace,
            reading.clone(),
            7,
            close.clone(),
        );
        let body = steady.collect().await.unwrap().to_bytes();
        assert_eq!(body.len(), 10_000);
        assert!(!close.is_cancelled());
        assert_eq!(reading.load(Ordering::Acquire), 0, "no longer reading");
    }
}
