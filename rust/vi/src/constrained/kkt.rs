//! The KKT factors of a constrained step (module docs of the parent), on a DEL model of `N`
//! coordinates: the integrator's own (module `constrained`) or the centred expansion of a
//! step on the Lie group (module `chart_linearize`). One body of code for both: the caller
//! writes the constraint rows and Hessians and supplies the O(n) solve of `J`.

use crate::dense::{lu_factor_in, lu_solve_in, lu_solve_lanes};
use crate::newton_direction::{Lanes, LANES};
use nalgebra::DMatrix;

/// `LANES` right-hand sides of `J`, their solutions, and the two optional rows of the
/// linearisation the solve returns with them (the momentum row `P_z x` and the summed rows of
/// the prescribed joints `J x`, module `newton_direction`), `N` rows each.
pub(crate) struct LaneBuffers<'a> {
    pub rhs: &'a mut [Lanes],
    pub sol: &'a mut [Lanes],
    pub momentum: Option<&'a mut [Lanes]>,
    pub centre: Option<&'a mut [Lanes]>,
}

impl LaneBuffers<'_> {
    /// Stores lane `l`'s solution, momentum rows and centre rows (those present) as column
    /// `col` of the column-major `out = [solutions, momenta, centres]` (columns of `sol.len()`,
    /// `n`, `n` entries, `n` the rows' length).
    fn store_lane(&self, l: usize, col: usize, out: [&mut [f64]; 3]) {
        let [sol_out, momentum_out, centre_out] = out;
        let sn = self.sol.len();
        for (x, v) in self.sol.iter().enumerate() {
            sol_out[col * sn + x] = v[l];
        }
        for (rows, out) in [(&self.momentum, momentum_out), (&self.centre, centre_out)] {
            if let Some(rows) = rows.as_deref() {
                let n = rows.len();
                for (x, v) in rows.iter().enumerate() {
                    out[col * n + x] = v[l];
                }
            }
        }
    }
}

/// The KKT factors for `m` constraints on `N` coordinates and `s` intervals (module docs of
/// the parent: a block index `β`, `γ` runs over `0..s`; `A = s·a` multipliers for `a` active
/// constraints).
#[derive(Clone, Debug)]
pub(crate) struct KktFactors {
    n: usize,
    s: usize,
    m: usize,
    /// The constraints the step imposes (increasing indices); the rows of the others are
    /// stale and never read.
    pub(crate) active: Vec<usize>,
    /// `(m, N)` `C_1 = Dh(q_k)`.
    pub(crate) c1: DMatrix<f64>,
    /// `(s·m, N)` `C_2`: row `γ·m + i` is `Dh_i` at control point `γ + 1` (the end's scaled by
    /// `e_s`); the interior rows are also the interior impulses' columns.
    pub(crate) c2: DMatrix<f64>,
    /// `(N, N)` `Σ_i λ^0_i D²h_i(q_k)` (linearisation), and the `s − 1` interior Hessians
    /// `H_β = Σ_i λ^β_i D²h_i(q^β)`.
    pub(crate) hessian: DMatrix<f64>,
    pub(crate) interior: Vec<DMatrix<f64>>,
    /// `K = J⁻¹ Ĉᵀ`: column `β·m + i` (`s·N` entries) solves for `Dh_i(q^β)ᵀ` in row block `β`;
    /// its momentum row and prescribed rows, `N` entries per column.
    k: Vec<f64>,
    k_momentum: Vec<f64>,
    k_centre: Vec<f64>,
    /// `C_2 K` of the active constraints (`A × A` column-major, row and column `β·a + r` for
    /// the `r`-th active constraint) and its LU pivots.
    schur: Vec<f64>,
    pivots: Vec<usize>,
    /// `(s·m,)` a right-hand side `f_2` of the KKT completion, then its `δΛ` (entry `β·a + r`);
    /// the same for `LANES` right-hand sides.
    pub(crate) compact: Vec<f64>,
    pub(crate) lane_compact: Vec<Lanes>,
    /// The Woodbury update of the interior Hessians (module docs of the parent): the `r`
    /// columns `(β, x)` of `U` (non-zero columns of `H_β` on unknown coordinates); per column
    /// `c` the KKT solution `W` without `H` for it (`s·N` entries at `c·s·N`), its momentum
    /// and prescribed rows (`N` at `c·N`) and multipliers (`A` at `c·s·m`); the LU of
    /// `1 − Vᵀ W_z` (`r × r` column-major) and its pivots; `(r,)` a right-hand side of it.
    support: Vec<(usize, usize)>,
    w: Vec<f64>,
    w_momentum: Vec<f64>,
    w_centre: Vec<f64>,
    w_lambda: Vec<f64>,
    woodbury: Vec<f64>,
    woodbury_pivots: Vec<usize>,
    t: Vec<f64>,
}

impl KktFactors {
    /// Factors for `m` constraints on `n` coordinates and `s` intervals (nothing for `m = 0`).
    pub(crate) fn new(n: usize, s: usize, m: usize) -> Self {
        let n = if m == 0 { 0 } else { n };
        // the interior points' columns of U: at most (s − 1) n
        let r = (s - 1) * n;
        Self {
            n,
            s,
            m,
            active: (0..m).collect(),
            c1: DMatrix::zeros(m, n),
            c2: DMatrix::zeros(s * m, n),
            hessian: DMatrix::zeros(n, n),
            interior: vec![DMatrix::zeros(n, n); if m == 0 { 0 } else { s - 1 }],
            k: vec![0.0; s * n * s * m],
            k_momentum: vec![0.0; n * s * m],
            k_centre: vec![0.0; n * s * m],
            schur: vec![0.0; s * m * s * m],
            pivots: vec![0; s * m],
            compact: vec![0.0; s * m],
            lane_compact: vec![[0.0; LANES]; s * m],
            support: Vec::with_capacity(r),
            w: vec![0.0; r * s * n],
            w_momentum: vec![0.0; r * n],
            w_centre: vec![0.0; r * n],
            w_lambda: vec![0.0; r * s * m],
            woodbury: vec![0.0; r * r],
            woodbury_pivots: vec![0; r],
            t: vec![0.0; r],
        }
    }

    /// `A`, the number of multipliers of the current step.
    pub(crate) fn size(&self) -> usize {
        self.s * self.active.len()
    }

    /// Factors the KKT system (module docs of the parent) once `c1`, `c2` and `interior` hold
    /// the step's rows and Hessians and `solve` solves `J x = f` by the current factorisation
    /// (with the momentum and prescribed rows that `buf` asks for): `K`, the LU of `C_2 K`,
    /// and, where the `H_β` are non-zero on coordinates not `prescribed` (`(N,)`), `W` and the
    /// LU of `1 − Vᵀ W_z`. `false` when either LU is singular. O((A + r) s² N + A³ + r³).
    /// `keep_k`: `K` (and its rows) from the last call still solves the current factorisation
    /// for the current `Ĉ` — a simplified-Newton iteration of a one-interval step, whose `Ĉ`
    /// is `C_1` alone —, so only `C_2 K` is formed again (O(A² N + A³)).
    pub(crate) fn factor(&mut self, buf: &mut LaneBuffers<'_>, prescribed: &[bool], keep_k: bool, mut solve: impl FnMut(&mut LaneBuffers<'_>)) -> bool {
        let (n, s, m, sn) = (self.n, self.s, self.m, self.s * self.n);
        let a = self.active.len();
        let big = s * a;
        let zero = [0.0; LANES];
        debug_assert!(!keep_k || s == 1, "K follows the interior rows of C_2 for s ≥ 2");
        // LANES columns of Ĉᵀ at a time
        for c0 in (0..if keep_k { 0 } else { big }).step_by(LANES) {
            let lanes = LANES.min(big - c0);
            buf.rhs.fill(zero);
            for l in 0..lanes {
                let (beta, i) = ((c0 + l) / a, self.active[(c0 + l) % a]);
                let row = if beta == 0 { row(&self.c1, i) } else { row(&self.c2, (beta - 1) * m + i) };
                for (r, c) in buf.rhs[beta * n..(beta + 1) * n].iter_mut().zip(row) {
                    r[l] = c;
                }
            }
            solve(buf);
            for l in 0..lanes {
                let col = ((c0 + l) / a) * m + self.active[(c0 + l) % a];
                buf.store_lane(l, col, [&mut self.k, &mut self.k_momentum, &mut self.k_centre]);
            }
        }
        for gr in 0..big {
            let (g, i) = (gr / a, self.active[gr % a]);
            for bc in 0..big {
                let col = (bc / a) * m + self.active[bc % a];
                self.schur[bc * big + gr] = row(&self.c2, g * m + i).zip(&self.k[col * sn + g * n..col * sn + (g + 1) * n]).map(|(c, k)| c * k).sum();
            }
        }
        if !lu_factor_in(&mut self.schur[..big * big], big, &mut self.pivots) {
            return false;
        }
        self.support.clear();
        for beta in 1..s {
            let h = &self.interior[beta - 1];
            self.support.extend((0..n).filter(|&x| !prescribed[x] && h.column(x).iter().any(|&v| v != 0.0)).map(|x| (beta, x)));
        }
        let r = self.support.len();
        if r == 0 {
            return true;
        }
        let sm = s * m;
        for c0 in (0..r).step_by(LANES) {
            let lanes = LANES.min(r - c0);
            buf.rhs.fill(zero);
            for l in 0..lanes {
                let (beta, x) = self.support[c0 + l];
                for j in 0..n {
                    buf.rhs[beta * n + j][l] = self.interior[beta - 1][(j, x)];
                }
            }
            solve(buf);
            let mut compact = std::mem::take(&mut self.lane_compact);
            compact[..big].fill(zero);
            self.complete(&mut *buf.sol, buf.momentum.as_deref_mut(), buf.centre.as_deref_mut(), &mut compact);
            for l in 0..lanes {
                let c = c0 + l;
                buf.store_lane(l, c, [&mut self.w, &mut self.w_momentum, &mut self.w_centre]);
                for (w, f) in self.w_lambda[c * sm..c * sm + big].iter_mut().zip(&compact) {
                    *w = f[l];
                }
            }
            self.lane_compact = compact;
        }
        for (row, &(beta, x)) in self.support.iter().enumerate() {
            for col in 0..r {
                let unit = if row == col { 1.0 } else { 0.0 };
                self.woodbury[col * r + row] = unit - self.w[col * sn + (beta - 1) * n + x];
            }
        }
        lu_factor_in(&mut self.woodbury[..r * r], r, &mut self.woodbury_pivots)
    }

    /// The KKT solutions of all `LANES` lanes (module docs of the parent): on entry
    /// `lane_compact[..A]` holds each lane's `f_2` and `buf.sol` its `w = J⁻¹ f_1` (with its rows
    /// in `buf`); on return `lane_compact[..A]` holds `δΛ` and `buf` the solutions `δz` and
    /// their rows. [`Self::complete`] on the lanes together, then [`Self::add_interior`] lane by
    /// lane. Each lane is rounded as a solve of that lane alone.
    pub(crate) fn solve_lanes(&mut self, buf: &mut LaneBuffers<'_>) {
        let mut compact = std::mem::take(&mut self.lane_compact);
        self.complete(&mut *buf.sol, buf.momentum.as_deref_mut(), buf.centre.as_deref_mut(), &mut compact);
        for l in 0..LANES {
            self.add_interior(&mut *buf.sol, buf.momentum.as_deref_mut(), buf.centre.as_deref_mut(), &mut compact, l);
        }
        self.lane_compact = compact;
    }

    /// [`Self::solve_lanes`] for one right-hand side `x` (`(s·N,)`, no rows: a Newton
    /// direction), `f_2` and `δΛ` in `compact[..A]`.
    pub(crate) fn solve_one(&mut self, x: &mut [f64]) {
        let x = x.as_chunks_mut::<1>().0;
        let mut compact = std::mem::take(&mut self.compact);
        let one = compact.as_chunks_mut::<1>().0;
        self.complete(x, None, None, one);
        self.add_interior(x, None, None, one, 0);
        self.compact = compact;
    }

    /// The completion without `H` of `W` right-hand sides: `δΛ = (C_2 K)⁻¹ (f_2 − C_2 w)` in
    /// `compact[..A]` (which holds `f_2` on entry), `w += K δΛ` and its rows. O(A (s N + A)) per
    /// right-hand side.
    fn complete<const W: usize>(
        &self,
        sol: &mut [[f64; W]],
        mut momentum: Option<&mut [[f64; W]]>,
        mut centre: Option<&mut [[f64; W]]>,
        compact: &mut [[f64; W]],
    ) {
        let (n, sn, m, a) = (self.n, self.s * self.n, self.m, self.active.len());
        let big = self.s * a;
        for (gr, f) in compact.iter_mut().enumerate().take(big) {
            let (g, i) = (gr / a, self.active[gr % a]);
            let mut dot = [0.0; W];
            for (w, c) in sol[g * n..(g + 1) * n].iter().zip(row(&self.c2, g * m + i)) {
                // a contact's gradient is zero off its body's path
                if c == 0.0 {
                    continue;
                }
                for l in 0..W {
                    dot[l] += c * w[l];
                }
            }
            for l in 0..W {
                f[l] -= dot[l];
            }
        }
        if W == 1 {
            lu_solve_in(&self.schur[..big * big], big, &self.pivots, compact[..big].as_flattened_mut());
        } else {
            lu_solve_lanes(&self.schur[..big * big], big, &self.pivots, &mut compact[..big]);
        }
        for (bc, dl) in compact.iter().enumerate().take(big) {
            let col = (bc / a) * m + self.active[bc % a];
            for (y, &k) in sol.iter_mut().zip(&self.k[col * sn..(col + 1) * sn]) {
                for l in 0..W {
                    y[l] += k * dl[l];
                }
            }
            for (rows, k) in [(momentum.as_deref_mut(), &self.k_momentum), (centre.as_deref_mut(), &self.k_centre)] {
                if let Some(rows) = rows {
                    for (y, &k) in rows.iter_mut().zip(&k[col * n..(col + 1) * n]) {
                        for l in 0..W {
                            y[l] += k * dl[l];
                        }
                    }
                }
            }
        }
    }

    /// The interior Hessians' part (Woodbury) of lane `l`: `t = (1 − Vᵀ W_z)⁻¹ Vᵀ ŷ_z`, then
    /// `sol += W_z t` and its rows, `compact[..A] += W_Λ t`. Nothing without interior Hessians
    /// (`s = 1`). O(r (s N + A) + r²).
    fn add_interior<const W: usize>(
        &mut self,
        sol: &mut [[f64; W]],
        mut momentum: Option<&mut [[f64; W]]>,
        mut centre: Option<&mut [[f64; W]]>,
        compact: &mut [[f64; W]],
        l: usize,
    ) {
        let r = self.support.len();
        if r == 0 {
            return;
        }
        let (n, sn, sm) = (self.n, self.s * self.n, self.s * self.m);
        let big = self.size();
        for (t, &(beta, x)) in self.t.iter_mut().zip(&self.support) {
            *t = sol[(beta - 1) * n + x][l];
        }
        lu_solve_in(&self.woodbury[..r * r], r, &self.woodbury_pivots, &mut self.t[..r]);
        for c in 0..r {
            let tc = self.t[c];
            for (x, y) in sol.iter_mut().enumerate().take(sn) {
                y[l] += self.w[c * sn + x] * tc;
            }
            for (rows, w) in [(momentum.as_deref_mut(), &self.w_momentum), (centre.as_deref_mut(), &self.w_centre)] {
                if let Some(rows) = rows {
                    for (x, y) in rows.iter_mut().enumerate().take(n) {
                        y[l] += w[c * n + x] * tc;
                    }
                }
            }
            for (q, f) in compact.iter_mut().enumerate().take(big) {
                f[l] += self.w_lambda[c * sm + q] * tc;
            }
        }
    }
}

/// Row `r` of the column-major `m` (nalgebra's `(r, c)` indexing of a dynamic matrix costs
/// ~25 instructions per entry, and these rows are read once per right-hand side).
pub(crate) fn row(m: &DMatrix<f64>, r: usize) -> impl Iterator<Item = f64> + '_ {
    m.as_slice().iter().skip(r).step_by(m.nrows()).copied()
}
