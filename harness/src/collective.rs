//! Communication between the ranks of a data-parallel run. Gradients are
//! averaged every step; decisions (target reached, stop) are agreed on;
//! rank 0's numbers are broadcast. A single process uses [`Local`].

/// Operations the run loop needs from a communication back end.
pub trait Collective: Send {
    fn rank(&self) -> usize;
    fn world_size(&self) -> usize;
    /// Average `buf` element-wise over all ranks, in place.
    fn all_reduce_mean(&mut self, buf: &mut [f32]) -> Result<(), String>;
    /// Rank 0's value, on every rank.
    fn broadcast_f64(&mut self, value: f64) -> Result<f64, String>;
    /// True on every rank iff true on every rank.
    fn all_agree(&mut self, flag: bool) -> Result<bool, String>;
    /// Wait for every rank.
    fn barrier(&mut self) -> Result<(), String>;
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
    fn all_reduce_mean(&mut self, _buf: &mut [f32]) -> Result<(), String> {
        Ok(())
    }
    fn broadcast_f64(&mut self, value: f64) -> Result<f64, String> {
        Ok(value)
    }
    fn all_agree(&mut self, flag: bool) -> Result<bool, String> {
        Ok(flag)
    }
    fn barrier(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// The collective for this process's placement.
pub fn from_placement(p: &crate::launch::Placement) -> Result<Box<dyn Collective>, String> {
    if p.world_size == 1 {
        return Ok(Box::new(Local));
    }
    Err(format!(
        "this process is rank {} of {} ({}), but this referee build has no multi-process back end; rebuild with `--features mpi`",
        p.rank,
        p.world_size,
        p.launcher.as_str()
    ))
}
