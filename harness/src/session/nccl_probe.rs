//! The NCCL probe of one node (`referee system --nccl`): a communicator over
//! every GPU this process sees (`ncclCommInitAll`, one process, no MPI), an
//! all-reduce whose result is checked element by element, and the time of
//! repeated all-reduces of a large buffer (algorithm and bus bandwidth, as
//! nccl-tests define them). It answers "do NCCL and the GPUs work here, and
//! how fast" before a multi-node run is launched.
//!
//! Owns: the probe and its report. Must not know: the run loop's
//! collectives (`collective.rs`, which initialises NCCL per rank over MPI).

use crate::session::error::GpuError;
use serde::Serialize;

/// What the probe measured.
#[derive(Debug, Clone, Serialize)]
pub struct NcclProbe {
    /// `ncclGetVersion`, e.g. 22805 for 2.28.5.
    pub nccl_version: i64,
    /// GPUs in the communicator (every one this process sees).
    pub gpus: usize,
    /// Names of those GPUs, in rank order.
    pub devices: Vec<String>,
    /// Wall time of `ncclCommInitAll`, ms.
    pub init_ms: f64,
    /// Whether the checked all-reduce (rank r contributes r + 1) gave
    /// n(n+1)/2 in every element on every GPU.
    pub sum_correct: bool,
    /// Bytes per GPU of the timed all-reduces.
    pub bytes: u64,
    /// Timed repetitions (after 3 discarded ones).
    pub iterations: usize,
    /// Median time of one all-reduce, ms.
    pub median_ms: f64,
    /// Bytes ÷ time, GB/s.
    pub algbw_gbps: f64,
    /// algbw × 2(n−1)/n (nccl-tests' bus bandwidth; 0 for one GPU).
    pub busbw_gbps: f64,
}

/// Runs the probe over `bytes` per GPU (f32 elements), `iterations` timed.
#[cfg(any(feature = "cuda", feature = "gpu"))]
pub fn probe(bytes: u64, iterations: usize) -> Result<NcclProbe, GpuError> {
    if let Some(p) = crate::session::gpu::driver_problem() {
        return Err(GpuError::Unavailable(p));
    }
    crate::session::gpu::require_nccl()?;
    match std::panic::catch_unwind(|| probe_inner(bytes, iterations.max(1))) {
        Ok(r) => r,
        Err(_) => Err(GpuError::ProbePanicked),
    }
}

#[cfg(not(any(feature = "cuda", feature = "gpu")))]
pub fn probe(_bytes: u64, _iterations: usize) -> Result<NcclProbe, GpuError> {
    Err(GpuError::Unavailable(
        crate::session::gpu::driver_problem()
            .unwrap_or_else(|| "this referee build has no GPU support".into()),
    ))
}

#[cfg(any(feature = "cuda", feature = "gpu"))]
fn probe_inner(bytes: u64, iterations: usize) -> Result<NcclProbe, GpuError> {
    use cudarc::driver::CudaContext;
    use cudarc::nccl::{Comm, ReduceOp, result as nccl};
    use std::time::Instant;
    let call = |what: String, e: &dyn std::fmt::Debug| GpuError::Call {
        what,
        detail: format!("{e:?}"),
    };

    let first = crate::session::gpu::probe(0)?;
    let n = first.count;
    let mut devices = vec![first.name.clone()];
    for i in 1..n {
        devices.push(crate::session::gpu::probe(i)?.name);
    }
    let nccl_version = nccl::get_nccl_version().map_err(|e| call("ncclGetVersion".into(), &e))?;
    let mut streams = Vec::with_capacity(n);
    for i in 0..n {
        let ctx = CudaContext::new(i).map_err(|e| call(format!("cuda:{i}"), &e))?;
        streams.push(
            ctx.new_stream()
                .map_err(|e| call(format!("cuda:{i}: creating a stream"), &e))?,
        );
    }
    let t = Instant::now();
    let comms = Comm::from_devices(streams.clone())
        .map_err(|e| call(format!("ncclCommInitAll over {n} GPU(s)"), &e))?;
    let init_ms = t.elapsed().as_secs_f64() * 1e3;

    let elems = (bytes / 4).max(1) as usize;
    let mut sends = Vec::with_capacity(n);
    let mut recvs = Vec::with_capacity(n);
    for (r, s) in streams.iter().enumerate() {
        let alloc = |e: cudarc::driver::DriverError| {
            call(format!("cuda:{r}: allocating 2 × {bytes} bytes"), &e)
        };
        sends.push(s.clone_htod(&vec![(r + 1) as f32; elems]).map_err(alloc)?);
        recvs.push(s.alloc_zeros::<f32>(elems).map_err(alloc)?);
    }
    // Out of place, as nccl-tests time it: on one GPU an in-place
    // all-reduce moves no data at all.
    let all_reduce = |recvs: &mut Vec<cudarc::driver::CudaSlice<f32>>| -> Result<(), GpuError> {
        nccl::group_start().map_err(|e| call("ncclGroupStart".into(), &e))?;
        for ((c, s), r) in comms.iter().zip(&sends).zip(recvs.iter_mut()) {
            c.all_reduce(s, r, &ReduceOp::Sum)
                .map_err(|e| call(format!("ncclAllReduce (rank {})", c.rank()), &e))?;
        }
        nccl::group_end().map_err(|e| call("ncclGroupEnd".into(), &e))?;
        for (i, s) in streams.iter().enumerate() {
            s.synchronize()
                .map_err(|e| call(format!("cuda:{i}: synchronize"), &e))?;
        }
        Ok(())
    };
    // The checked reduction: every element of every GPU is 1 + 2 + … + n.
    all_reduce(&mut recvs)?;
    let want = (n * (n + 1) / 2) as f32;
    let mut sum_correct = true;
    for (i, (s, b)) in streams.iter().zip(&recvs).enumerate() {
        let host = s
            .clone_dtoh(b)
            .map_err(|e| call(format!("cuda:{i}: copying back"), &e))?;
        sum_correct &= host.iter().all(|v| *v == want);
    }
    for _ in 0..3 {
        all_reduce(&mut recvs)?;
    }
    let mut ms = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        all_reduce(&mut recvs)?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    let median_ms = ms[ms.len() / 2];
    let bytes = (elems * 4) as u64;
    let algbw_gbps = bytes as f64 / (median_ms / 1e3) / 1e9;
    Ok(NcclProbe {
        nccl_version: nccl_version as i64,
        gpus: n,
        devices,
        init_ms,
        sum_correct,
        bytes,
        iterations,
        median_ms,
        algbw_gbps,
        busbw_gbps: algbw_gbps * 2.0 * (n as f64 - 1.0) / n as f64,
    })
}

impl referee_rules::report::Report for NcclProbe {
    fn write_human(
        &self,
        out: &mut dyn std::io::Write,
        _: referee_rules::report::Detail,
    ) -> std::io::Result<()> {
        let v = self.nccl_version;
        writeln!(
            out,
            "NCCL {}.{}.{} over {} GPU(s): {}",
            v / 10000,
            (v / 100) % 100,
            v % 100,
            self.gpus,
            self.devices.join(", ")
        )?;
        writeln!(out, "ncclCommInitAll: {:.1} ms", self.init_ms)?;
        writeln!(
            out,
            "all-reduce of {:.0} MiB per GPU: median {:.3} ms of {}, algbw {:.1} GB/s, busbw {:.1} GB/s",
            self.bytes as f64 / (1u64 << 20) as f64,
            self.median_ms,
            self.iterations,
            self.algbw_gbps,
            self.busbw_gbps
        )?;
        writeln!(
            out,
            "{}: the checked all-reduce {}",
            if self.sum_correct { "PASS" } else { "FAIL" },
            if self.sum_correct {
                "gave n(n+1)/2 in every element"
            } else {
                "gave a wrong sum"
            }
        )
    }

    fn write_markdown(
        &self,
        out: &mut dyn std::io::Write,
        d: referee_rules::report::Detail,
    ) -> std::io::Result<()> {
        writeln!(out, "```text")?;
        self.write_human(out, d)?;
        writeln!(out, "```")
    }
}
