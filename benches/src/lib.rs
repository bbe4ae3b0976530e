//! Shared pieces of vidyn's benchmarks: the robot list, seeded input pools, the state-file
//! format read by both timing programs, and the timing method.
//!
//! # State file (`VDYNST01`)
//! Written by `benches/compare.py`, read by `vidyn_timings` and `benches/peer/pinocchio_timings`.
//! Little-endian: the 8 bytes `VDYNST01`, then `u64 nq`, `u64 nv`, `u64 count`, then four
//! row-major `f64` arrays: `q (count, nq)`, `v (count, nv)`, `a (count, nv)`, `tau (count, nv)`.
//! Each library gets its own file, in its own configuration layout and joint order, written
//! from the same draws.
//!
//! # Timing method (shared with the C++ peer)
//! One warm-up pass over the pool, then `P` passes with `P ≥ min_passes`, continued while the
//! total time is under `min_time` (at most 10 001 passes). A pass calls the algorithm once per
//! pooled state, in order, and yields `elapsed / count`. Reported: the median, minimum and
//! maximum of these per-pass means.

use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;
use vidyn_rbd::urdf::RootJoint;
use vidyn_rbd::Model;

/// A robot of example-robot-data: short name, URDF path relative to the `robots/` directory,
/// root joint.
#[derive(Clone, Copy, Debug)]
pub struct RobotSpec {
    pub name: &'static str,
    pub urdf: &'static str,
    pub root: RootJoint,
}

/// The benchmarked example-robot-data robots (`compare.py` keeps the same list).
pub const ROBOTS: &[RobotSpec] = &[
    RobotSpec { name: "double_pendulum", urdf: "double_pendulum_description/urdf/double_pendulum.urdf", root: RootJoint::Fixed },
    RobotSpec { name: "ur5", urdf: "ur_description/urdf/ur5_robot.urdf", root: RootJoint::Fixed },
    RobotSpec { name: "panda", urdf: "panda_description/urdf/panda.urdf", root: RootJoint::Fixed },
    RobotSpec { name: "solo12", urdf: "solo_description/robots/solo12.urdf", root: RootJoint::FreeFlyer },
    RobotSpec { name: "talos", urdf: "talos_data/robots/talos_reduced.urdf", root: RootJoint::FreeFlyer },
    RobotSpec { name: "talos_full", urdf: "talos_data/robots/talos_full_v2.urdf", root: RootJoint::FreeFlyer },
];

/// Numbers of links of the benchmarked pendulum chains.
pub const CHAIN_SIZES: &[usize] = &[5, 10, 20, 50, 100, 200];

/// Environment variable naming example-robot-data's `robots/` directory.
pub const ROBOTS_DIR_VAR: &str = "VIDYN_ROBOTS_DIR";

/// Loads `spec` from the directory in [`ROBOTS_DIR_VAR`]; `None` when the variable is unset.
///
/// # Panics
/// When the variable is set but the URDF cannot be loaded.
#[must_use]
pub fn load_robot(spec: &RobotSpec) -> Option<Model> {
    let dir = std::env::var_os(ROBOTS_DIR_VAR)?;
    let path = Path::new(&dir).join(spec.urdf);
    Some(vidyn_rbd::urdf::from_urdf_file(&path, spec.root).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// A pool of `count` states, `q` in vidyn's layout.
#[derive(Clone, Debug, PartialEq)]
pub struct States {
    pub nq: usize,
    pub nv: usize,
    pub count: usize,
    q: Vec<f64>,
    v: Vec<f64>,
    a: Vec<f64>,
    tau: Vec<f64>,
}

impl States {
    #[must_use]
    pub fn q(&self, k: usize) -> &[f64] {
        &self.q[k * self.nq..(k + 1) * self.nq]
    }
    #[must_use]
    pub fn v(&self, k: usize) -> &[f64] {
        &self.v[k * self.nv..(k + 1) * self.nv]
    }
    #[must_use]
    pub fn a(&self, k: usize) -> &[f64] {
        &self.a[k * self.nv..(k + 1) * self.nv]
    }
    #[must_use]
    pub fn tau(&self, k: usize) -> &[f64] {
        &self.tau[k * self.nv..(k + 1) * self.nv]
    }

    /// `count` seeded random states: `q` from [`vidyn_rbd::random_configuration`] (free-flyer
    /// translations in `[-1, 1]`), `v`, `a`, `tau` standard normal.
    #[must_use]
    pub fn random(model: &Model, count: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (nq, nv) = (model.nq, model.nv);
        let mut q = Vec::with_capacity(count * nq);
        for _ in 0..count {
            q.extend(vidyn_rbd::random_configuration(model, &mut rng));
        }
        let mut normals = |n: usize| (0..n).map(|_| standard_normal(&mut rng)).collect::<Vec<_>>();
        let (v, a, tau) = (normals(count * nv), normals(count * nv), normals(count * nv));
        Self { nq, nv, count, q, v, a, tau }
    }

    /// Reads a `VDYNST01` state file.
    pub fn read(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref();
        let mut bytes = Vec::new();
        std::fs::File::open(path)?.read_to_end(&mut bytes)?;
        let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {what}", path.display()));
        if bytes.len() < 32 || &bytes[..8] != b"VDYNST01" {
            return Err(bad("not a VDYNST01 state file"));
        }
        let word = |i: usize| u64::from_le_bytes(bytes[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes")) as usize;
        let (nq, nv, count) = (word(0), word(1), word(2));
        let floats = count * (nq + 3 * nv);
        if bytes.len() != 32 + 8 * floats {
            return Err(bad("size does not match its header"));
        }
        let mut data = bytes[32..].chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")));
        let mut take = |n: usize| data.by_ref().take(n).collect::<Vec<_>>();
        let q = take(count * nq);
        let (v, a, tau) = (take(count * nv), take(count * nv), take(count * nv));
        Ok(Self { nq, nv, count, q, v, a, tau })
    }

    /// Writes a `VDYNST01` state file.
    pub fn write(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        let mut out = Vec::with_capacity(32 + 8 * (self.q.len() + 3 * self.v.len()));
        out.extend_from_slice(b"VDYNST01");
        for x in [self.nq, self.nv, self.count] {
            out.extend_from_slice(&(x as u64).to_le_bytes());
        }
        for x in self.q.iter().chain(&self.v).chain(&self.a).chain(&self.tau) {
            out.extend_from_slice(&x.to_le_bytes());
        }
        std::fs::File::create(path)?.write_all(&out)
    }
}

/// A standard normal draw (Box–Muller).
fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Result of [`time_passes`], in nanoseconds per call.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub median_ns: f64,
    pub min_ns: f64,
    pub max_ns: f64,
    pub passes: usize,
}

/// Times `call(k)` for `k` in `0..count` (see the module documentation).
pub fn time_passes(count: usize, min_passes: usize, min_time: f64, mut call: impl FnMut(usize)) -> Timing {
    for k in 0..count {
        call(k);
    }
    let mut per_call = Vec::new();
    let mut total = 0.0;
    while per_call.len() < min_passes || (total < min_time && per_call.len() < 10_001) {
        let t0 = Instant::now();
        for k in 0..count {
            call(k);
        }
        let dt = t0.elapsed().as_secs_f64();
        total += dt;
        per_call.push(dt * 1e9 / count as f64);
    }
    per_call.sort_by(f64::total_cmp);
    let n = per_call.len();
    let median_ns = if n % 2 == 1 { per_call[n / 2] } else { 0.5 * (per_call[n / 2 - 1] + per_call[n / 2]) };
    Timing { median_ns, min_ns: per_call[0], max_ns: per_call[n - 1], passes: n }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_file_round_trips() {
        let model = vidyn_rbd::builders::pendulum_chain(3, false);
        let s = States::random(&model, 5, 7);
        let path = std::env::temp_dir().join(format!("vidyn_states_{}.bin", std::process::id()));
        s.write(&path).unwrap();
        let r = States::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(s, r);
        assert_eq!(r.q(4).len(), 3);
    }

    #[test]
    fn timing_reports_at_least_min_passes() {
        let t = time_passes(3, 11, 0.0, |k| {
            std::hint::black_box(k);
        });
        assert!(t.passes >= 11 && t.min_ns <= t.median_ns && t.median_ns <= t.max_ns);
    }
}
