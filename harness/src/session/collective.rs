//! Communication between the ranks of a data-parallel run. Gradients are
//! averaged every step; decisions (target reached, stop) are agreed on;
//! rank 0's numbers are broadcast. A single process uses [`Local`].
//!
//! Back ends:
//!
//! * [`Local`]: one process, no communication.
//! * `Mpi` (cargo feature `mpi`): CPU ranks over MPI (`mpirun`, `srun`).
//!   Every collective is non-blocking and polled, so a rank never hangs on
//!   a dead peer: it gives up after [`peer_timeout`] without progress, or
//!   at once when the launcher signals it (SIGTERM/SIGINT: `mpirun` and
//!   `srun --kill-on-bad-exit` stop every rank when one fails). After a
//!   failure the collective is broken: every later call fails at once, and
//!   MPI is not finalised (finalising waits for the dead peer).
//! * `Nccl` (features `mpi` plus `cuda` or `gpu`): gradients of GPU ranks
//!   are averaged by NCCL (the unique id is broadcast over MPI); scalars
//!   and barriers go over MPI. The NCCL stream is polled like MPI requests
//!   and the communicator is aborted on failure.
//!
//! Determinism and seeds: every rank builds the model from the same logged
//! seed (identical initial weights, checked at initialisation); the data
//! loaders split each global batch by rank, so rank r trains on the r-th
//! slice of the batch a single process would see, and the averaged
//! gradient equals the single-process gradient up to float reassociation.

pub use crate::session::error::CommError;
use std::time::Duration;

/// Operations the run loop needs from a communication back end.
pub trait Collective: Send {
    fn rank(&self) -> usize;
    fn world_size(&self) -> usize;
    /// Average `buf` element-wise over all ranks, in place.
    fn all_reduce_mean(&mut self, buf: &mut [f32]) -> Result<(), CommError>;
    /// Rank 0's value, on every rank.
    fn broadcast_f64(&mut self, value: f64) -> Result<f64, CommError>;
    /// True on every rank iff true on every rank.
    fn all_agree(&mut self, flag: bool) -> Result<bool, CommError>;
    /// Wait for every rank.
    fn barrier(&mut self) -> Result<(), CommError>;
    /// The back end's name ("local", "mpi", "nccl+mpi").
    fn backend(&self) -> &'static str {
        "local"
    }
}

/// The single-process "collective".
#[derive(Debug, Default)]
pub struct Local;

impl Collective for Local {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        1
    }
    fn all_reduce_mean(&mut self, _buf: &mut [f32]) -> Result<(), CommError> {
        Ok(())
    }
    fn broadcast_f64(&mut self, value: f64) -> Result<f64, CommError> {
        Ok(value)
    }
    fn all_agree(&mut self, flag: bool) -> Result<bool, CommError> {
        Ok(flag)
    }
    fn barrier(&mut self) -> Result<(), CommError> {
        Ok(())
    }
}

/// Default of [`peer_timeout`].
pub const DEFAULT_PEER_TIMEOUT_S: f64 = 300.0;

/// How long one collective may wait for the other ranks before the run is
/// declared failed: `$REFEREE_PEER_TIMEOUT_S` seconds, default 300.
pub fn peer_timeout() -> Duration {
    parse_timeout(std::env::var("REFEREE_PEER_TIMEOUT_S").ok().as_deref())
}

fn parse_timeout(v: Option<&str>) -> Duration {
    v.and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(Duration::from_secs_f64(DEFAULT_PEER_TIMEOUT_S))
}

/// Polls `done` until it reports completion, an error, a termination
/// signal, or `timeout` without completion. Sleeps progressively longer
/// (up to 1 ms) between polls after a short spin.
#[allow(dead_code)]
pub(crate) fn poll_until(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> Result<bool, CommError>,
) -> Result<(), CommError> {
    let start = std::time::Instant::now();
    let mut polls = 0u64;
    loop {
        if done()? {
            return Ok(());
        }
        if let Some(sig) = crate::common::harness_process::termination_signal() {
            return Err(CommError::Interrupted {
                what: what.to_string(),
                signal: crate::session::launch::signal_name(sig),
            });
        }
        if start.elapsed() > timeout {
            return Err(CommError::Timeout {
                what: what.to_string(),
                timeout,
            });
        }
        polls += 1;
        if polls < 2_000 {
            std::thread::yield_now();
        } else {
            let us = ((polls - 2_000) * 10).clamp(10, 1_000);
            std::thread::sleep(Duration::from_micros(us));
        }
    }
}

/// The collective for this process's placement, for CPU training.
pub fn from_placement(
    p: &crate::session::launch::Placement,
) -> Result<Box<dyn Collective>, CommError> {
    for_device(p, None)
}

/// The collective for this process's placement and device (`None`: the
/// CPU; `Some(ordinal)`: that GPU): [`Local`] for one process; MPI for CPU
/// ranks; NCCL (bootstrapped over MPI) for GPU ranks.
pub fn for_device(
    p: &crate::session::launch::Placement,
    gpu_ordinal: Option<usize>,
) -> Result<Box<dyn Collective>, CommError> {
    if p.world_size == 1 {
        return Ok(Box::new(Local));
    }
    #[cfg(feature = "mpi")]
    {
        let mpi = mpi_backend::Mpi::init(p)?;
        if let Some(ordinal) = gpu_ordinal {
            #[cfg(any(feature = "cuda", feature = "gpu"))]
            {
                return Ok(Box::new(nccl_backend::Nccl::init(mpi, ordinal)?));
            }
            #[cfg(not(any(feature = "cuda", feature = "gpu")))]
            {
                let _ = mpi;
                return Err(CommError::NoGpuSupport {
                    rank: p.rank,
                    world: p.world_size,
                    ordinal,
                });
            }
        }
        Ok(Box::new(mpi))
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = gpu_ordinal;
        Err(CommError::NoMultiProcess {
            rank: p.rank,
            world: p.world_size,
            launcher: p.launcher.as_str(),
        })
    }
}

#[cfg(feature = "mpi")]
pub use mpi_backend::Mpi;

#[cfg(feature = "mpi")]
mod mpi_backend {
    use super::{Collective, CommError, peer_timeout, poll_until};
    use mpi::collective::SystemOperation;
    use mpi::datatype::Equivalence;
    use mpi::ffi;
    use mpi::raw::AsRaw;
    use mpi::topology::Communicator;
    use std::mem::MaybeUninit;
    use std::time::Duration;

    const MPI_SUCCESS: i32 = 0;

    /// Data parallelism over MPI's world communicator.
    pub struct Mpi {
        universe: Option<mpi::environment::Universe>,
        world: mpi::topology::SimpleCommunicator,
        rank: usize,
        size: usize,
        timeout: Duration,
        /// Set by the first failure; every later call fails with it.
        broken: Option<CommError>,
        /// Send and receive buffers of the gradient all-reduce, owned here
        /// so that a request abandoned after a failure (MPI may still touch
        /// its buffers) never writes into memory anyone reuses: they are
        /// leaked then.
        send: Vec<f32>,
        recv: Vec<f32>,
    }

    // SAFETY: MPI is initialised with MPI_THREAD_SINGLE and the collective is
    // used by one thread at a time (the run loop); the handles are plain
    // values of the MPI library.
    unsafe impl Send for Mpi {}

    fn error_string(code: i32) -> String {
        let mut buf = vec![0 as std::os::raw::c_char; 512];
        let mut len: i32 = 0;
        // SAFETY: MPI_Error_string writes at most MPI_MAX_ERROR_STRING (< 512) bytes.
        let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr(), &mut len) };
        if rc != MPI_SUCCESS {
            return format!("MPI error {code}");
        }
        let bytes: Vec<u8> = buf[..len.max(0) as usize]
            .iter()
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    impl Mpi {
        /// Initialise MPI and check that it agrees with the launcher's
        /// environment.
        pub fn init(p: &crate::session::launch::Placement) -> Result<Self, CommError> {
            let universe = mpi::initialize().ok_or(CommError::MpiInitialised)?;
            let world = universe.world();
            let (rank, size) = (world.rank() as usize, world.size() as usize);
            if (rank, size) != (p.rank, p.world_size) {
                return Err(CommError::RankMismatch {
                    launcher: p.launcher.as_str(),
                    rank: p.rank,
                    world: p.world_size,
                    mpi_rank: rank,
                    mpi_world: size,
                });
            }
            // Errors are returned, not fatal: a failed peer must end the run
            // with a log, not abort the process.
            // SAFETY: the world communicator and a predefined error handler.
            unsafe {
                ffi::MPI_Comm_set_errhandler(world.as_raw(), ffi::RSMPI_ERRORS_RETURN);
            }
            Ok(Mpi {
                universe: Some(universe),
                world,
                rank,
                size,
                timeout: peer_timeout(),
                broken: None,
                send: Vec::new(),
                recv: Vec::new(),
            })
        }

        fn check(&self) -> Result<(), CommError> {
            match &self.broken {
                Some(e) => Err(CommError::AlreadyFailed(Box::new(e.clone()))),
                None => Ok(()),
            }
        }

        fn fail(&mut self, e: CommError) -> CommError {
            self.broken.get_or_insert_with(|| e.clone());
            e
        }

        /// Start a request with `start`, then poll it to completion. On
        /// failure the request stays pending forever: its buffers must
        /// outlive the process (see `scratch`).
        fn run(
            &mut self,
            what: &str,
            start: impl FnOnce(*mut ffi::MPI_Request) -> i32,
        ) -> Result<(), CommError> {
            self.check()?;
            let mut req = MaybeUninit::<ffi::MPI_Request>::uninit();
            let rc = start(req.as_mut_ptr());
            if rc != MPI_SUCCESS {
                let e = CommError::Call {
                    what: what.to_string(),
                    detail: error_string(rc),
                };
                return Err(self.fail(e));
            }
            // SAFETY: initialised by the successful start call.
            let mut req = unsafe { req.assume_init() };
            let res = poll_until(what, self.timeout, || {
                let mut flag = 0i32;
                let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
                // SAFETY: a live request of this process.
                let rc = unsafe { ffi::MPI_Test(&mut req, &mut flag, status.as_mut_ptr()) };
                if rc != MPI_SUCCESS {
                    return Err(CommError::Call {
                        what: what.to_string(),
                        detail: error_string(rc),
                    });
                }
                Ok(flag != 0)
            });
            res.map_err(|e| self.fail(e))
        }
    }

    impl Collective for Mpi {
        fn rank(&self) -> usize {
            self.rank
        }
        fn world_size(&self) -> usize {
            self.size
        }
        fn backend(&self) -> &'static str {
            "mpi"
        }

        fn all_reduce_mean(&mut self, buf: &mut [f32]) -> Result<(), CommError> {
            self.check()?;
            let (mut send, mut recv) = (
                std::mem::take(&mut self.send),
                std::mem::take(&mut self.recv),
            );
            send.clear();
            send.extend_from_slice(buf);
            recv.clear();
            recv.resize(buf.len(), 0.0);
            let comm = self.world.as_raw();
            let count = i32::try_from(buf.len()).map_err(|_| CommError::TooManyGradients)?;
            let (sp, rp) = (send.as_ptr(), recv.as_mut_ptr());
            let res = self.run("all-reduce of the gradients", |req| {
                // SAFETY: both buffers live until completion (or forever
                // after a failure).
                unsafe {
                    ffi::MPI_Iallreduce(
                        sp.cast(),
                        rp.cast(),
                        count,
                        f32::equivalent_datatype().as_raw(),
                        SystemOperation::sum().as_raw(),
                        comm,
                        req,
                    )
                }
            });
            if let Err(e) = res {
                std::mem::forget(send);
                std::mem::forget(recv);
                return Err(e);
            }
            let inv = 1.0 / self.size as f32;
            for (o, s) in buf.iter_mut().zip(&recv) {
                *o = s * inv;
            }
            (self.send, self.recv) = (send, recv);
            Ok(())
        }

        fn broadcast_f64(&mut self, value: f64) -> Result<f64, CommError> {
            let cell = Box::into_raw(Box::new(value));
            let comm = self.world.as_raw();
            let res = self.run("broadcast of rank 0's evaluation", |req| {
                // SAFETY: `cell` lives until completion (leaked on failure).
                unsafe {
                    ffi::MPI_Ibcast(
                        cell.cast(),
                        1,
                        f64::equivalent_datatype().as_raw(),
                        0,
                        comm,
                        req,
                    )
                }
            });
            res?;
            // SAFETY: the request completed; `cell` came from Box::into_raw.
            Ok(*unsafe { Box::from_raw(cell) })
        }

        fn all_agree(&mut self, flag: bool) -> Result<bool, CommError> {
            let mine = Box::into_raw(Box::new(i32::from(flag)));
            let cell = Box::into_raw(Box::new(0i32));
            let comm = self.world.as_raw();
            let res = self.run("agreement of the ranks", |req| {
                // SAFETY: both cells live until completion (leaked on failure).
                unsafe {
                    ffi::MPI_Iallreduce(
                        mine.cast_const().cast(),
                        cell.cast(),
                        1,
                        i32::equivalent_datatype().as_raw(),
                        SystemOperation::min().as_raw(),
                        comm,
                        req,
                    )
                }
            });
            res?;
            // SAFETY: the request completed; both came from Box::into_raw.
            drop(unsafe { Box::from_raw(mine) });
            Ok(*unsafe { Box::from_raw(cell) } != 0)
        }

        fn barrier(&mut self) -> Result<(), CommError> {
            let comm = self.world.as_raw();
            // SAFETY: a barrier request on the world communicator.
            self.run("barrier", |req| unsafe { ffi::MPI_Ibarrier(comm, req) })
        }
    }

    impl Mpi {
        /// Broadcast rank 0's bytes (e.g. the NCCL unique id).
        #[allow(dead_code)]
        pub(crate) fn broadcast_bytes(&mut self, bytes: &mut [u8]) -> Result<(), CommError> {
            let mut cell = bytes.to_vec();
            let comm = self.world.as_raw();
            let (ptr, len) = (cell.as_mut_ptr(), cell.len() as i32);
            let res = self.run("broadcast of the NCCL id", |req| {
                // SAFETY: `cell` lives until completion (leaked on failure).
                unsafe {
                    ffi::MPI_Ibcast(
                        ptr.cast(),
                        len,
                        u8::equivalent_datatype().as_raw(),
                        0,
                        comm,
                        req,
                    )
                }
            });
            if let Err(e) = res {
                std::mem::forget(cell);
                return Err(e);
            }
            bytes.copy_from_slice(&cell);
            Ok(())
        }

        /// Whether a collective has failed (MPI is then never finalised).
        #[allow(dead_code)]
        pub(crate) fn is_broken(&self) -> bool {
            self.broken.is_some()
        }
    }

    impl Drop for Mpi {
        fn drop(&mut self) {
            if self.broken.is_some() {
                // MPI_Finalize would wait for the failed peer: leave
                // without it (the launcher reports the failed rank).
                if let Some(u) = self.universe.take() {
                    std::mem::forget(u);
                }
            }
            // Otherwise dropping the universe finalises MPI.
        }
    }
}

#[cfg(all(feature = "mpi", any(feature = "cuda", feature = "gpu")))]
mod nccl_backend {
    use super::{Collective, CommError, Mpi, poll_until};
    use cudarc::driver::{CudaContext, CudaStream, sys as cu};
    use cudarc::nccl::{Comm, Id, ReduceOp};
    use std::sync::Arc;

    /// Gradients averaged by NCCL on the rank's GPU; scalars over MPI.
    pub struct Nccl {
        mpi: Mpi,
        stream: Arc<CudaStream>,
        comm: Option<Comm>,
        broken: Option<CommError>,
    }

    // SAFETY: the communicator and stream are used from one thread at a time
    // (the run loop); cudarc's handles are plain pointers.
    unsafe impl Send for Nccl {}

    impl Nccl {
        pub fn init(mut mpi: Mpi, ordinal: usize) -> Result<Self, CommError> {
            let rank = mpi.rank();
            let world = mpi.world_size();
            crate::session::gpu::require_nccl()?;
            let call = |what: String, detail: String| CommError::Call { what, detail };
            let ctx = std::panic::catch_unwind(|| CudaContext::new(ordinal))
                .map_err(|_| call(format!("cuda:{ordinal}"), "the CUDA driver panicked".into()))?
                .map_err(|e| call(format!("cuda:{ordinal}"), format!("{e:?}")))?;
            let stream = ctx.new_stream().map_err(|e| {
                call(
                    format!("cuda:{ordinal}: creating a stream"),
                    format!("{e:?}"),
                )
            })?;
            let mut raw = [0u8; 128];
            if rank == 0 {
                let id = Id::new().map_err(|e| call("ncclGetUniqueId".into(), format!("{e:?}")))?;
                for (d, s) in raw.iter_mut().zip(id.internal()) {
                    *d = *s as u8;
                }
            }
            mpi.broadcast_bytes(&mut raw)?;
            let mut internal = [0 as std::ffi::c_char; 128];
            for (d, s) in internal.iter_mut().zip(raw) {
                *d = s as std::ffi::c_char;
            }
            let comm = Comm::from_rank(stream.clone(), rank, world, Id::uninit(internal)).map_err(
                |e| {
                    call(
                        format!("ncclCommInitRank (rank {rank} of {world})"),
                        format!("{e:?}"),
                    )
                },
            )?;
            Ok(Nccl {
                mpi,
                stream,
                comm: Some(comm),
                broken: None,
            })
        }

        fn fail(&mut self, e: CommError) -> CommError {
            self.broken.get_or_insert_with(|| e.clone());
            if let Some(c) = self.comm.take() {
                // Dropping a cudarc Comm aborts it (ncclCommAbort), which
                // also releases kernels stuck on a dead peer; cudarc panics
                // when the abort itself fails.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(c)));
            }
            e
        }
    }

    impl Collective for Nccl {
        fn rank(&self) -> usize {
            self.mpi.rank()
        }
        fn world_size(&self) -> usize {
            self.mpi.world_size()
        }
        fn backend(&self) -> &'static str {
            "nccl+mpi"
        }

        fn all_reduce_mean(&mut self, buf: &mut [f32]) -> Result<(), CommError> {
            let call = |what: &str, detail: String| CommError::Call {
                what: what.to_string(),
                detail,
            };
            if let Some(e) = &self.broken {
                return Err(CommError::AlreadyFailed(Box::new(e.clone())));
            }
            let stream = self.stream.clone();
            let Some(comm) = self.comm.as_ref() else {
                return Err(CommError::NoCommunicator);
            };
            let mut dev = stream
                .clone_htod(buf)
                .map_err(|e| call("copying gradients to the GPU", format!("{e:?}")))?;
            if let Err(e) = comm.all_reduce_in_place(&mut dev, &ReduceOp::Avg) {
                let e = call("ncclAllReduce", format!("{e:?}"));
                return Err(self.fail(e));
            }
            let cu_stream = stream.cu_stream();
            let timeout = super::peer_timeout();
            let res = poll_until("NCCL all-reduce of the gradients", timeout, || {
                // SAFETY: a live stream of this context.
                match unsafe { cu::cuStreamQuery(cu_stream) } {
                    cu::CUresult::CUDA_SUCCESS => Ok(true),
                    cu::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
                    other => Err(call("CUDA stream", format!("{other:?}"))),
                }
            });
            if let Err(e) = res {
                std::mem::forget(dev);
                return Err(self.fail(e));
            }
            stream
                .memcpy_dtoh(&dev, buf)
                .and_then(|_| stream.synchronize())
                .map_err(|e| call("copying gradients from the GPU", format!("{e:?}")))
        }

        fn broadcast_f64(&mut self, value: f64) -> Result<f64, CommError> {
            self.mpi.broadcast_f64(value)
        }
        fn all_agree(&mut self, flag: bool) -> Result<bool, CommError> {
            self.mpi.all_agree(flag)
        }
        fn barrier(&mut self) -> Result<(), CommError> {
            self.mpi.barrier()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts() {
        assert_eq!(parse_timeout(None).as_secs_f64(), DEFAULT_PEER_TIMEOUT_S);
        assert_eq!(parse_timeout(Some("2.5")).as_millis(), 2500);
        assert_eq!(
            parse_timeout(Some("-1")).as_secs_f64(),
            DEFAULT_PEER_TIMEOUT_S
        );
        assert_eq!(
            parse_timeout(Some("x")).as_secs_f64(),
            DEFAULT_PEER_TIMEOUT_S
        );
    }

    #[test]
    fn polling_times_out_and_reports() {
        let e = poll_until("test op", Duration::from_millis(20), || Ok(false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("test op") && e.contains("no answer"), "{e}");
        let mut n = 0;
        poll_until("test op", Duration::from_secs(5), || {
            n += 1;
            Ok(n > 3)
        })
        .unwrap();
        let e = poll_until("x", Duration::from_secs(5), || {
            Err(CommError::NoCommunicator)
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "the NCCL communicator is gone");
    }

    #[test]
    fn a_single_process_is_local() {
        let c = from_placement(&crate::session::launch::Placement::single()).unwrap();
        assert_eq!((c.rank(), c.world_size(), c.backend()), (0, 1, "local"));
    }

    #[cfg(not(feature = "mpi"))]
    #[test]
    fn many_processes_need_the_mpi_feature() {
        let p = crate::session::launch::Placement {
            rank: 1,
            world_size: 2,
            local_rank: 1,
            nodes: 1,
            launcher: crate::session::launch::Launcher::OpenMpi,
        };
        let e = from_placement(&p).err().unwrap().to_string();
        assert!(e.contains("--features mpi"), "{e}");
    }
}
