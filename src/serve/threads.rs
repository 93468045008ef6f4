//! The threads connections are served on: each runs a current-thread runtime of its own, and a
//! connection, once accepted, is handed to the one serving the fewest and served there from its
//! TLS handshake to its close.
//!
//! Why not the multi-threaded runtime the rest of the server runs on: its workers steal tasks
//! from each other, so a connection's task, woken by the I/O driver on whichever worker polled
//! it, moves between cores, and its TLS session, buffers and the request's values with it. On
//! two such workers `serve` spent up to half again as much CPU a request as on one, and as much
//! as on one once each connection stayed on its thread (docs/performance.md has the figures).
//! The accept loop, which balances connections by how many each thread serves rather than by
//! the kernel's hash of their addresses, keeps the threads evenly loaded as long-lived
//! connections come and go.
//!
//! HTTP/2 multiplexes many requests on one connection, as the API server does: its streams are
//! spawned on the runtime that started the server ([`SpawnOn`]), so that they still spread over
//! the cores.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::ServeError;

/// The connection threads, started with the server and ended when this is dropped: each one's
/// runtime is dropped then, and with it any connection still open on it.
#[derive(Debug)]
pub(crate) struct ConnectionThreads {
    threads: Vec<ConnectionThread>,
}

#[derive(Debug)]
struct ConnectionThread {
    handle: Handle,
    open: Arc<AtomicUsize>,
    // Dropped with the thread's entry: its `block_on` returns and the thread ends.
    _stop: oneshot::Sender<()>,
}

impl ConnectionThreads {
    /// Starts `count` threads (at least one), named `serve-conn-<i>`.
    ///
    /// # Errors
    /// [`ServeError::ConnectionThreads`] when a thread or its runtime cannot be started.
    pub(crate) async fn start(count: usize) -> Result<ConnectionThreads, ServeError> {
        let mut threads = Vec::with_capacity(count.max(1));
        for index in 0..count.max(1) {
            let (started, handle) = oneshot::channel();
            let (stop, stopped) = oneshot::channel::<()>();
            std::thread::Builder::new()
                .name(format!("serve-conn-{index}"))
                .spawn(move || {
                    let runtime = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(runtime) => runtime,
                        Err(error) => {
                            let _ = started.send(Err(error));
                            return;
                        }
                    };
                    let _ = started.send(Ok(runtime.handle().clone()));
                    // Until the server drops this thread's entry: the connections' tasks run here.
                    runtime.block_on(async move {
                        let _ = stopped.await;
                    });
                })
                .map_err(ServeError::ConnectionThreads)?;
            let handle = handle
                .await
                .map_err(|_| {
                    std::io::Error::other("a connection thread ended before its runtime started")
                })
                .and_then(|started| started)
                .map_err(ServeError::ConnectionThreads)?;
            threads.push(ConnectionThread {
                handle,
                open: Arc::new(AtomicUsize::new(0)),
                _stop: stop,
            });
        }
        Ok(ConnectionThreads { threads })
    }

    /// How many threads serve connections.
    pub(crate) fn len(&self) -> usize {
        self.threads.len()
    }

    /// Runs `serve` (one connection's whole life) on the thread serving the fewest connections,
    /// counted there until it ends.
    pub(crate) fn serve<F>(&self, serve: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Some(thread) = self
            .threads
            .iter()
            .min_by_key(|thread| thread.open.load(Ordering::Relaxed))
        else {
            return;
        };
        let counted = Counted::new(Arc::clone(&thread.open));
        thread.handle.spawn(async move {
            let _counted = counted;
            serve.await;
        });
    }
}

/// One connection on a thread's count, until dropped.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(open: Arc<AtomicUsize>) -> Counted {
        open.fetch_add(1, Ordering::Relaxed);
        Counted(open)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// hyper's executor for HTTP/2 streams: spawns each on the runtime of the handle it holds.
#[derive(Debug, Clone)]
pub(crate) struct SpawnOn(pub(crate) Handle);

impl<F> hyper::rt::Executor<F> for SpawnOn
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        self.0.spawn(future);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Serves a connection that stays open until the returned sender is used or dropped, and
    /// returns the name of the thread it runs on with that sender.
    async fn open_connection(threads: &ConnectionThreads) -> (String, oneshot::Sender<()>) {
        let (ran, thread) = oneshot::channel();
        let (release, released) = oneshot::channel::<()>();
        threads.serve(async move {
            let _ = ran.send(std::thread::current().name().unwrap_or("").to_owned());
            let _ = released.await;
        });
        (thread.await.expect("the connection ran"), release)
    }

    /// The open connections of every thread together, polled within a bound until it is
    /// `expected`: a connection's count drops just after its future ends.
    async fn open_in_all(threads: &ConnectionThreads, expected: usize) -> usize {
        let give_up = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let open = threads
                .threads
                .iter()
                .map(|thread| thread.open.load(Ordering::Relaxed))
                .sum();
            if open == expected || tokio::time::Instant::now() > give_up {
                return open;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    #[tokio::test]
    async fn a_new_connection_goes_to_the_thread_serving_the_fewest() {
        let threads = ConnectionThreads::start(2).await.expect("threads start");
        let (first, _release_first) = open_connection(&threads).await;
        let (second, _release_second) = open_connection(&threads).await;

        assert!(first.starts_with("serve-conn-"), "ran on {first:?}");
        assert!(second.starts_with("serve-conn-"), "ran on {second:?}");
        assert_ne!(first, second, "both connections went to {first}");
    }

    #[tokio::test]
    async fn a_connection_that_ended_no_longer_counts_against_its_thread() {
        let threads = ConnectionThreads::start(2).await.expect("threads start");
        let (held, _release_held) = open_connection(&threads).await;
        let (ended, release_ended) = open_connection(&threads).await;
        release_ended
            .send(())
            .expect("the connection waits for its release");

        assert_eq!(open_in_all(&threads, 1).await, 1, "counts after one ended");
        let (next, _release_next) = open_connection(&threads).await;
        assert_eq!(next, ended, "the next went beside the held one, on {held}");
    }
}
