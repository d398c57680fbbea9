//! A background thread that runs an iterator ahead of its consumer.

use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;

/// How many finished batches the prefetch thread keeps ready.
pub const PREFETCH_DEPTH: usize = 4;

/// Runs `iter` on a background thread and hands its items over a bounded
/// channel of `depth` items. Dropping the `Prefetch` stops the thread (its
/// next send fails) and joins it. A panic in the thread is re-raised in the
/// consumer when the stream ends.
pub(crate) struct Prefetch<T> {
    rx: Option<Receiver<T>>,
    handle: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Prefetch<T> {
    pub fn spawn<I>(name: &str, depth: usize, iter: I) -> Self
    where
        I: Iterator<Item = T> + Send + 'static,
    {
        let (tx, rx) = sync_channel(depth.max(1));
        let handle = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                for item in iter {
                    if tx.send(item).is_err() {
                        break; // consumer dropped
                    }
                }
            })
            .expect("failed to spawn the data prefetch thread");
        Prefetch {
            rx: Some(rx),
            handle: Some(handle),
        }
    }
}

impl<T> Iterator for Prefetch<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let rx = self.rx.as_ref()?;
        match rx.recv() {
            Ok(item) => Some(item),
            Err(_) => {
                self.rx = None;
                if let Some(Err(panic)) = self.handle.take().map(JoinHandle::join) {
                    std::panic::resume_unwind(panic);
                }
                None
            }
        }
    }
}

impl<T> Drop for Prefetch<T> {
    fn drop(&mut self) {
        drop(self.rx.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yields_everything_in_order() {
        let p = Prefetch::spawn("t", 2, 0..100u32);
        assert_eq!(p.collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn dropping_early_stops_an_infinite_producer() {
        let mut p = Prefetch::spawn("t", 2, 0u64..);
        assert_eq!(p.next(), Some(0));
        drop(p); // must not hang
    }

    #[test]
    #[should_panic(expected = "boom")]
    fn producer_panic_is_propagated() {
        let p = Prefetch::spawn(
            "t",
            2,
            (0..3).map(|i| if i == 2 { panic!("boom") } else { i }),
        );
        let _ = p.count();
    }
}
