//! The dense form of the factorisation for small steps: the DEL Jacobian's blocks from the
//! O(n·d) energy Hessians (Fan, Schultz & Murphey 2018, Algorithms 2 and 3; module `del`'s
//! `H(α, β)`), `J` factored by a pivoted LU, and every operation of
//! [`NewtonFactorization`](super::NewtonFactorization) — the solves, the batched solves with
//! the momentum row and the prescribed bodies' rows, the Jacobian–vector product — as dense
//! products with those blocks.
//!
//! Algorithms B.1/B.2 are O(s³ n) per factorisation and O(s² n) per right-hand side, but their
//! per-body 6×6 algebra has a large constant: on an 18-link chain (midpoint rule,
//! `vi_scaling`) a Newton direction took 10.7 µs against 8.0 µs for the dense LU, and the
//! linearisation 59 µs against 26 µs. A floating-base robot's linearisation on its chart
//! (module `chart_linearize`) solves about 50 right-hand sides and forms 24 Jacobian–vector
//! products per step, each a full recursion, where the dense form needs one `(s+1)n × (s+1)n`
//! block matrix and O(s²n²) per right-hand side. The crossover is measured in BENCHMARKS.md
//! ("The dense factorisation of robot-sized steps");
//! [`crate::VariationalIntegrator::with_dense_factorization_max`] sets it.
//!
//! Prescribed (kinematic) joints keep the recursive path's meaning: their rows are dropped and
//! their unknowns are inputs (`δq_i^γ = 0` in every solve), so the LU factors `J` restricted to
//! the free rows and unknowns (a chart's centred expansion prescribes the six centre
//! coordinates of each composite joint: ANYmal's keeps 18 of its 24 coordinates free).

use super::Lanes;
use crate::del::{del_block, DelTerms, JointForces, StepPoints};
use crate::dense::{lu_factor_in, lu_solve_lanes};
use crate::hessians::EnergyHessians;
use crate::scheme::Scheme;
use nalgebra::DMatrix;
use vidyn_rbd::Model;

/// The dense factors of one step (module docs). Storage is allocated by [`Self::new`].
#[derive(Clone, Debug)]
pub(crate) struct DenseFactors {
    n: usize,
    s: usize,
    /// Energy Hessians at the `s + 1` control points.
    hessians: Vec<EnergyHessians>,
    /// The blocks `∂(row x)/∂q^β` for rows `x = 0..=s` (row `s`: `p_{k+1}`) and points
    /// `β = 0..=s`, at rows `x·n`, columns `β·n`; the row `s` only after a factorisation with
    /// the momentum row.
    blocks: DMatrix<f64>,
    /// Whether `blocks` holds the momentum row and the start's columns (a linearisation's
    /// factorisation) or only the Newton Jacobian's blocks.
    complete: bool,
    /// `J` (rows `ϱ·n + i`, unknowns `(γ−1)·n + i`) on the free rows and unknowns `free`,
    /// then its LU factors, column-major `nf × nf` (`nf = free.len()`).
    lu: Vec<f64>,
    pivots: Vec<usize>,
    prescribed: Vec<bool>,
    /// The unknowns `(γ−1)·n + i` (and rows `ϱ·n + i`) of the joints not prescribed, increasing.
    free: Vec<usize>,
}

impl DenseFactors {
    pub(crate) fn new(n: usize, s: usize) -> Self {
        let p = s + 1;
        Self {
            n,
            s,
            hessians: (0..p).map(|_| EnergyHessians::new(n)).collect(),
            blocks: DMatrix::zeros(p * n, p * n),
            complete: false,
            lu: vec![0.0; s * n * s * n],
            pivots: vec![0; s * n],
            prescribed: vec![false; n],
            free: (0..s * n).collect(),
        }
    }

    pub(crate) fn set_prescribed(&mut self, prescribed: &[bool]) {
        self.prescribed.copy_from_slice(prescribed);
        let n = self.n;
        self.free = (0..self.s * n).filter(|&k| !prescribed[k % n]).collect();
    }

    /// Forms the blocks at the points of `pts` (set at the current iterate) and factors `J`;
    /// `complete`: also the start's columns and the momentum row (a linearisation needs them).
    /// `false` when `J` is numerically singular. O(s n d + s² n² + s³ n³).
    pub(crate) fn factorize(&mut self, model: &Model, sc: &Scheme, dt: f64, forces: &JointForces, pts: &StepPoints, complete: bool) -> bool {
        let (n, s) = (self.n, self.s);
        // a point of zero quadrature weight (the midpoint rule's start) enters no block
        for ((h, st), &w) in self.hessians.iter_mut().zip(&pts.states).zip(&sc.weights) {
            if w != 0.0 {
                h.update(model, st);
            }
        }
        let terms = DelTerms { scheme: sc, dt, forces };
        let (rows, first) = if complete { (s + 1, 0) } else { (s, 1) };
        for x in 0..rows {
            for beta in first..=s {
                del_block(&self.hessians, terms, x, beta, &mut self.blocks.view_mut((x * n, beta * n), (n, n)));
            }
        }
        self.complete = complete;
        let nf = self.free.len();
        for (c, &unknown) in self.free.iter().enumerate() {
            let (gamma, j) = (unknown / n + 1, unknown % n);
            let column = &mut self.lu[c * nf..(c + 1) * nf];
            for (entry, &row) in column.iter_mut().zip(&self.free) {
                *entry = self.blocks[(row, gamma * n + j)];
            }
        }
        lu_factor_in(&mut self.lu[..nf * nf], nf, &mut self.pivots)
    }

    /// Solves `J x = f` for `W` right-hand sides (`f` rows `ϱ·n + i`, `x` unknowns
    /// `(γ−1)·n + i`); the prescribed rows of `f` are ignored. Every lane is rounded as a
    /// one-lane solve rounds it.
    pub(crate) fn solve<const W: usize>(&self, f: &[[f64; W]], x: &mut [[f64; W]]) {
        let nf = self.free.len();
        // gather the free rows, solve, scatter in place (free[r] ≥ r: from the last down)
        for (xr, &row) in x.iter_mut().zip(&self.free) {
            *xr = f[row];
        }
        lu_solve_lanes(&self.lu, nf, &self.pivots, &mut x[..nf]);
        for (r, &unknown) in self.free.iter().enumerate().rev() {
            x[unknown] = x[r];
        }
        let n = self.n;
        for (k, xk) in x.iter_mut().enumerate() {
            if self.prescribed[k % n] {
                *xk = [0.0; W];
            }
        }
    }

    /// The momentum row's variation `Σ_γ ∂P/∂q^γ x_γ` of the solutions `x` into `momentum`
    /// (`(n)`), and for each prescribed body the sum over its rows `0..=s` of their variation
    /// into `prescribed_rows` (as the recursive sweep). Needs a complete factorisation.
    pub(crate) fn eliminated_rows(&self, x: &[Lanes], momentum: Option<&mut [Lanes]>, prescribed_rows: Option<&mut [Lanes]>) {
        debug_assert!(self.complete, "the factorisation does not carry the momentum row");
        let (n, s) = (self.n, self.s);
        if let Some(out) = momentum {
            out.fill([0.0; super::LANES]);
            for gamma in 1..=s {
                self.add_block_product(s, gamma, &x[(gamma - 1) * n..gamma * n], out);
            }
        }
        if let Some(out) = prescribed_rows {
            for (i, _) in self.prescribed.iter().enumerate().filter(|(_, &k)| k) {
                let mut sum = [0.0; super::LANES];
                for row in 0..=s {
                    for gamma in 1..=s {
                        let block = self.blocks.view((row * n, gamma * n), (n, n));
                        for (j, xj) in x[(gamma - 1) * n..gamma * n].iter().enumerate() {
                            let h = block[(i, j)];
                            for (v, xl) in sum.iter_mut().zip(xj) {
                                *v += h * xl;
                            }
                        }
                    }
                }
                out[i] = sum;
            }
        }
    }

    /// The DEL Jacobian–vector product for `LANES` point variations `dq` (rows `α·n + i`,
    /// `α = 0..=s`) into `out` (rows `x·n + i`, `x = 0..=s`; row `s` is `p_{k+1}`). Needs a
    /// complete factorisation.
    pub(crate) fn jvp(&self, dq: &[Lanes], out: &mut [Lanes]) {
        debug_assert!(self.complete, "the factorisation does not carry the start's columns");
        let (n, s) = (self.n, self.s);
        out.fill([0.0; super::LANES]);
        for x in 0..=s {
            for beta in 0..=s {
                self.add_block_product(x, beta, &dq[beta * n..(beta + 1) * n], &mut out[x * n..(x + 1) * n]);
            }
        }
    }

    /// `out += block(x, β) · v` for `LANES` vectors, skipping the entries no lane moves.
    fn add_block_product(&self, x: usize, beta: usize, v: &[Lanes], out: &mut [Lanes]) {
        let (n, ld) = (self.n, self.blocks.nrows());
        let columns = &self.blocks.as_slice()[beta * n * ld + x * n..];
        for (j, vj) in v.iter().enumerate() {
            if vj.iter().all(|&e| e == 0.0) {
                continue;
            }
            for (o, &h) in out[..n].iter_mut().zip(&columns[j * ld..j * ld + n]) {
                for (ol, vl) in o.iter_mut().zip(vj) {
                    *ol += h * vl;
                }
            }
        }
    }
}
